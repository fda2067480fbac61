"""Train on RAGEN's main env, SimpleSokoban (6x6, one box), with StarPO-PPO from the shipped config.

What it shows: the config-file workflow in Python: ``configs/runs/sokoban_ppo.yaml`` (RAGEN's batch of 8 groups
x 16, PPO with a critic, validation every 10 iterations) loaded with dotlist overrides and trained by the same
function as ``ragen-rllib train``: one progress line per iteration, RLlib checkpoints, the resolved config,
``progress.jsonl`` and a learning curve under the run directory.

Honest expectation: on a CPU the offline tiny models do not learn Sokoban (they cannot even imitate the oracle;
see docs/results.md); use a real model on a GPU, e.g. ``--model Qwen/Qwen2.5-0.5B-Instruct``. On a laptop the
FrozenLake demo (``bash scripts/demo.sh``) is the one that shows learning.

Run:  .venv/bin/python examples/train_sokoban.py --iterations 2                 # a quick look (tiny:small)
      .venv/bin/python examples/train_sokoban.py --model Qwen/Qwen2.5-0.5B-Instruct --iterations 200
      .venv/bin/python examples/train_sokoban.py training.lr=2e-6 training.group_size=8   # any override
"""

from __future__ import annotations

import argparse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "runs" / "sokoban_ppo.yaml"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default=None, help="a Hugging Face id or local directory (default: the config's)")
    p.add_argument("--iterations", type=int, default=None, help="training iterations (default: the config's 200)")
    p.add_argument("--out", default=str(ROOT / "runs" / "sokoban_ppo"), help="the run directory")
    p.add_argument("overrides", nargs="*", metavar="section.key=value", help="dotlist overrides of the config")
    args = p.parse_args()

    from ragen_rllib.run.train import train

    overrides = [f"run.out_dir={args.out}", *args.overrides]
    if args.model:
        overrides.append(f"rl_module.model_config.model={args.model}")
    if args.iterations:
        overrides.append(f"run.stop.training_iteration={args.iterations}")
    run_dir = train(CONFIG, overrides, log=lambda line: print(line, flush=True))
    print(f"run saved to {run_dir}: checkpoints/, config.yaml, progress.jsonl, learning_curve.png")


if __name__ == "__main__":
    main()
