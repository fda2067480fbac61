"""Learner memory calibration: peak RSS of one real forward+backward+AdamW step through the project's RL module,
at a few micro-batch sizes, with and without gradient checkpointing; fits the per-token bytes of
:mod:`ragen_rllib.algorithms.ragen.memory`.

Run (one process per measurement; heavy: alone on the machine)::

    export RAGEN_RLLIB_CACHE=$PWD/.cache/ragen_rllib HF_HUB_OFFLINE=1 TMPDIR=$PWD/.cache/tmp
    .venv/bin/python benchmarks/learner_memory.py [--model gguf:smollm2-135m-instruct] [--sizes 1x512 2x1024 4x1024]

Each measurement process builds :class:`RagenTorchRLModule` (``RLModuleSpec.build``, as the learner does), then on
``rows x tokens`` random token ids (every token real, every token trained):

1. the no-grad pass of ``prepare_columns`` (``_forward_train(entropy=False)`` under ``torch.no_grad``);
2. two training steps: ``_forward_train`` (log-probs, entropy with gradients), the clipped surrogate minus the
   entropy bonus (``rl/losses.py``), backward, the learner's fused AdamW (``ragen_torch_learner.adamw``). The second
   step is the steady state (AdamW state and gradients exist while the activations are held).

Peak RSS of each phase comes from ``VmHWM`` (reset between phases through ``/proc/self/clear_refs``). The fit: for
each setting, ``peak = intercept + slope * tokens`` (least squares), and the coefficient memory.py uses is the
upper envelope ``max_i (peak_i - static_estimate) / tokens_i`` expressed as a multiple of memory.py's structural
per-token bytes, raised to the slope's multiple where that is larger (never below a measured point, never growing
slower than the measured peaks). Writes
benchmarks/results/learner_memory_calibration.json.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

OUT = Path(__file__).parent / "results" / "learner_memory_calibration.json"
GIB = 1024**3


def _hwm_bytes() -> int:
    return int(re.search(r"VmHWM:\s+(\d+)", Path("/proc/self/status").read_text()).group(1)) * 1024


def _rss_bytes() -> int:
    return int(re.search(r"VmRSS:\s+(\d+)", Path("/proc/self/status").read_text()).group(1)) * 1024


def _reset_peak() -> None:
    Path("/proc/self/clear_refs").write_text("5")


def measure(model: str, rows: int, tokens: int, gc: bool, autocast: str, threads: int) -> dict:
    """One measurement in this process (see the module docstring); returns bytes."""
    import torch
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

    from ragen_rllib.algorithms.ragen.torch.ragen_torch_learner import adamw
    from ragen_rllib.algorithms.ragen.torch.ragen_torch_rl_module import RagenTorchRLModule
    from ragen_rllib.core import keys as K
    from ragen_rllib.envs.base import text_space
    from ragen_rllib.rl.losses import aggregate, policy_loss

    torch.set_num_threads(threads)
    rss_imports = _rss_bytes()
    space = text_space()
    module = RLModuleSpec(module_class=RagenTorchRLModule, observation_space=space, action_space=space,
                          model_config={"model": model, "gradient_checkpointing": gc, "autocast": autocast}).build()
    params = [p for p in module.parameters() if p.requires_grad]
    rss_loaded = _rss_bytes()
    torch.manual_seed(0)
    vocab = module.lm.config.get_text_config().vocab_size
    ids = torch.randint(3, vocab, (rows, tokens))
    mask = torch.ones(rows, tokens)
    mask[:, 0] = 0
    adv = torch.randn(rows, 1) * mask
    _reset_peak()
    module.eval()
    with torch.no_grad():
        module._forward_train({K.INPUT_IDS: ids}, entropy=False)
    peak_nograd = _hwm_bytes()
    module.train()
    opt = adamw(params)
    steps = []
    for _ in range(2):
        _reset_peak()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        out = module._forward_train({K.INPUT_IDS: ids})
        old = out[K.LOGPROBS].detach()
        loss, _ = policy_loss(out[K.LOGPROBS], old, adv, mask)
        (loss - 0.001 * aggregate(out[K.ENTROPY], mask)).backward()
        opt.step()
        del out, old, loss
        steps.append({"peak_rss": _hwm_bytes(), "seconds": time.perf_counter() - t0})
    return {"rows": rows, "tokens_per_row": tokens, "tokens": rows * tokens, "gradient_checkpointing": gc,
            "autocast": autocast, "rss_after_imports": rss_imports, "rss_after_load": rss_loaded,
            "peak_rss_nograd": peak_nograd, "peak_rss_step1": steps[0]["peak_rss"],
            "peak_rss_step2": steps[1]["peak_rss"], "peak_rss": max(s["peak_rss"] for s in steps),
            "step_seconds": [s["seconds"] for s in steps], "params": sum(p.numel() for p in module.parameters()),
            "trainable_params": sum(p.numel() for p in params)}


def fit(points: list[dict], shape, autocast: bool) -> dict:
    """Least-squares line and the upper-envelope scale of memory.py for one setting's points."""
    from ragen_rllib.algorithms.ragen import memory as M

    xs = [p["tokens"] for p in points]
    ys = [p["peak_rss"] for p in points]
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    var = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / var if var else 0.0
    gc = points[0]["gradient_checkpointing"]
    est = M.LearnerMemory(shape=shape, params=points[0]["params"], trainable=points[0]["trainable_params"],
                          autocast=autocast, gradient_checkpointing=gc)
    static = est.static_bytes() + M.RUNTIME_OVERHEAD_BYTES
    unit, head = est.structural_token_bytes(), est.head_token_bytes()
    envelope = max((y - static - head * x) / (unit * x) for x, y in zip(xs, ys))
    scale = max(envelope, (slope - head) / unit)  # never below a point, and never growing slower than measured
    ng = [p["peak_rss_nograd"] for p in points]
    nograd = sum((x - mx) * (y - sum(ng) / n) for x, y in zip(xs, ng)) / var if var else 0.0  # slope
    return {"gradient_checkpointing": gc, "slope_bytes_per_token": slope, "intercept_bytes": my - slope * mx,
            "static_plus_overhead_estimate_bytes": static, "structural_bytes_per_token": unit,
            "head_bytes_per_token": head, "envelope_scale": envelope, "scale": scale,
            "nograd_slope_bytes_per_token": nograd,
            "estimate_bytes_with_current_constants": [est.peak_bytes(x) for x in xs],
            "measured_peak_bytes": ys}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="gguf:smollm2-135m-instruct")
    p.add_argument("--sizes", nargs="+", default=["1x512", "2x1024", "4x1024"], help="rows x tokens per row")
    p.add_argument("--gc", nargs="+", type=int, default=[0, 1], help="gradient checkpointing settings (0/1)")
    p.add_argument("--autocast", default="auto", help="model_config['autocast'] (auto: bf16 on CPUs with bf16 units)")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--one", default=None, help=argparse.SUPPRESS)  # internal: "ROWSxTOKENS:GC", one measurement
    p.add_argument("--out", default=str(OUT))
    p.add_argument("--refit", action="store_true", help="fit the measurements already in --out again (no runs)")
    args = p.parse_args()
    if args.one:
        size, gc = args.one.split(":")
        rows, tokens = (int(v) for v in size.split("x"))
        print("RESULT " + json.dumps(measure(args.model, rows, tokens, bool(int(gc)), args.autocast, args.threads)))
        return
    points = json.loads(Path(args.out).read_text())["measurements"] if args.refit else run_all(args)
    write(args, points)


