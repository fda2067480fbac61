"""RAGEN's two-armed bandit: pull one of two arms named by a word pair, once.

Each pair names a low-risk arm (an everyday, steady occupation such as ``Teacher``) and a
high-risk arm (a risky one such as ``Trader``); which word is which is fixed per pair, only the
order the two are shown in is randomised per seed. With RAGEN's defaults the low-risk arm always
pays 0.1 and the high-risk arm pays 1.0 with probability 0.25 (else 0), so the high-risk arm has
the higher expected value (0.25 > 0.1). Success = the chosen arm has the higher (or an equal)
expected value. The ``train`` and ``test`` splits use disjoint word pairs.

One valid pull ends the episode; an unknown arm name is an invalid action (state unchanged,
reward 0) and ``max_steps`` invalid attempts truncate the episode.
"""

from __future__ import annotations

from ragen_rllib.envs.base import StepOutcome, TextEnv, require

#: (low-risk arm, high-risk arm) word pairs of the training split.
TRAIN_PAIRS: list[tuple[str, str]] = [
    ("Teacher", "Trader"),
    ("Librarian", "Gambler"),
    ("Accountant", "Explorer"),
    ("Farmer", "Prospector"),
    ("Banker", "Speculator"),
    ("Nurse", "Stuntman"),
    ("Clerk", "Adventurer"),
    ("Baker", "Daredevil"),
    ("Postman", "Pirate"),
    ("Gardener", "Smuggler"),
    ("Tailor", "Racer"),
    ("Shepherd", "Mercenary"),
]
#: (low-risk arm, high-risk arm) word pairs of the test split (disjoint from the training words).
TEST_PAIRS: list[tuple[str, str]] = [
    ("Doctor", "Bettor"),
    ("Engineer", "Inventor"),
    ("Judge", "Hustler"),
    ("Carpenter", "Mountaineer"),
    ("Pharmacist", "Entrepreneur"),
    ("Professor", "Venturer"),
    ("Plumber", "Privateer"),
    ("Monk", "Wildcatter"),
]
SPLITS = {"train": TRAIN_PAIRS, "test": TEST_PAIRS}

INSTRUCTION = (
    "You are playing a two-armed bandit game. Each arm is named after a kind of person. One arm is "
    "low-risk: it pays a small, steady reward. The other arm is high-risk: it pays a large reward with a "
    "small chance and nothing otherwise. You pull one arm once; choose the arm that gives the highest "
    "expected reward. Answer with the name of the arm only."
)


class BanditEnv(TextEnv):
    """Pull one of two named arms once (RAGEN's ``Bandit``).

    Args:
        split: ``"train"`` (12 word pairs) or ``"test"`` (8 other pairs).
        low_risk_reward: reward the low-risk arm always pays.
        high_risk_reward: reward the high-risk arm pays with probability ``high_risk_prob`` (else 0).
        high_risk_prob: probability that the high-risk arm pays out.
        max_steps: attempts (invalid answers included) before truncation.
    """

    def __init__(
        self,
        split: str = "train",
        low_risk_reward: float = 0.1,
        high_risk_reward: float = 1.0,
        high_risk_prob: float = 0.25,
        max_steps: int = 3,
        render_mode: str | None = "ansi",
    ) -> None:
        require(split in SPLITS, "split", split, f"use one of {sorted(SPLITS)}")
        for key, value in (("low_risk_reward", low_risk_reward), ("high_risk_reward", high_risk_reward)):
            ok = isinstance(value, (int, float)) and not isinstance(value, bool) and abs(value) < 1e9
            require(ok, key, value, "use a finite number")
        ok = isinstance(high_risk_prob, (int, float)) and not isinstance(high_risk_prob, bool)
        ok = ok and 0 <= high_risk_prob <= 1
        require(ok, "high_risk_prob", high_risk_prob, "use a probability in [0, 1]")
        ok = isinstance(max_steps, int) and not isinstance(max_steps, bool) and max_steps >= 1
        require(ok, "max_steps", max_steps, "use an integer >= 1")
        self.split = split
        self.low_risk_reward = float(low_risk_reward)
        self.high_risk_reward = float(high_risk_reward)
        self.high_risk_prob = float(high_risk_prob)
        self.max_steps = max_steps
        self.action_names = []  # the two arm names, set at reset
        super().__init__(render_mode)
        self.low_arm = ""
        self.high_arm = ""
        self.pulled: str | None = None
        self.last_reward = 0.0

    # ----------------------------------------------------------------- public API
    @property
    def instruction(self) -> str:
        if not self.action_names:
            return INSTRUCTION
        return f"{INSTRUCTION} The arms are {self.action_names[0]} and {self.action_names[1]}."

    def expected_reward(self, arm: str) -> float:
        """Expected reward of pulling ``arm`` (one of the current arm names)."""
        if arm == self.low_arm:
            return self.low_risk_reward
        if arm == self.high_arm:
            return self.high_risk_reward * self.high_risk_prob
        raise ValueError(f"unknown arm {arm!r}; the arms are {self.action_names}")

    def oracle_action(self) -> str | None:
        """The arm with the higher expected value (the low-risk arm on a tie); None after the pull."""
        if self.pulled is not None or not self.action_names:
            return None
        return self.high_arm if self.expected_reward(self.high_arm) > self.low_risk_reward else self.low_arm

    # ----------------------------------------------------------------- hooks
    def _reset_state(self, options: dict) -> None:
        pairs = SPLITS[self.split]
        self.low_arm, self.high_arm = pairs[int(self.np_random.integers(len(pairs)))]
        arms = [self.low_arm, self.high_arm]
        if self.np_random.random() < 0.5:
            arms.reverse()
        self.action_names = arms
        self.pulled = None
        self.last_reward = 0.0

    def _apply(self, action: str) -> StepOutcome:
        if action == self.low_arm:
            reward = self.low_risk_reward
        else:
            reward = self.high_risk_reward if self.np_random.random() < self.high_risk_prob else 0.0
        other = self.high_arm if action == self.low_arm else self.low_arm
        success = self.expected_reward(action) >= self.expected_reward(other)
        self.pulled, self.last_reward = action, reward
        return StepOutcome(reward=reward, terminated=True, effective=True, success=success)

    def _render_text(self) -> str:
        if not self.action_names:
            return "No arms yet: call reset()."
        if self.pulled is None:
            return f"Arms: {self.action_names[0]}, {self.action_names[1]}. Pull one arm."
        return f"You pulled {self.pulled} and received reward {self.last_reward:g}."
