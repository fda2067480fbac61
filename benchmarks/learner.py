"""Learner speed: the RagenTorchLearner update vs a bare forward+backward of the same model on the same batch.

Run:  .venv/bin/python benchmarks/learner.py [--model DIR] [--groups 8] [--group-size 4]
      SmolLM2 on SimpleSokoban (no-think, 48 tokens, 5 turns; its real multi-turn trajectories):
      .venv/bin/python benchmarks/learner.py --model runs/smollm2-sokoban-nothink --env sokoban --groups 4
      --group-size 4 --micro-batch-size 4 --threads 2 --settings 1_minibatches --repeats 1 [--lora]
      --name learner_smollm2
The batch is real: one rollout (FrozenLake by default, ``--env sokoban``: SimpleSokoban 6x6) of an in-process
``RagenEnvRunner`` (vLLM engine; ``--engine-threads`` / ``--engine-dtype``), padded by ``build_batch`` exactly
as ``Ragen.training_step`` does. Timed side by side in one process:
  - learner: ``RagenTorchLearner.update`` (GRPO loss, grad clipping, metrics), one epoch;
  - bare: AdamW on ``-mean(token log-prob)`` with the same model, the same minibatches, forward+backward+step;
    with ``--micro-batch-size`` the gradient is accumulated over micro-batches of that many consecutive rows
    (each cut to its longest row), as the learner does with the same ``micro_batch_size``.
``--lora``: peft LoRA r=16 (alpha 32) on every linear layer of both sides (only the adapters train).
Trained tokens/s counts the non-padding tokens. Three settings: one minibatch per update (on-policy: no
old-log-prob pass), two minibatches (the learner first recomputes old log-probs in a no-grad pass, RAGEN's
way), and two minibatches with ``old_logprobs="engine"`` (the engine's sampling log-probs; no extra pass).
Target >= 0.85. Both sides run in the precision ``--autocast`` (default ``auto``) resolves to on this machine
(:mod:`ragen_rllib.core.precision`: bf16 autocast only with bf16 units, else fp32); the record names it and the CPU.
``--profile`` adds a torch.profiler table (top ops by self CPU time) of one update of each side.
Writes benchmarks/results/learner.json (``--name``: benchmarks/results/NAME.json).
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

os.environ.setdefault("OMP_NUM_THREADS", "1")  # the rollout's vLLM engine; torch gets every core below

OUT = Path(__file__).parent / "results" / "learner.json"
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))  # bench_envs (run as a script)
from bench_envs import ENVS, agent_settings  # noqa: E402

LORA = {"r": 16, "lora_alpha": 32,
        "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]}
SETTINGS = ("1_minibatches", "2_minibatches", "2_minibatches_engine_old_logprobs")


def real_batch(model: str, args):
    from transformers import AutoTokenizer

    from ragen_rllib import RagenConfig
    from ragen_rllib.algorithms.ragen.driver.batch import build_batch, padding_fraction
    from ragen_rllib.models.registry import resolve_model
    from ragen_rllib.runner.ragen_env_runner import RagenEnvRunner

    env = ENVS[args.env]
    engine_kwargs = {"dtype": args.engine_dtype} if args.engine_dtype else {}
    training = {"micro_batch_size": args.micro_batch_size} if args.micro_batch_size else {}
    if args.lora:
        training["lr"] = args.lr or 1e-4
    elif args.lr:
        training["lr"] = args.lr
    config = (RagenConfig().environment(env["env"], env_config=env["env_config"])
              .env_runners(num_cpus_per_env_runner=args.engine_threads)
              .rl_module(model_config={"model": model, "autocast": args.autocast, **({"lora": LORA} if args.lora
                                                                                      else {})})
              .training(adv_estimator="grpo", env_groups=args.groups, group_size=args.group_size, engine="vllm",
                        engine_kwargs=engine_kwargs, **agent_settings(args), **training)
              .debugging(seed=0))
    runner = RagenEnvRunner(config=config)
    trajectories = runner.sample(step=0)
    runner.stop()
    tok = AutoTokenizer.from_pretrained(resolve_model(model))
    batch = build_batch(trajectories, tok.pad_token_id, config=RagenConfig().training(adv_estimator="grpo"))
    return config, batch, padding_fraction(batch)


def time_learner(config, batch, minibatches: int, repeats: int, profile: bool = False):
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

    return timed(update, repeats, profile)


def timed(update, repeats: int, profile: bool):
    """Seconds per ``update`` after one warm-up call (and, with ``profile``, a profiled extra call's table)."""
    update()  # warm-up
    t0 = time.perf_counter()
    for _ in range(repeats):
        update()
    seconds = (time.perf_counter() - t0) / repeats
    if not profile:
        return seconds, None
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
        update()
    return seconds, prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25)


