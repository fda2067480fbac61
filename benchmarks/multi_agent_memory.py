"""Memory of two roles (multi-agent training): one module per role, or one shared base with a LoRA adapter per role.

Run (each configuration in its own fresh process; heavy: alone on the machine)::

    export RAGEN_RLLIB_CACHE=$PWD/.cache/ragen_rllib HF_HUB_OFFLINE=1 TMPDIR=$PWD/.cache/tmp HF_HOME=$PWD/.cache/hf
    .venv/bin/python benchmarks/multi_agent_memory.py [--models gguf:smollm2-135m-instruct tiny:small]
        [--rows 8 --tokens 512 --micro-rows 1] [--threads 2]

Learner side, two roles, one realistic update each (``--rows`` x ``--tokens`` token ids, 4 turns a row whose last
48 of every 128 tokens are trained, micro-batches of ``--micro-rows`` rows with gradient accumulation, the project's
policy loss minus the entropy bonus, then the learner's fused AdamW step; gradients stay held until the role's next
update, as in RLlib's TorchLearner):

- ``a_full_per_role``: an RLlib ``MultiRLModuleSpec`` of two full-fine-tuning ``RagenTorchRLModule`` specs (what the
  learner holds for ``policies={x, o}``): per role fp32 weights + gradients + AdamW's two moments;
- ``b_lora_per_role``: the same with ``model_config["lora"]`` (r=16 on every linear layer): each role its own
  frozen base copy + its adapter, its gradients and AdamW moments;
- ``c_shared_base_lora``: ONE ``RagenTorchRLModule`` with LoRA plus a second peft adapter
  (``lm.add_adapter``); each role's update runs with its adapter active (``lm.set_adapter``) and its own optimizer
  over its adapter's parameters only: the memory floor. (RLlib's ``MultiRLModule`` holds independent RLModules,
  so using this needs a custom MultiRLModule that shares the base.) A check asserts that role 2's step leaves
  role 1's adapter untouched.

Rollout side (the project's ``HFEngine``, weights at the engine's ``auto`` dtype: fp32 on CPU), each engine
sampling 8 prompts x 32 new tokens: ``engines_per_role`` (two engines, each with the full weights) vs
``one_engine`` (both roles sample on one). vLLM's multi-LoRA (one engine, one base, an adapter per request) is not
measured here.

Each process reports its RSS after imports (the baseline), after building, after the updates (what is held) and
its peak (VmHWM, which includes one micro-batch's activations). The analytic byte counts (params x 4 bytes for
fp32 weights, + 4 for gradients, + 8 for AdamW's moments of every trainable parameter) cross-check the held
memory, and are extrapolated to Qwen2.5-0.5B/1.5B/7B shapes. Writes benchmarks/results/multi_agent_memory.json.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

OUT = Path(__file__).parent / "results" / "multi_agent_memory.json"
MIB = 1024**2
ROLES = ("x", "o")
LORA = {"r": 16, "lora_alpha": 32,
        "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]}
LEARNER = ("a_full_per_role", "b_lora_per_role", "c_shared_base_lora")
ROLLOUT = ("engines_per_role", "one_engine")
#: Qwen2.5 instruct shapes for the extrapolation: hidden, intermediate, layers, kv dim, vocab, tied embeddings
SHAPES = {"Qwen2.5-0.5B": (896, 4864, 24, 128, 151936, True), "Qwen2.5-1.5B": (1536, 8960, 28, 256, 151936, True),
          "Qwen2.5-7B": (3584, 18944, 28, 512, 152064, False)}


def _status(key: str, where: str = "/proc/self/status") -> int:
    return int(re.search(rf"{key}:\s+(\d+)", Path(where).read_text()).group(1)) * 1024


def _mem() -> dict:
    """This process's resident memory now (bytes): RSS, its anonymous and file-backed parts, and PSS (a page
    mapped twice, e.g. one safetensors file that two models mmap, counts once)."""
    return {"rss": _status("VmRSS"), "anon": _status("RssAnon"), "file": _status("RssFile"),
            "pss": _status("Pss", "/proc/self/smaps_rollup")}


def _preimport() -> None:
    """Import what building a module or engine imports lazily (transformers' model code, peft), so that the
    baseline RSS after imports is the same in every configuration and the differences are the held tensors."""
    import peft  # noqa: F401
    import transformers.models.llama.modeling_llama  # noqa: F401
    import transformers.models.qwen2.modeling_qwen2  # noqa: F401
    from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: F401


def _batch(vocab: int, rows: int, tokens: int):
    import torch

    torch.manual_seed(0)
    ids = torch.randint(3, vocab, (rows, tokens))
    mask = torch.zeros(rows, tokens)
    for start in range(0, tokens, 128):  # turns of 128 tokens: 80 observation, 48 sampled (trained)
        mask[:, start + 80:start + 128] = 1
    adv = torch.randn(rows, 1) * mask
    return ids, mask, adv


def update(module, opt, ids, mask, adv, micro_rows: int) -> None:
    """One learner update of one role: micro-batches with gradient accumulation, then one optimizer step."""
    from ragen_rllib.core import keys as K
    from ragen_rllib.rl.losses import aggregate, policy_loss

    opt.zero_grad(set_to_none=True)
    rows = ids.shape[0]
    for s in range(0, rows, micro_rows):
        m = slice(s, s + micro_rows)
        out = module._forward_train({K.INPUT_IDS: ids[m], K.LOSS_MASK: mask[m]})
        loss, _ = policy_loss(out[K.LOGPROBS], out[K.LOGPROBS].detach(), adv[m], mask[m])
        ((loss - 0.001 * aggregate(out[K.ENTROPY], mask[m])) * (ids[m].shape[0] / rows)).backward()
        del out, loss
    opt.step()


def measure_learner(config: str, model: str, rows: int, tokens: int, micro_rows: int) -> dict:
    import torch
    from ray.rllib.core.rl_module.multi_rl_module import MultiRLModuleSpec
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

    from ragen_rllib.algorithms.ragen.torch.ragen_torch_learner import adamw
    from ragen_rllib.algorithms.ragen.torch.ragen_torch_rl_module import RagenTorchRLModule
    from ragen_rllib.envs.base import text_space

    base = _mem()
    space = text_space()
    mc = {"model": model, **({"lora": LORA} if config != "a_full_per_role" else {})}
    spec = RLModuleSpec(module_class=RagenTorchRLModule, observation_space=space, action_space=space,
                        model_config=mc)
    if config == "c_shared_base_lora":
        from peft import LoraConfig

        shared = spec.build()
        shared.lm.add_adapter(ROLES[1], LoraConfig(task_type="CAUSAL_LM", **LORA))
        adapters = {ROLES[0]: "default", ROLES[1]: ROLES[1]}
        modules = {role: shared for role in ROLES}
        holders = [shared]
    else:
        multi = MultiRLModuleSpec(rl_module_specs={role: spec for role in ROLES}).build()
        modules = {role: multi[role] for role in ROLES}
        holders = list(modules.values())
    for m in holders:
        m.train()
    built = _mem()
    vocab = holders[0].lm.config.get_text_config().vocab_size
    ids, mask, adv = _batch(vocab, rows, tokens)
    amp = holders[0].autocast_dtype("cpu")
    seconds, optimizers, before = {}, {}, None
    for role, module in modules.items():
        if config == "c_shared_base_lora":
            module.lm.set_adapter(adapters[role])
            tag = f".{adapters[role]}."
            params = [p for n, p in module.named_parameters() if "lora_" in n and tag in n]
            for n, p in module.named_parameters():
                p.requires_grad_("lora_" in n and tag in n)
            if role == ROLES[1]:
                before = {n: p.detach().clone() for n, p in module.named_parameters() if ".default." in n}
        else:
            params = [p for p in module.parameters() if p.requires_grad]
        t0 = time.perf_counter()
        optimizers[role] = adamw(params)  # held, as the learner holds its optimizers (and their AdamW moments)
        update(module, optimizers[role], ids, mask, adv, micro_rows)
        seconds[role] = round(time.perf_counter() - t0, 2)
    if before is not None:  # role o's step left role x's adapter as it was
        now = dict(shared.named_parameters())
        assert all(torch.equal(now[n], t) for n, t in before.items()), "role o's step changed role x's adapter"
        assert any(p.grad is not None for n, p in now.items() if f".{ROLES[1]}." in n)
        del before
    held = _mem()
    params = sum(p.numel() for m in holders for p in m.parameters())
    trainable = sum(p.numel() for m in holders for n, p in m.named_parameters() if "lora_" in n) \
        if config != "a_full_per_role" else params
    per_role_lora = trainable // 2 if config != "a_full_per_role" else 0
    return {"after_imports": base, "after_build": built, "after_updates": held,
            "peak_rss": _status("VmHWM"), "params_held": params, "trainable_params": trainable,
            "lora_params_per_role": per_role_lora, "update_seconds": seconds,
            "train_dtype": "float32 weights" + (f", {amp} autocast" if amp else " (no autocast)")}


def measure_rollout(config: str, model: str) -> dict:
    import torch

    from ragen_rllib.engines.base import SamplingConfig
    from ragen_rllib.engines.hf_engine import HFEngine
    from ragen_rllib.models.registry import resolve_model

    base = _mem()
    path = resolve_model(model)
    engines = [HFEngine(path) for _ in (ROLES if config == "engines_per_role" else ROLES[:1])]
    built = _mem()
    for engine in engines:  # a weight sync (the learner's new weights) makes every engine's weights its own
        engine.load_weights({k: v.detach().clone() for k, v in engine.model.state_dict().items()})
    torch.manual_seed(0)
    vocab = engines[0].model.config.get_text_config().vocab_size
    prompts = torch.randint(3, vocab, (8, 128)).tolist()
    sampling = SamplingConfig(max_tokens=32, seed=0, ignore_eos=True)
    t0 = time.perf_counter()
    for role in ROLES:
        engines[ROLES.index(role) % len(engines)].generate(prompts, sampling)
    return {"after_imports": base, "after_build": built, "after_updates": _mem(),
            "peak_rss": _status("VmHWM"), "engines": len(engines),
            "params_held": sum(p.numel() for e in engines for p in e.model.parameters()),
            "engine_dtype": str(next(engines[0].model.parameters()).dtype).replace("torch.", ""),
            "sample_seconds": round(time.perf_counter() - t0, 2)}


def analytic(params: int, lora: int, roles: int = 2, weight_bytes: int = 4, engine_bytes: int = 4) -> dict:
    """Held bytes of each configuration: weights + gradients + AdamW's 2 moments of every trainable parameter."""
    per_trainable = 4 * weight_bytes  # weights (fp32 master) + grads + exp_avg + exp_avg_sq
    return {"a_full_per_role": roles * params * per_trainable,
            "b_lora_per_role": roles * (params * weight_bytes + lora * per_trainable),
            "c_shared_base_lora": params * weight_bytes + roles * lora * per_trainable,
            "engines_per_role": roles * params * engine_bytes, "one_engine": params * engine_bytes}


def shape_counts(hidden: int, inter: int, layers: int, kv: int, vocab: int, tied: bool, r: int = 16):
    """(params, LoRA params of one adapter on every linear layer) of a Qwen2-style decoder."""
    attn = 2 * hidden * hidden + 2 * hidden * kv + hidden + 2 * kv  # q, o, k, v (+ q/k/v biases)
    per_layer = attn + 3 * hidden * inter + 2 * hidden
    params = layers * per_layer + vocab * hidden * (1 if tied else 2) + hidden
    lora = layers * r * (2 * (hidden + hidden) + 2 * (hidden + kv) + 3 * (hidden + inter))
    return params, lora


def run_one(config: str, model: str, args) -> dict:
    cmd = [sys.executable, __file__, "--one", config, "--models", model, "--rows", str(args.rows), "--tokens",
           str(args.tokens), "--micro-rows", str(args.micro_rows), "--threads", str(args.threads)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    line = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
    if proc.returncode or not line:
        print(proc.stdout[-2000:], proc.stderr[-4000:], file=sys.stderr)
        raise SystemExit(f"{config} on {model} failed (rc {proc.returncode})")
    return json.loads(line[0][len("RESULT "):])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", nargs="+", default=["gguf:smollm2-135m-instruct", "tiny:small"])
    p.add_argument("--rows", type=int, default=8)
    p.add_argument("--tokens", type=int, default=512)
    p.add_argument("--micro-rows", type=int, default=1, help="rows per micro-batch (gradient accumulation)")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--one", default=None, help=argparse.SUPPRESS)  # internal: one configuration, this process
    p.add_argument("--out", default=str(OUT))
    args = p.parse_args()
    if args.one:
        import torch

        torch.set_num_threads(args.threads)
        _preimport()
        if args.one in LEARNER:
            result = measure_learner(args.one, args.models[0], args.rows, args.tokens, args.micro_rows)
        else:
            result = measure_rollout(args.one, args.models[0])
        print("RESULT " + json.dumps(result))
        return
    import torch

    from ragen_rllib.core.precision import cpu_info
    from ragen_rllib.models.registry import resolve_model

    t_start = time.time()
    results = {}
    for model in args.models:
        resolve_model(model)  # convert / build once, outside the measured processes
        results[model] = {}
        for config in LEARNER + ROLLOUT:
            r = run_one(config, model, args)
            results[model][config] = r
            print(f"{model} {config}: peak {r['peak_rss'] / MIB:.0f} MiB, held "
                  f"{(r['after_updates']['rss'] - r['after_imports']['rss']) / MIB:.0f} MiB", flush=True)
        full, lora = results[model]["a_full_per_role"], results[model]["b_lora_per_role"]
        est = analytic(full["params_held"] // 2, lora["lora_params_per_role"])
        for config, r in results[model].items():
            r["analytic_bytes"] = est[config]
            r["held_rss_bytes"] = r["after_updates"]["rss"] - r["after_imports"]["rss"]
            r["held_pss_bytes"] = r["after_updates"]["pss"] - r["after_imports"]["pss"]
            r["peak_over_baseline_bytes"] = r["peak_rss"] - r["after_imports"]["rss"]
    extrapolation = {}
    for name, shape in SHAPES.items():
        params, lora = shape_counts(*shape)
        est = analytic(params, lora, engine_bytes=2)
        extrapolation[name] = {"params": params, "lora_params_per_role": lora,
                               **{k: round(v / 1024**3, 2) for k, v in est.items()},
                               "c_saves_over_b_gib": round((est["b_lora_per_role"] - est["c_shared_base_lora"])
                                                           / 1024**3, 2),
                               "c_saves_over_a_gib": round((est["a_full_per_role"] - est["c_shared_base_lora"])
                                                           / 1024**3, 2)}
    cmd = "RAGEN_RLLIB_CACHE=... .venv/bin/python benchmarks/multi_agent_memory.py " + " ".join(sys.argv[1:])
    record = {"command": cmd.strip(), "date": datetime.date.today().isoformat(), "cpu": cpu_info(),
              "threads": args.threads, "torch": torch.__version__, "rows": args.rows, "tokens_per_row": args.tokens,
              "micro_batch_rows": args.micro_rows, "lora": LORA, "roles": list(ROLES),
              "trained_tokens": "4 turns of 128 tokens a row, the last 48 of each trained",
              "rollout": "HFEngine at dtype auto, 8 prompts x 128 tokens, 32 new tokens per role; vLLM multi-LoRA "
                         "not measured",
              "extrapolation_units": "GiB; learner fp32 weights + grads + AdamW (16 bytes per trainable "
                                     "parameter, 4 per frozen one), engines bf16 (2 bytes per parameter)",
              "results": results, "extrapolation": extrapolation, "wall_seconds": round(time.time() - t_start)}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(record, indent=2) + "\n")
    print_table(record)
    print(f"saved {args.out}")


def print_table(record: dict) -> None:
    print(f"\nCPU {record['cpu']}, {record['threads']} threads; MiB")
    print(f"{'model':<28s}{'configuration':<20s}{'baseline':>9s}{'held':>7s}{'held PSS':>9s}{'analytic':>9s}"
          f"{'peak':>7s}{'peak-base':>10s}  dtype")
    for model, configs in record["results"].items():
        for config, r in configs.items():
            print(f"{model:<28s}{config:<20s}{r['after_imports']['rss'] / MIB:9.0f}{r['held_rss_bytes'] / MIB:7.0f}"
                  f"{r['held_pss_bytes'] / MIB:9.0f}"
                  f"{r['analytic_bytes'] / MIB:9.0f}{r['peak_rss'] / MIB:7.0f}"
                  f"{r['peak_over_baseline_bytes'] / MIB:10.0f}  {r.get('train_dtype', r.get('engine_dtype'))}")
    print("\nextrapolation (analytic, GiB):")
    for name, e in record["extrapolation"].items():
        print(f"{name:<14s} a {e['a_full_per_role']:7.2f}  b {e['b_lora_per_role']:7.2f}  c "
              f"{e['c_shared_base_lora']:7.2f}  (c saves {e['c_saves_over_b_gib']:.2f} over b, "
              f"{e['c_saves_over_a_gib']:.2f} over a); engines 2x {e['engines_per_role']:.2f} vs 1x "
              f"{e['one_engine']:.2f}")


if __name__ == "__main__":
    main()
