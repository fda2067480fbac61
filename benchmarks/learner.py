"""Learner speed: the RagenTorchLearner update vs a bare forward+backward of the same model on the same batch.

Run:  .venv/bin/python benchmarks/learner.py [--model DIR] [--groups 8] [--group-size 4]
The batch is real: one FrozenLake rollout of an in-process ``RagenEnvRunner`` (vLLM engine), padded by
``build_batch`` exactly as ``Ragen.training_step`` does. Timed side by side in one process:
  - learner: ``RagenTorchLearner.update`` (GRPO loss, grad clipping, metrics), one epoch;
  - bare: AdamW on ``-mean(token log-prob)`` with the same model, the same minibatches, forward+backward+step.
Trained tokens/s counts the non-padding tokens. Three settings: one minibatch per update (on-policy: no
old-log-prob pass), two minibatches (the learner first recomputes old log-probs in a no-grad pass, RAGEN's
way), and two minibatches with ``old_logprobs="engine"`` (the engine's sampling log-probs; no extra pass).
Target >= 0.85. Both sides run in the precision ``--autocast`` (default ``auto``) resolves to on this machine
(:mod:`ragen_rllib.precision`: bf16 autocast only with bf16 units, else fp32); the record names it and the CPU.
Writes benchmarks/results/learner.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")  # the rollout's vLLM engine; torch gets every core below

OUT = Path(__file__).parent / "results" / "learner.json"
ROOT = Path(__file__).resolve().parents[1]


def real_batch(model: str, args):
    from transformers import AutoTokenizer

    from ragen_rllib import RagenConfig
    from ragen_rllib.algorithms.ragen.batch import build_batch, padding_fraction
    from ragen_rllib.models.registry import resolve_model
    from ragen_rllib.runner.ragen_env_runner import RagenEnvRunner

    config = (RagenConfig().environment("ragen/FrozenLake-v0", env_config={"size": 4, "is_slippery": False})
              .rl_module(model_config={"model": model, "autocast": args.autocast})
              .training(adv_estimator="grpo", env_groups=args.groups, group_size=args.group_size, engine="vllm")
              .debugging(seed=0))
    runner = RagenEnvRunner(config=config)
    trajectories = runner.sample(step=0)
    runner.stop()
    tok = AutoTokenizer.from_pretrained(resolve_model(model))
    batch = build_batch(trajectories, tok.pad_token_id, adv_estimator="grpo")
    return config, batch, padding_fraction(batch)


def time_learner(config, batch, minibatches: int, repeats: int) -> float:
    import gymnasium as gym
    from ray.rllib.core import DEFAULT_MODULE_ID
    from ray.rllib.policy.sample_batch import MultiAgentBatch, SampleBatch

    from ragen_rllib.envs.base import text_space

    space: gym.Space = text_space()
    learner = config.build_learner(spaces={DEFAULT_MODULE_ID: (space, space)})
    rows = len(batch["input_ids"])
    mb = rows // minibatches

    def update():
        learner.update(batch=MultiAgentBatch({DEFAULT_MODULE_ID: SampleBatch(dict(batch))}, env_steps=rows),
                       minibatch_size=mb, num_epochs=1, num_total_minibatches=minibatches)

    update()  # warm-up
    t0 = time.perf_counter()
    for _ in range(repeats):
        update()
    return (time.perf_counter() - t0) / repeats


def time_bare(model_dir: str, batch, minibatches: int, repeats: int, lr: float, amp) -> float:
    import torch
    from transformers import AutoModelForCausalLM

    from ragen_rllib.logprobs import gather_token_logprobs

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).train()
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    ids = torch.as_tensor(batch["input_ids"])
    mask = torch.as_tensor(batch["loss_mask"])
    mb = len(ids) // minibatches

    def update():
        for start in range(0, mb * minibatches, mb):
            x, m = ids[start:start + mb], mask[start:start + mb]
            with torch.autocast("cpu", dtype=amp or torch.bfloat16, enabled=amp is not None):
                logits = model(input_ids=x).logits
            loss = -(gather_token_logprobs(logits, x) * m).sum() / m.sum()
            opt.zero_grad()
            loss.backward()
            opt.step()

    update()
    t0 = time.perf_counter()
    for _ in range(repeats):
        update()
    return (time.perf_counter() - t0) / repeats


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default=None,
                   help="HF id or local dir (default: the demo's warm-started model, built once when missing)")
    p.add_argument("--groups", type=int, default=8)
    p.add_argument("--group-size", type=int, default=4)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--autocast", default="auto", choices=["auto", "bfloat16", "none"],
                   help="learner and bare forward passes (auto: bf16 only on CPUs with AVX512-BF16/AMX)")
    args = p.parse_args()
    if args.model is None:
        from ragen_rllib.models.demo_model import demo_model

        args.model = str(demo_model(ROOT / ".cache"))

    import torch

    from ragen_rllib.models.registry import resolve_model
    from ragen_rllib.precision import cpu_info, resolve_autocast

    amp = resolve_autocast(args.autocast, "cpu")

    config, batch, pad = real_batch(args.model, args)
    torch.set_num_threads(os.cpu_count() or 1)
    tokens = int(batch["attention_mask"].sum())
    results = {"machine": f"{platform.machine()} {os.cpu_count()} cores", "model": args.model,
               "rows": len(batch["input_ids"]), "width": int(batch["input_ids"].shape[1]),
               "real_tokens": tokens, "padding_fraction": pad, "cpu": cpu_info(),
               "precision": "bfloat16 autocast" if amp is not None else "float32", "settings": {}}
    for minibatches, old_logprobs in ((1, "learner"), (2, "learner"), (2, "engine")):
        setting = config.copy(copy_frozen=False).training(old_logprobs=old_logprobs)
        learner_s = time_learner(setting, batch, minibatches, args.repeats)
        bare_s = time_bare(str(resolve_model(args.model)), batch, minibatches, args.repeats, config.lr, amp)
        r = {"learner_seconds": learner_s, "bare_seconds": bare_s, "learner_tokens_per_s": tokens / learner_s,
             "bare_tokens_per_s": tokens / bare_s, "learner_over_bare": bare_s / learner_s}
        name = f"{minibatches}_minibatches" + ("_engine_old_logprobs" if old_logprobs == "engine" else "")
        results["settings"][name] = r
        print(f"{name:36s}: learner {r['learner_tokens_per_s']:7.0f} tokens/s, bare "
              f"{r['bare_tokens_per_s']:7.0f} tokens/s, ratio {r['learner_over_bare']:.2f} (target >= 0.85)")
    results["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"batch {results['rows']} x {results['width']} tokens, padding {pad:.1%}; peak RSS "
          f"{results['peak_rss_mib']:.0f} MiB")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(results, indent=2))
    print(f"saved {OUT}")


if __name__ == "__main__":
    main()
