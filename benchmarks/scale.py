"""Real-size learner update: a model of Qwen2.5-0.5B-Instruct's exact architecture (random weights, built
offline) through ``RagenTorchLearner.update``, with and without LoRA, next to a bare forward+backward of the
same model on the same batch.

Run:  .venv/bin/python benchmarks/scale.py [--batch 8] [--length 1024] [--variants bare learner lora learner_short]

Each variant runs in its own process (peak RSS is a per-process high-water mark), one timed update after a
small warm-up update:
  - ``bare``: Hugging Face model, full logits, ``-mean(token log-prob)``, backward, AdamW; micro-batches of 1
    row with gradient accumulation (what the learner does with ``micro_batch_size=1``);
  - ``learner``: ``RagenTorchLearner.update`` (GRPO loss, entropy bonus with gradients, grad clipping,
    metrics), full fine-tuning, ``micro_batch_size=1``, log-probs and entropies a chunk of positions at a time
    (``model_config["logprob_chunk"]``, the default);
  - ``lora``: the same with LoRA (r=8 on every linear layer of the blocks);
  - ``learner_full_logits``: the learner with ``logprob_chunk=0`` (the whole ``[1, T, V]`` logits at once);
  - ``learner_short``: the learner at half the length (2 rows), to extrapolate the longest sequence that fits in
    16 GiB (with micro-batches of one row, peak memory grows with the length, not the batch size);
  - ``learner_gc`` / ``lora_gc``: with gradient checkpointing (``model_config["gradient_checkpointing"]``);
  - any variant + ``_mmap`` (e.g. ``bare_mmap``, ``learner_gc_mmap``): under ``MALLOC_MMAP_THRESHOLD_=1048576``
    (see MMAP_ENV); ratios compare each with the bare loop under the same allocator setting.
Both sides run in the precision ``--autocast`` resolves to on this machine (bf16 autocast only on CPUs with
bf16 units). Trained tokens/s counts the loss-masked tokens. Writes benchmarks/results/scale.json (variants
not run keep their last record there).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = Path(__file__).parent / "results" / "scale.json"
MODEL_DIR = ROOT / ".cache" / "models" / "qwen2.5-0.5b-arch-random"
LORA = {"r": 8, "lora_alpha": 16, "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                                                     "down_proj"]}
GIB = 1024 ** 3
#: variants named ``<variant>_mmap`` run under glibc's fixed 1 MiB mmap threshold: every larger allocation is
#: its own mapping, returned to the system when freed (by default the threshold rises to 32 MiB as big blocks
#: are freed, and freed heap memory stays resident)
MMAP_SUFFIX, MMAP_ENV = "_mmap", {"MALLOC_MMAP_THRESHOLD_": "1048576"}


def build_model(path: Path = MODEL_DIR) -> Path:
    """Qwen2.5-0.5B-Instruct's architecture with random weights (seed 0), saved once."""
    if (path / "config.json").exists():
        return path
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(vocab_size=151936, hidden_size=896, num_hidden_layers=24, num_attention_heads=14,
                         num_key_value_heads=2, intermediate_size=4864, max_position_embeddings=32768,
                         rope_theta=1_000_000.0, tie_word_embeddings=True, rms_norm_eps=1e-6, torch_dtype="float32")
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(config)
    tmp = path.with_name(path.name + ".partial")
    model.save_pretrained(tmp, safe_serialization=True)
    os.replace(tmp, path)
    return path


def batch(rows: int, length: int) -> dict:
    """Random token ids; the first quarter of each row is the prompt, the rest is trained."""
    import numpy as np

    rng = np.random.default_rng(0)
    mask = np.zeros((rows, length), dtype=np.float32)
    mask[:, length // 4:] = 1.0
    return {"input_ids": rng.integers(0, 151936, (rows, length)), "loss_mask": mask,
            "sample_logprobs": -rng.random((rows, length), dtype=np.float32) * mask,
            "advantages": np.where(np.arange(rows)[:, None] % 2 == 0, 1.0, -1.0).astype(np.float32) * mask,
            "loss_scale": np.ones(rows, dtype=np.float32), "micro_weight": np.ones(rows, dtype=np.float32)}


def run_learner(cols: dict, autocast: str, lora: bool, chunk: int | None, checkpointing: bool = False):
    from ray.rllib.core import DEFAULT_MODULE_ID
    from ray.rllib.policy.sample_batch import MultiAgentBatch, SampleBatch

    from ragen_rllib import RagenConfig
    from ragen_rllib.envs.base import text_space

    rows = len(cols["input_ids"])
    model_config = {"model": str(MODEL_DIR), "autocast": autocast, "lora": LORA if lora else None}
    if chunk is not None:
        model_config["logprob_chunk"] = chunk
    if checkpointing:
        model_config["gradient_checkpointing"] = True
    config = (RagenConfig().environment("ragen/FrozenLake-v0").rl_module(model_config=model_config)
              .training(adv_estimator="grpo", env_groups=1, group_size=max(rows, 2), minibatch_size=rows,
                        micro_batch_size=1, old_logprobs="engine", lr=1e-5 if lora else 1e-6))
    learner = config.build_learner(spaces={DEFAULT_MODULE_ID: (text_space(), text_space())})

    def update(data: dict) -> None:
        n = len(data["input_ids"])
        learner.update(batch=MultiAgentBatch({DEFAULT_MODULE_ID: SampleBatch(dict(data))}, env_steps=n),
                       minibatch_size=n, num_epochs=1, num_total_minibatches=1)

    return update


def run_bare(autocast: str):
    import torch
    from transformers import AutoModelForCausalLM

    from ragen_rllib.core.precision import resolve_autocast
    from ragen_rllib.rl.logprobs import gather_token_logprobs

    amp = resolve_autocast(autocast, "cpu")
    model = AutoModelForCausalLM.from_pretrained(MODEL_DIR, dtype=torch.float32).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-6)

    def update(data: dict) -> None:
        ids, mask = torch.as_tensor(data["input_ids"]), torch.as_tensor(data["loss_mask"])
        opt.zero_grad()
        for i in range(len(ids)):  # micro-batches of one row, gradient accumulated
            with torch.autocast("cpu", dtype=amp or torch.bfloat16, enabled=amp is not None):
                logits = model(input_ids=ids[i:i + 1]).logits
            loss = -(gather_token_logprobs(logits, ids[i:i + 1]) * mask[i:i + 1]).sum() / mask.sum()
            loss.backward()
            del logits, loss
        opt.step()

    return update


