"""GPU check: the learner's update of a Qwen2.5-0.5B-architecture model (random weights) in bf16 autocast, with and
without LoRA, on one CUDA device; prints peak GPU memory and trained tokens/s.

Run (on a CUDA machine with torch, transformers and peft; Ray and vLLM are not needed):
    python benchmarks/gpu_check.py [--batch 8] [--length 1024]
    python benchmarks/gpu_check.py --dry-run      # on CPU, a small model: checks the script itself

It runs the learner's own math, not RLlib's plumbing (the GPU image has no Ray): per micro-batch of one row,
the decoder's last hidden states under bf16 autocast, token log-probs and entropies a chunk of positions at a
time (``ragen_rllib.rl.logprobs.chunked_token_logprobs``, as ``RagenTorchRLModule`` does), the clipped policy loss
and entropy bonus (``ragen_rllib.rl.losses``), gradient accumulation, grad-norm clipping and one AdamW step:
fp32 master weights and optimizer state, as the learner keeps them. One warm-up update, then one timed update.
Writes ``$OUT/gpu_check.json`` when ``OUT`` is set (the device machine's output folder), else
benchmarks/results/gpu_check.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))  # the package, without installing it

QWEN05B = dict(vocab_size=151936, hidden_size=896, num_hidden_layers=24, num_attention_heads=14,
               num_key_value_heads=2, intermediate_size=4864, max_position_embeddings=32768,
               rope_theta=1_000_000.0, tie_word_embeddings=True, rms_norm_eps=1e-6)
SMALL = dict(vocab_size=2048, hidden_size=64, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
             intermediate_size=128, max_position_embeddings=2048, tie_word_embeddings=True)
LORA = dict(r=8, lora_alpha=16, target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                                                "down_proj"])


def update_fn(model, device: str, lora: bool, lr: float):
    """One learner update over a batch (dict of [B, T] tensors), micro-batches of one row."""
    import torch

    from ragen_rllib.rl.logprobs import chunked_token_logprobs
    from ragen_rllib.rl.losses import aggregate, policy_loss

    base = model.get_base_model() if lora else model
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr)

    def update(batch: dict) -> None:
        opt.zero_grad(set_to_none=True)
        rows = batch["input_ids"].shape[0]
        for i in range(rows):
            ids, mask = batch["input_ids"][i:i + 1], batch["loss_mask"][i:i + 1]
            with torch.autocast(device, dtype=torch.bfloat16):
                hidden = base.get_decoder()(input_ids=ids).last_hidden_state
                logp, ent = chunked_token_logprobs(hidden, base.get_output_embeddings(), ids, chunk=256,
                                                   entropy=True)
            loss, _ = policy_loss(logp, batch["old_logprobs"][i:i + 1], batch["advantages"][i:i + 1], mask,
                                  clip_low=0.2, clip_high=0.28, dual_clip=3.0, agg="token-mean")
            ((loss - 0.001 * aggregate(ent, mask, "token-mean")) / rows).backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()

    return update


def make_batch(rows: int, length: int, vocab: int, device: str) -> dict:
    import torch

    g = torch.Generator().manual_seed(0)
    mask = torch.zeros(rows, length)
    mask[:, length // 4:] = 1.0
    batch = {"input_ids": torch.randint(0, vocab, (rows, length), generator=g), "loss_mask": mask,
             "old_logprobs": -torch.rand(rows, length, generator=g) * mask,
             "advantages": torch.where(torch.arange(rows)[:, None] % 2 == 0, 1.0, -1.0) * mask}
    return {k: v.to(device) for k, v in batch.items()}


def run(arch: dict, lora: bool, rows: int, length: int, device: str) -> dict:
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    model = Qwen2ForCausalLM(Qwen2Config(**arch)).to(device).train()  # fp32 master weights
    if lora:
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(task_type="CAUSAL_LM", **LORA))
    update = update_fn(model, device, lora, lr=1e-5 if lora else 1e-6)
    update(make_batch(1, 64, arch["vocab_size"], device))  # warm-up
    batch = make_batch(rows, length, arch["vocab_size"], device)
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    update(batch)
    if device == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    trained = float(batch["loss_mask"].sum())
    out = {"lora": lora, "rows": rows, "length": length, "seconds_per_update": seconds,
           "trained_tokens_per_s": trained / seconds,
           "parameters": sum(p.numel() for p in model.parameters()),
           "trainable": sum(p.numel() for p in model.parameters() if p.requires_grad)}
    if device == "cuda":
        out["peak_gpu_memory_gib"] = torch.cuda.max_memory_allocated() / 1024 ** 3
    del model, update, batch
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--length", type=int, default=1024)
    p.add_argument("--dry-run", action="store_true", help="CPU, a small model, a 2 x 64 batch: checks the script")
    args = p.parse_args()
    import torch

    if args.dry_run:
        device, arch, rows, length = "cpu", SMALL, 2, 64
    else:
        if not torch.cuda.is_available():
            raise SystemExit("no CUDA device: run with --dry-run to check the script on CPU")
        device, arch, rows, length = "cuda", QWEN05B, args.batch, args.length
    record = {"device": torch.cuda.get_device_name(0) if device == "cuda" else "cpu (dry run)",
              "torch": torch.__version__, "architecture": "Qwen2.5-0.5B" if arch is QWEN05B else "small (dry run)",
              "precision": "bf16 autocast, fp32 master weights", "runs": []}
    for lora in (False, True):
        result = run(arch, lora, rows, length, device)
        record["runs"].append(result)
        memory = f", peak GPU memory {result['peak_gpu_memory_gib']:.2f} GiB" if "peak_gpu_memory_gib" in result else ""
        print(f"{'LoRA' if lora else 'full'}: {rows} x {length}, {result['seconds_per_update']:.2f} s/update, "
              f"{result['trained_tokens_per_s']:.0f} trained tokens/s{memory}", flush=True)
        if device == "cuda":
            torch.cuda.empty_cache()
    out_dir = Path(os.environ["OUT"]) if os.environ.get("OUT") else Path(__file__).parent / "results"
    out_dir.mkdir(parents=True, exist_ok=True)
    name = "gpu_check_dry_run.json" if args.dry_run else "gpu_check.json"
    (out_dir / name).write_text(json.dumps(record, indent=2))
    print(f"saved {out_dir / name}")


if __name__ == "__main__":
    main()
