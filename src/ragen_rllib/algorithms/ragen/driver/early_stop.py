"""RAGEN's three early-stop rules, as a small stateful tracker the Algorithm feeds once per iteration.

- ``reward_std_collapse``: the mean in-group reward std stays below ``ratio x baseline`` for ``patience``
  consecutive steps, the baseline being its mean over the first ``baseline_steps`` steps.
- ``empty_batches``: ``patience`` consecutive steps whose filtered batch was empty.
- ``validation_floor``: validation success below ``floor`` on ``patience`` consecutive validations.

A rule with ``patience=None`` is off. Its state goes into checkpoints (``get_state`` / ``set_state``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

RULES = ("reward_std_collapse", "empty_batches", "validation_floor")


@dataclass
class EarlyStopper:
    std_ratio: float = 0.1
    std_patience: int | None = 10
    std_baseline_steps: int = 5
    empty_patience: int | None = 5
    val_floor: float = 0.01
    val_patience: int | None = 5
    baseline: list[float] = field(default_factory=list)  # in-group reward std of the first steps
    streaks: dict[str, int] = field(default_factory=lambda: dict.fromkeys(RULES, 0))
    triggered: str | None = None  # the first rule that fired

    @classmethod
    def from_config(cls, cfg) -> EarlyStopper:
        return cls(std_ratio=cfg.early_stop_std_ratio, std_patience=cfg.early_stop_std_patience,
                   std_baseline_steps=cfg.early_stop_std_baseline_steps, empty_patience=cfg.early_stop_empty_patience,
                   val_floor=cfg.early_stop_val_floor, val_patience=cfg.early_stop_val_patience)

    def _count(self, rule: str, hit: bool, patience: int | None) -> None:
        if patience is None:
            return
        self.streaks[rule] = self.streaks[rule] + 1 if hit else 0
        if self.triggered is None and self.streaks[rule] >= patience:
            self.triggered = rule

    def on_step(self, reward_std: float | None, empty: bool) -> None:
        """After a training step: its mean in-group reward std (None: no trajectories) and whether its
        filtered batch was empty."""
        self._count("empty_batches", empty, self.empty_patience)
        if reward_std is None:
            return
        if len(self.baseline) < self.std_baseline_steps:
            self.baseline.append(reward_std)
            return
        base = sum(self.baseline) / len(self.baseline)
        self._count("reward_std_collapse", base > 0 and reward_std < self.std_ratio * base, self.std_patience)

    def on_validation(self, success_rate: float) -> None:
        self._count("validation_floor", success_rate < self.val_floor, self.val_patience)

    def metrics(self) -> dict[str, float]:
        """``early_stopped/<rule>``: 1.0 for the rule that stopped training, else 0.0."""
        return {f"early_stopped/{rule}": float(self.triggered == rule) for rule in RULES}

    def get_state(self) -> dict:
        return {k: v for k, v in asdict(self).items() if k in ("baseline", "streaks", "triggered")}

    def set_state(self, state: dict) -> None:
        self.baseline = list(state.get("baseline", []))
        self.streaks = {**dict.fromkeys(RULES, 0), **state.get("streaks", {})}
        self.triggered = state.get("triggered")