def time_bare(model_dir: str, batch, minibatches: int, repeats: int, lr: float, amp, micro_batch_size: int | None,
              lora: bool, profile: bool = False):
    import torch
    from transformers import AutoModelForCausalLM

    from ragen_rllib.rl.logprobs import gather_token_logprobs

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    if lora:
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(task_type="CAUSAL_LM", **LORA))
    model.train()
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr)
    ids = torch.as_tensor(batch["input_ids"])
    mask = torch.as_tensor(batch["loss_mask"])
    lengths = torch.as_tensor(batch["attention_mask"]).sum(1)
    mb = len(ids) // minibatches
    micro = micro_batch_size or mb

    def update():
        for start in range(0, mb * minibatches, mb):
            opt.zero_grad()
            total = mask[start:start + mb].sum()
            for first in range(start, start + mb, micro):
                rows = slice(first, min(first + micro, start + mb))
                width = int(lengths[rows].max())  # each micro-batch cut to its longest row
                x, m = ids[rows, :width], mask[rows, :width]
                with torch.autocast("cpu", dtype=amp or torch.bfloat16, enabled=amp is not None):
                    logits = model(input_ids=x).logits
                loss = -(gather_token_logprobs(logits, x) * m).sum() / total
                loss.backward()
            opt.step()

    return timed(update, repeats, profile)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default=None,
                   help="HF id or local dir (default: the demo's warm-started model, built once when missing)")
    p.add_argument("--groups", type=int, default=8)
    p.add_argument("--group-size", type=int, default=4)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--autocast", default="auto", choices=["auto", "bfloat16", "none"],
                   help="learner and bare forward passes (auto: bf16 only on CPUs with AVX512-BF16/AMX)")
    p.add_argument("--env", choices=list(ENVS), default="frozenlake",
                   help="rollout env of the batch (sokoban: SimpleSokoban 6x6, 1 box; no-think, 48 tokens, 5 turns)")
    p.add_argument("--enable-think", action=argparse.BooleanOptionalAction, default=None,
                   help="agent setting (default: the env preset's, else the agent's)")
    p.add_argument("--max-response-tokens", type=int, default=None)
    p.add_argument("--max-turns", type=int, default=None)
    p.add_argument("--engine-threads", type=int, default=1, help="the rollout engine's threads")
    p.add_argument("--engine-dtype", default=None, help="the rollout engine's weights (default: auto, fp32 on CPU)")
    p.add_argument("--lora", action="store_true", help="LoRA r=16 on every linear layer, learner and bare")
    p.add_argument("--lr", type=float, default=None, help="default: the config's (LoRA: 1e-4)")
    p.add_argument("--micro-batch-size", type=int, default=None,
                   help="trajectories per forward/backward on both sides (default: the learner's default; the bare "
                   "loop then takes whole minibatches)")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="torch threads of both sides")
    p.add_argument("--settings", nargs="+", choices=SETTINGS, default=list(SETTINGS))
    p.add_argument("--profile", action="store_true", help="torch.profiler tables of one update per side")
    p.add_argument("--name", default="learner", help="results file name: benchmarks/results/NAME.json")
    args = p.parse_args()
    if args.model is None:
        from ragen_rllib.recipes.demo_model import demo_model

        args.model = str(demo_model(ROOT / ".cache"))

    import torch

    from ragen_rllib.core.precision import cpu_info, resolve_autocast
    from ragen_rllib.models.registry import resolve_model

    amp = resolve_autocast(args.autocast, "cpu")

    config, batch, pad = real_batch(args.model, args)
    torch.set_num_threads(args.threads)
    tokens = int(batch["attention_mask"].sum())
    lengths = batch["attention_mask"].sum(1)
    results = {"machine": f"{platform.machine()} {os.cpu_count()} cores", "model": args.model,
               "command": " ".join(["python", *sys.argv]),
               "rows": len(batch["input_ids"]), "width": int(batch["input_ids"].shape[1]),
               "row_tokens": {"min": int(lengths.min()), "mean": float(lengths.mean()), "max": int(lengths.max())},
               "real_tokens": tokens, "loss_tokens": int(batch["loss_mask"].sum()), "padding_fraction": pad,
               "cpu": cpu_info(), "precision": "bfloat16 autocast" if amp is not None else "float32",
               "config": {"env": args.env, "env_config": ENVS[args.env]["env_config"], **agent_settings(args),
                          "groups": args.groups, "group_size": args.group_size, "lora": LORA if args.lora else None,
                          "lr": config.lr, "micro_batch_size": config.micro_batch_size,
                          "max_tokens_per_micro_batch": getattr(config, "max_tokens_per_micro_batch", None),
                          "learner_memory_gib": getattr(config, "learner_memory_gib", None),
                          "bare_micro_batch_size": args.micro_batch_size, "torch_threads": args.threads,
                          "engine_threads": args.engine_threads, "engine_dtype": args.engine_dtype or "auto",
                          "entropy_coeff": config.entropy_coeff, "repeats": args.repeats},
               "settings": {}}
    for name in args.settings:
        minibatches = 1 if name.startswith("1_") else 2
        old_logprobs = "engine" if name.endswith("engine_old_logprobs") else "learner"
        setting = config.copy(copy_frozen=False).training(old_logprobs=old_logprobs)
        learner_s, learner_prof = time_learner(setting, batch, minibatches, args.repeats, args.profile)
        bare_s, bare_prof = time_bare(str(resolve_model(args.model)), batch, minibatches, args.repeats, config.lr,
                                      amp, args.micro_batch_size, args.lora, args.profile)
        r = {"learner_seconds": learner_s, "bare_seconds": bare_s, "learner_tokens_per_s": tokens / learner_s,
             "bare_tokens_per_s": tokens / bare_s, "learner_over_bare": bare_s / learner_s}
        if args.profile:
            r["profile"] = {"learner": learner_prof, "bare": bare_prof}
            print(f"--- {name}: learner profile\n{learner_prof}\n--- bare profile\n{bare_prof}")
        results["settings"][name] = r
        print(f"{name:36s}: learner {r['learner_tokens_per_s']:7.0f} tokens/s, bare "
              f"{r['bare_tokens_per_s']:7.0f} tokens/s, ratio {r['learner_over_bare']:.2f} (target >= 0.85)")
    results["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"batch {results['rows']} x {results['width']} tokens, padding {pad:.1%}; peak RSS "
          f"{results['peak_rss_mib']:.0f} MiB")
    out = OUT.with_name(f"{args.name}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    print(f"CPU {results['cpu']['model']}; saved {out}")


if __name__ == "__main__":
    main()
