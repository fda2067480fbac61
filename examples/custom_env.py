"""A user-defined text environment registered from user code, with no change to the library.

It shows the whole env contract in ~40 lines: subclass ``TextEnv``, implement ``_reset_state``,
``_render_text`` and ``_apply`` (plus ``instruction``, optionally ``oracle_action``), register it
with ``gymnasium.register`` and use it like a built-in env. With ``--train N`` it trains on it for N iterations
through a remote env runner: each runner is its own process with its own gymnasium registry, so the config names
this module in ``environment(env_modules=["custom_env"])`` (imported in every runner before envs are made) and
Ray's runtime env ships the file to the runners (``init_ray(runtime_env={"py_modules": [this file]})``; in a
config file: ``run.ray_init.runtime_env.py_modules``).

Run:  .venv/bin/python examples/custom_env.py               # play it with the oracle (no LLM)
      .venv/bin/python examples/custom_env.py --train 2     # 2 RL iterations with the tiny model (~1 min)
"""

from __future__ import annotations

import gymnasium as gym

from ragen_rllib.envs import StepOutcome, TextEnv
from ragen_rllib.envs.base import require


class GuessNumberEnv(TextEnv):
    """Guess a hidden number in [1, high]; the env answers Higher/Lower. Actions are free text."""

    action_names: list[str] = []  # free-form answers

    def __init__(self, high: int = 16, max_steps: int = 6, render_mode: str | None = "ansi") -> None:
        require(isinstance(high, int) and high >= 2, "high", high, "use an integer >= 2")
        self.high, self.max_steps = high, max_steps
        super().__init__(render_mode)

    @property
    def instruction(self) -> str:
        return f"Guess the hidden integer between 1 and {self.high}. Answer with one number."

    def _reset_state(self, options: dict) -> None:
        self.secret = int(self.np_random.integers(1, self.high + 1))
        self.lo, self.hi, self.hint = 1, self.high, "No guess yet."

    def _render_text(self) -> str:
        return f"{self.hint} The number is between {self.lo} and {self.hi}."

    def _parse_action(self, text: str) -> int | None:
        return int(text) if text.isdigit() and 1 <= int(text) <= self.high else None

    def _apply(self, guess: int) -> StepOutcome:
        if guess == self.secret:
            self.hint = f"{guess} is correct!"
            return StepOutcome(reward=1.0, terminated=True, effective=True, success=True)
        before = (self.lo, self.hi)
        if guess < self.secret:
            self.hint, self.lo = f"{guess} is too low.", max(self.lo, guess + 1)
        else:
            self.hint, self.hi = f"{guess} is too high.", min(self.hi, guess - 1)
        return StepOutcome(reward=0.0, terminated=False, effective=(self.lo, self.hi) != before)

    def oracle_action(self) -> str:
        return str((self.lo + self.hi) // 2)  # binary search


if "my/GuessNumber-v0" not in gym.registry:  # the driver imports this file twice (as __main__ and custom_env)
    gym.register(id="my/GuessNumber-v0", entry_point=GuessNumberEnv)


def train(iterations: int, model: str) -> None:
    from pathlib import Path

    from ragen_rllib import RagenConfig, init_ray

    config = (RagenConfig()
              .environment("my/GuessNumber-v0", env_config={"high": 16}, env_modules=["custom_env"])
              .env_runners(num_env_runners=1)  # a remote runner: a separate process
              .rl_module(model_config={"model": model})
              .training(adv_estimator="grpo", env_groups=2, group_size=2, minibatch_size=4, max_turns=3,
                        max_response_tokens=24, lr=1e-4, engine_kwargs={"max_model_len": 1024}))
    config.validate()
    root = Path(__file__).resolve().parents[1]
    init_ray(runtime_env={"py_modules": [__file__]}, _temp_dir=str(root / ".cache" / "ray"), log_to_driver=False)
    algo = config.build_algo()
    try:
        for _ in range(iterations):
            r = algo.train()
            print(f"iter {r['training_iteration']}: success {r['env_runners']['success_rate']:.0%}, "
                  f"valid actions {r['env_runners']['action_valid_rate']:.0%}, "
                  f"{r['env_runners']['num_episodes']} episodes of GuessNumber", flush=True)
    finally:
        algo.stop()


def play() -> None:
    env = gym.make("my/GuessNumber-v0", high=32)
    obs, info = env.reset(seed=0)
    print(env.unwrapped.instruction)
    print(obs)
    for _ in range(10):
        action = env.unwrapped.oracle_action()
        obs, reward, terminated, truncated, info = env.step(action)
        print(f"> {action}\n{obs}  reward={reward} success={info['success']}")
        if terminated or truncated:
            break


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="A user-defined env: play it, or train on it (--train N)")
    parser.add_argument("--train", type=int, default=0, metavar="N", help="train N iterations (0: play)")
    parser.add_argument("--model", default="tiny:nano", help="model to train (tiny:nano, tiny:small, an HF id)")
    args = parser.parse_args()
    if args.train:
        train(args.train, args.model)
    else:
        play()
