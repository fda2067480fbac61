"""A cooperative, asymmetric pair on Countdown: a solver proposes, a verifier accepts or rejects.

Each round the ``solver`` sees the numbers and the target (and the verifier's earlier rejections) and answers an
expression; the ``verifier`` sees the problem and the proposal and answers ``accept`` or ``reject``. An accepted
correct expression ends the game with reward 1 for both (joint success); an accepted wrong one ends it with 0 for
both; a rejection starts the next round, up to ``max_rounds``. The expression is checked by the safe evaluator of
the Countdown env (never ``eval``). With ``show_value`` the verifier also sees that evaluator's value of the
proposal (a calculator it may use: it still has to compare the value with the target and check the numbers); the
solver never sees it. Instances come from :class:`~ragen_rllib.envs.games.countdown.CountdownEnv`,
seeded by the reset seed.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from ragen_rllib.envs.base import require
from ragen_rllib.envs.games.countdown import CountdownEnv, solve
from ragen_rllib.envs.games.safe_math import numbers_used, safe_eval
from ragen_rllib.envs.multi_agent.turn_based import Move, TurnBasedTextEnv

SOLVER, VERIFIER = "solver", "verifier"
OPERATORS = ("+", "-", "*", "/")
VERDICTS = ("accept", "reject")
VERIFIER_REWARDS = ("joint", "verdict")


class SolverVerifierEnv(TurnBasedTextEnv):
    """See the module docstring."""

    metadata = {**TurnBasedTextEnv.metadata, "name": "countdown_solver_verifier"}
    possible_agents = [SOLVER, VERIFIER]
    instructions = {
        SOLVER: ("You are the solver in a team. Using the given numbers, each exactly once, and + - * / and "
                 "parentheses, write an expression equal to the target. A verifier checks it. Answer with the "
                 "expression only, e.g. (1 + 2) * 3."),
        VERIFIER: ("You are the verifier in a team. A solver proposes an expression for a Countdown problem: it "
                   "must use every given number exactly once and equal the target. Answer accept if it is right, "
                   "reject if it is wrong (the solver then tries again)."),
    }

    def __init__(self, num_numbers: int | list[int] = 3, max_number: int = 20, max_target: int = 50,
                 max_rounds: int = 3, invalid_penalty: float = -0.1, max_invalid: int = 3, show_value: bool = False,
                 verifier_reward: str = "joint", render_mode: str | None = "ansi") -> None:
        require(isinstance(max_rounds, int) and max_rounds >= 1, "max_rounds", max_rounds, "a positive integer")
        require(isinstance(show_value, bool), "show_value", show_value, "true or false")
        require(verifier_reward in VERIFIER_REWARDS, "verifier_reward", verifier_reward,
                f"one of {list(VERIFIER_REWARDS)}")
        super().__init__(invalid_penalty=invalid_penalty, max_invalid=max_invalid,
                         max_moves=2 * max_rounds * max_invalid, render_mode=render_mode)
        self.game = CountdownEnv(num_numbers=num_numbers, max_number=max_number, max_target=max_target)
        self.max_rounds, self.show_value, self.verifier_reward = max_rounds, show_value, verifier_reward
        self.proposal, self.rejected, self.round = "", [], 1

    def _reset_state(self, options: dict) -> None:
        self.game.reset(seed=int(self.np_random.integers(2**31)), options=options)
        self.proposal, self.rejected, self.round = "", [], 1

    @property
    def problem(self) -> str:
        return f"Target: {self.game.target}, Numbers: {self.game.numbers}"

    def _observe_text(self, agent: str) -> str:
        if agent == SOLVER:
            tried = "".join(f"\nRejected earlier: {p}" for p in self.rejected)
            return f"{self.problem}{tried}\nRound {self.round} of {self.max_rounds}."
        proposal = self.proposal or "(none yet)"
        shown = self.show_value and self.proposal
        value = f"\nIts value: {safe_eval(self.proposal, allow_decimals=False)}" if shown else ""
        return f"{self.problem}\nThe solver proposes: {proposal}{value}"

    def _parse(self, agent: str, text: str):
        if agent == VERIFIER:
            verdict = text.strip().rstrip(".").lower()
            return verdict if verdict in VERDICTS else None
        numbers_used(text), safe_eval(text, allow_decimals=False)  # ValueError: invalid
        return text.strip()

    def correct(self, expression: str) -> bool:
        try:
            return (sorted(numbers_used(expression)) == sorted(self.game.numbers)
                    and safe_eval(expression, allow_decimals=False) == Fraction(self.game.target))
        except ValueError:
            return False

    def _apply(self, agent: str, action: str) -> Move:
        if agent == SOLVER:
            self.proposal = action
            return Move(next_agent=VERIFIER)
        ok = self.correct(self.proposal)
        right = ok == (action == "accept")
        paid = {VERIFIER: float(right)} if self.verifier_reward == "verdict" else {}
        if action == "accept":
            reward = 1.0 if ok else 0.0
            return Move(next_agent=SOLVER, rewards={SOLVER: reward, VERIFIER: reward, **paid}, done=True,
                        winners=(SOLVER, VERIFIER) if ok else ())
        self.rejected.append(self.proposal)
        self.proposal = ""
        if self.round >= self.max_rounds:
            return Move(next_agent=SOLVER, rewards=paid, done=True)
        self.round += 1
        return Move(next_agent=SOLVER, rewards=paid)

    def _forfeit(self, agent: str) -> Move:
        return Move(next_agent=agent, done=True)  # cooperative: a stuck teammate fails the team

    def random_action(self, agent: str, rng: np.random.Generator) -> str:
        """Solver: the numbers in a random order joined by random operators (well formed, mostly wrong);
        verifier: a random verdict."""
        if agent == VERIFIER:
            return VERDICTS[int(rng.integers(len(VERDICTS)))]
        numbers = [self.game.numbers[int(i)] for i in rng.permutation(len(self.game.numbers))]
        ops = [OPERATORS[int(rng.integers(len(OPERATORS)))] for _ in numbers[1:]]
        return " ".join([str(numbers[0]), *(f"{op} {n}" for op, n in zip(ops, numbers[1:]))])

    def oracle_action(self, agent: str) -> str:
        if agent == SOLVER:
            return solve(self.game.numbers, self.game.target) or str(self.game.numbers[0])
        return "accept" if self.correct(self.proposal) else "reject"
