"""Self-play: one LLM plays both sides of tic-tac-toe, trained with RLlib; metrics per agent.

The env is a turn-based multi-agent text env (PettingZoo's AEC API): ``x`` and ``o`` each have their own
token-exact transcript (their own system prompt, their own view of the board with the other's moves as text).
Both map to the run's one RL module (self-play), each (group, agent) pair is normalised as a group of its own, and
the runner reports ``x/success_rate`` and ``o/success_rate``. After training, the model plays ``x`` against the
fixed opponent pool (minimax, random, noisy minimax) from held-out openings (the validation split of the 2-move
openings, never trained on; :func:`ragen_rllib.models.versus.against_the_pool`). This shows the plumbing: the tiny
model is not taught the game first, so it makes no valid move and whoever moves first forfeits (a warm start on
minimax games, as the single-agent envs have, is what makes the games real).

Run:  .venv/bin/python examples/self_play_tictactoe.py --iterations 2          # the tiny model (~1 min)
"""

from __future__ import annotations

import argparse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENV = "ragen_rllib.envs.multi_agent.tictactoe:TicTacToeEnv"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--iterations", type=int, default=2)
    parser.add_argument("--model", default="tiny:nano")
    parser.add_argument("--eval-episodes", type=int, default=8)
    args = parser.parse_args()
    import tempfile

    from ragen_rllib import RagenConfig, init_ray
    from ragen_rllib.models.versus import against_the_pool

    config = (RagenConfig()
              .environment(ENV, env_config={"opening_moves": 2, "openings": "train"})
              .env_runners(num_env_runners=1)
              .rl_module(model_config={"model": args.model})
              .training(adv_estimator="grpo", env_groups=4, group_size=2, minibatch_size=8, max_turns=5,
                        max_response_tokens=24, lr=1e-4, val_env_groups=2, engine="hf",
                        engine_kwargs={}, max_model_len=1024))
    config.validate()
    init_ray(_temp_dir=str(ROOT / ".cache" / "ray"), log_to_driver=False, include_dashboard=False)
    algo = config.build_algo()
    try:
        for _ in range(args.iterations):
            r = algo.train()["env_runners"]
            print(f"iter {algo.iteration}: x success {r['x/success_rate']:.0%}, o success {r['o/success_rate']:.0%}, "
                  f"valid moves x {r['x/action_valid_rate']:.0%} o {r['o/action_valid_rate']:.0%}", flush=True)
        with tempfile.TemporaryDirectory() as tmp:
            from ragen_rllib.evaluation.evaluate import export_checkpoint

            checkpoint = algo.save_to_path(str(Path(tmp) / "ckpt"))
            model_dir = export_checkpoint(checkpoint, str(Path(tmp) / "hf"))
            rates = against_the_pool(str(model_dir), args.eval_episodes, {"opening_moves": 2, "openings": "validation"})
    finally:
        algo.stop()
    print("x against the fixed pool (held-out openings): " + ", ".join(f"{k} {v:.0%}" for k, v in rates.items()))


if __name__ == "__main__":
    main()
