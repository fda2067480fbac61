"""Evaluate a policy on fixed seeds, then read its trajectories in a browser.

What it shows: ``ragen_rllib.evaluation.evaluate.evaluate`` (what ``ragen-rllib eval`` runs): a checkpoint or any
Hugging Face model rolled out on fixed seeds at the validation temperature; per env success, return, valid-action
rate and unbiased pass@k; one JSON line per trajectory (prompt, response, parsed actions, validity, reward and
token counts per turn). Then ``ragen_rllib.evaluation.viewer.write_view`` (``ragen-rllib view``) turns that file
into one self-contained HTML page: turn by turn states, reasoning and highlighted answers, filters by env and outcome.

Run:  .venv/bin/python examples/eval_and_view.py                                   # tiny:small, 8 seeds x 2
      .venv/bin/python examples/eval_and_view.py --model runs/frozenlake_grpo_cpu/checkpoints/iter_0028
      then open runs/eval_and_view/rollouts.html in a browser
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="tiny:small", help="a Ragen checkpoint, a Hugging Face id or a directory")
    p.add_argument("--config", default=str(ROOT / "configs" / "envs" / "frozenlake.yaml"),
                   help="a config naming the envs (validation tags, else training envs) and agent settings")
    p.add_argument("--episodes", type=int, default=8, help="fixed seeds per env")
    p.add_argument("--k", type=int, default=2, help="samples per seed (pass@1..k)")
    p.add_argument("--max-response-tokens", type=int, default=None, help="override the config's tokens per turn")
    p.add_argument("--out", default=str(ROOT / "runs" / "eval_and_view"), help="rollouts.jsonl and .html go here")
    args = p.parse_args()

    from ragen_rllib import RagenConfig
    from ragen_rllib.evaluation.evaluate import eval_envs, evaluate, export_checkpoint, is_checkpoint
    from ragen_rllib.evaluation.viewer import write_view

    config = RagenConfig.from_yaml(args.config)
    if args.max_response_tokens:
        config.training(max_response_tokens=args.max_response_tokens)
    envs = eval_envs(config)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="ragen-eval-") as tmp:
        model = str(export_checkpoint(args.model, tmp)) if is_checkpoint(args.model) else args.model
        report = evaluate(model, envs, args.episodes, args.k, config.agent_config(),
                          temperature=config.val_temperature, seed=config.val_seed,
                          out_jsonl=out / "rollouts.jsonl")
    print(json.dumps(report, indent=2))
    page = write_view(out / "rollouts.jsonl", out / "rollouts.html", title=f"{args.model} on {Path(args.config).stem}")
    print(f"trajectories: {out / 'rollouts.jsonl'}\npage: {page}")


if __name__ == "__main__":
    main()
