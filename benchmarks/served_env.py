"""An env behind an OpenEnv server vs the same env in-process, inside real rollouts, in one run.

Run:  .venv/bin/python benchmarks/served_env.py [--model tiny:small] [--env SearchQA] [--reps 3]
      SmolLM2:  .venv/bin/python benchmarks/served_env.py --model gguf:smollm2-135m-instruct --name served_env_smollm2

Starts ``ragen-rllib serve-env ENV`` on 127.0.0.1, then a real ``RagenEnvRunner`` (in this process, the class
RLlib runs as an actor; vLLM engine) samples the same rollout (same seeds, so the same tokens) with the env
in-process and with ``env=http://127.0.0.1:PORT``, alternating, ``--reps`` times each. Reported: rollout seconds
of both, the protocol's overhead per env step ((served - in-process) / env steps), the generation time per turn,
and their ratio (the issue's target: the overhead is small next to generating one turn). Also a direct
measurement: the mean time of one env step through ``ServedEnv`` vs in-process. Writes
benchmarks/results/served_env.json (``--name``: NAME.json).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")  # vLLM-CPU on few cores

RESULTS = Path(__file__).parent / "results"


def make_runner(env: str, args, env_config: dict | None = None):
    from ragen_rllib import RagenConfig
    from ragen_rllib.runner.ragen_env_runner import RagenEnvRunner

    config = (RagenConfig().environment(env, env_config=env_config or {})
              .env_runners(num_cpus_per_env_runner=2)
              .rl_module(model_config={"model": args.model})
              .training(env_groups=args.groups, group_size=args.group_size, engine="vllm", max_turns=args.max_turns,
                        max_response_tokens=args.max_response_tokens, max_model_len=2048)
              .debugging(seed=0))
    return RagenEnvRunner(config=config)


def rollout_seconds(runner, step: int) -> dict:
    trajectories = runner.sample(step=step)
    info = runner.last_rollout
    return {"seconds": info["seconds"], "tokens": info["generated_tokens"],
            "env_calls": sum(int(t.metrics.get("num_actions", 0)) + 1 for t in trajectories),  # steps + reset
            "batched_turns": max(int(t.metrics.get("num_turns", 0)) for t in trajectories),
            "errors": sum(t.error is not None for t in trajectories)}


def step_latency(env_id: str, url: str, n: int) -> dict:
    """Mean seconds of one env step (the oracle's actions), in-process vs through ServedEnv."""
    from ragen_rllib.envs.loading import make_env

    out = {}
    for name, target in (("in_process", env_id), ("served", url)):
        env, times = make_env(target), []
        oracle = make_env(env_id).unwrapped
        for episode in range(n):
            env.reset(seed=episode)
            oracle.reset(seed=episode)
            done = False
            while not done:
                action = oracle.oracle_action()
                oracle.step(action)
                start = time.perf_counter()
                *_, term, trunc, _ = env.step(action)
                times.append(time.perf_counter() - start)
                done = term or trunc
        env.close()
        out[name] = {"steps": len(times), "mean_ms": 1000 * statistics.mean(times),
                     "median_ms": 1000 * statistics.median(times)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="tiny:small")
    parser.add_argument("--env", default="SearchQA", help="short name or id of a built-in env")
    parser.add_argument("--groups", type=int, default=8)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--max-turns", type=int, default=3)
    parser.add_argument("--max-response-tokens", type=int, default=64)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--name", default="served_env")
    args = parser.parse_args()
    from ragen_rllib.envs.loading import resolve_env_name
    from ragen_rllib.run.server_process import served_env

    env_id, settings = resolve_env_name(args.env)
    with served_env(env_id, settings) as url:  # the served env holds its settings
        runners = {"in_process": make_runner(env_id, args, settings), "served": make_runner(url, args)}
        for runner in runners.values():  # warm-up: compile, first connections, the BM25 index
            rollout_seconds(runner, step=1)
        runs: dict[str, list[dict]] = {k: [] for k in runners}
        for rep in range(args.reps):
            for name, runner in runners.items():
                runs[name].append(rollout_seconds(runner, step=2 + rep))
        latency = step_latency(env_id, url, n=20)
    local = [r["seconds"] for r in runs["in_process"]]
    remote = [r["seconds"] for r in runs["served"]]
    tokens = {name: [r["tokens"] for r in rs] for name, rs in runs.items()}
    calls = statistics.mean(r["env_calls"] for r in runs["served"])
    turns = statistics.mean(r["batched_turns"] for r in runs["in_process"])
    episodes = args.groups * args.group_size
    direct = latency["served"]["mean_ms"] - latency["in_process"]["mean_ms"]
    gen_ms_per_turn = 1000 * statistics.mean(local) / turns  # one batched engine call per turn
    result = {
        "benchmark": "served_env", "model": args.model, "env": env_id, "engine": "vllm",
        "episodes_per_rollout": episodes, "max_turns": args.max_turns,
        "max_response_tokens": args.max_response_tokens, "reps": args.reps,
        "rollout_seconds": {"in_process": local, "served": remote},
        "rollout_seconds_mean": {"in_process": statistics.mean(local), "served": statistics.mean(remote)},
        "rollout_seconds_std": {"in_process": statistics.pstdev(local), "served": statistics.pstdev(remote)},
        "generated_tokens": tokens, "same_tokens": tokens["in_process"] == tokens["served"],
        "env_errors": {name: [r["errors"] for r in rs] for name, rs in runs.items()},
        "env_calls_per_rollout": calls, "batched_turns_per_rollout": turns,
        "rollout_overhead_ms_per_env_call": 1000 * (statistics.mean(remote) - statistics.mean(local)) / calls,
        "step_latency": latency, "protocol_ms_per_step": direct,
        "generation_ms_per_turn_batch": gen_ms_per_turn,
        "protocol_ms_per_turn_batch": direct * calls / turns,
        "overhead_share_of_turn": direct * calls / turns / gen_ms_per_turn,
        "machine": {"cpu": _cpu(), "cores": os.cpu_count(), "python": platform.python_version()},
        "load_before": os.getloadavg(),
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{args.name}.json").write_text(json.dumps(result, indent=2) + "\n")
    shown = ("rollout_seconds_mean", "rollout_seconds_std", "same_tokens", "env_errors",
             "rollout_overhead_ms_per_env_call", "step_latency", "protocol_ms_per_step",
             "generation_ms_per_turn_batch", "overhead_share_of_turn")
    print(json.dumps({k: result[k] for k in shown}, indent=2))


def _cpu() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor()


if __name__ == "__main__":
    main()