def one_variant(name: str, rows: int, length: int, autocast: str) -> dict:
    """Runs in a child process: build, warm up on 1 x 64 tokens, time one update of rows x length."""
    import torch

    torch.set_num_threads(os.cpu_count() or 1)
    start = time.perf_counter()
    base = name.removesuffix(MMAP_SUFFIX)
    if base == "bare":
        update = run_bare(autocast)
    else:
        chunk = 0 if base == "learner_full_logits" else None
        update = run_learner(batch(rows, length), autocast, lora=base.startswith("lora"), chunk=chunk,
                             checkpointing=base.endswith("_gc"))
    build_s = time.perf_counter() - start
    update(batch(1, 64))  # warm-up: lazy allocations, thread pools
    data = batch(rows, length)
    start = time.perf_counter()
    update(data)
    seconds = time.perf_counter() - start
    trained = int(data["loss_mask"].sum())
    return {"variant": name, "rows": rows, "length": length, "seconds_per_update": seconds,
            "trained_tokens_per_s": trained / seconds, "tokens_per_s": rows * length / seconds,
            "peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 ** 2, "build_s": build_s}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--length", type=int, default=1024)
    p.add_argument("--autocast", default="auto", choices=["auto", "bfloat16", "none"])
    p.add_argument("--variants", nargs="+", default=["bare", "learner", "lora", "learner_short"])
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        rows, length = (2, args.length // 2) if args.child == "learner_short" else (args.batch, args.length)
        print("RESULT " + json.dumps(one_variant(args.child, rows, length, args.autocast)), flush=True)
        return

    from ragen_rllib.core.precision import cpu_info, resolve_autocast

    build_model()
    record = {"model": "Qwen2.5-0.5B-Instruct architecture, random weights (494M parameters, vocab 151,936)",
              "batch": args.batch, "length": args.length, "cpu": cpu_info(), "threads": os.cpu_count(),
              "precision": "bfloat16 autocast" if resolve_autocast(args.autocast, "cpu") else "float32",
              "micro_batch_size": 1, "variants": {}}
    if OUT.exists():  # re-running some variants keeps the others' last record
        record["variants"] = json.loads(OUT.read_text()).get("variants", {})
    for name in args.variants:
        env = {**os.environ, **(MMAP_ENV if name.endswith(MMAP_SUFFIX) else {})}
        proc = subprocess.run([sys.executable, __file__, "--child", name, "--batch", str(args.batch), "--length",
                               str(args.length), "--autocast", args.autocast], capture_output=True, text=True,
                              env=env)
        lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
        if proc.returncode != 0 or not lines:
            raise SystemExit(f"variant {name} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
        result = json.loads(lines[-1][len("RESULT "):])
        record["variants"][name] = result
        print(f"{name:20s} {result['rows']} x {result['length']}: {result['seconds_per_update']:7.1f} s/update, "
              f"{result['trained_tokens_per_s']:6.1f} trained tokens/s, peak RSS {result['peak_rss_gib']:.2f} GiB",
              flush=True)
    v = record["variants"]
    for bare, suffix in (("bare", ""), ("bare" + MMAP_SUFFIX, MMAP_SUFFIX)):  # each against its own allocator
        if bare not in v:
            continue
        for name in ("learner", "lora", "learner_full_logits", "learner_gc", "lora_gc"):
            if name + suffix in v:
                entry = v[name + suffix]
                entry["ratio_to_bare"] = entry["trained_tokens_per_s"] / v[bare]["trained_tokens_per_s"]
                print(f"{name + suffix} / {bare} tokens/s: {entry['ratio_to_bare']:.2f} (target >= 0.8)")
    if "learner" in v and "learner_short" in v:  # peak = static + slope * length (micro-batches of one row)
        long, short = v["learner"], v["learner_short"]
        slope = (long["peak_rss_gib"] - short["peak_rss_gib"]) / (long["length"] - short["length"])
        fits = long["length"] + (16 - long["peak_rss_gib"]) / slope if slope > 0 else None
        record["longest_length_in_16_gib"] = {"length": fits, "gib_per_1k_tokens": slope * 1000,
                                              "how": "linear extrapolation from the two learner runs; any "
                                                     "batch size fits, as micro-batches hold one row"}
        print(f"longest sequence in 16 GiB (extrapolated): {fits:.0f} tokens, any batch size" if fits else
              "peak did not grow with length")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(record, indent=2))
    print(f"saved {OUT}")


if __name__ == "__main__":
    main()