def run_all(args) -> list[dict]:
    """Every measurement, one process each; the raw points are also kept next to the output as they come."""
    points = []
    for gc in args.gc:
        for size in args.sizes:
            cmd = [sys.executable, __file__, "--model", args.model, "--autocast", args.autocast,
                   "--threads", str(args.threads), "--one", f"{size}:{gc}"]
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
            line = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
            if proc.returncode or not line:
                print(proc.stdout[-2000:], proc.stderr[-4000:], file=sys.stderr)
                raise SystemExit(f"measurement {size} gc={gc} failed (rc {proc.returncode})")
            point = json.loads(line[0][len("RESULT "):])
            points.append(point)
            print(f"{size:>8s} gc={gc}: load {point['rss_after_load'] / GIB:.2f} GiB, no-grad peak "
                  f"{point['peak_rss_nograd'] / GIB:.2f} GiB, step peak {point['peak_rss'] / GIB:.2f} GiB "
                  f"({point['step_seconds'][-1]:.1f} s)", flush=True)
            Path(args.out + ".raw").write_text(json.dumps(points, indent=2))
    return points


def write(args, points: list[dict]) -> None:
    """Fit every setting and write the record."""
    import torch

    from ragen_rllib.algorithms.ragen import memory as M
    from ragen_rllib.core.precision import cpu_info, resolve_autocast
    from ragen_rllib.models.registry import resolve_model

    shape = M.ModelShape.from_dir(resolve_model(args.model))
    amp = resolve_autocast(args.autocast, "cpu") is not None
    settings = sorted({q["gradient_checkpointing"] for q in points})
    fits = [fit([q for q in points if q["gradient_checkpointing"] == gc], shape, amp) for gc in settings]
    record = {"model": args.model, "shape": shape.__dict__, "cpu": cpu_info(), "threads": args.threads,
              "torch": torch.__version__, "autocast": args.autocast, "autocast_bf16": amp,
              "runtime_overhead_bytes": M.RUNTIME_OVERHEAD_BYTES, "measurements": points, "fits": fits}
    for f in fits:
        print(f"gc={int(f['gradient_checkpointing'])}: slope {f['slope_bytes_per_token'] / 1024:.0f} KiB/token, "
              f"intercept {f['intercept_bytes'] / GIB:.2f} GiB (static + overhead estimate "
              f"{f['static_plus_overhead_estimate_bytes'] / GIB:.2f}"
              f" GiB), envelope scale {f['envelope_scale']:.3f}, "
              f"scale {f['scale']:.3f}, no-grad {f['nograd_slope_bytes_per_token'] / 1024:.0f}"
              " KiB/token")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(record, indent=2) + "\n")
    print(f"saved {args.out}")


if __name__ == "__main__":
    main()
