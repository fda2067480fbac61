"""Multi-env runs (RAGEN's ``es_manager`` tags): which envs a run trains and validates on, how many groups each,
and which runner holds which group.

A run names a list of tags, each ``{tag, env, env_config, groups}`` (validation tags may add ``seed``); a
built-in tag (:data:`ragen_rllib.envs.tags.RAGEN_TAGS`) may be named alone: ``{tag: SimpleSokoban, groups: 4}``.
Without a list, the run's one ``env`` is a single tag holding all ``env_groups``.

**The split over runners.** The groups of all tags are laid out in one list, tag by tag, and cut into
``num_env_runners`` equal contiguous blocks; runner ``r`` holds block ``r``. Only the total must divide by
the number of runners: a tag whose groups do not divide evenly straddles two runners (e.g. tags A: 3, B: 1
on 2 runners: runner 0 holds A0 A1, runner 1 holds A2 B0). Every runner therefore generates the same number
of trajectories per step.

**Seeds.** Training group ``i`` of the whole list at step ``s`` uses seed ``train_seed_base + s * env_groups +
i`` (every group a fresh seed, as with one env). Validation group ``j`` of a tag uses ``seed + j``, with the
tag's ``seed`` or else ``val_seed``: fixed across evaluations, and independent of the other tags.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

TAG_KEYS = ("tag", "env", "env_config", "groups", "seed")


@dataclass(frozen=True)
class EnvTag:
    """One env of a run.

    Attributes:
        tag: its name in metrics (``<tag>/success_rate``) and rollouts.
        env: gymnasium id.
        env_config: keyword arguments of ``gym.make``.
        groups: env groups per rollout.
        seed: first seed of its validation groups (None: the run's ``val_seed``); unused in training.
    """

    tag: str
    env: str
    env_config: dict = field(default_factory=dict)
    groups: int = 1
    seed: int | None = None


@dataclass(frozen=True)
class GroupSlot:
    """One group of a rollout: its tag, its position in the whole list (``index``) and within its tag."""

    tag: EnvTag
    index: int
    tag_index: int


def parse_tags(entries: Any, key: str) -> list[EnvTag]:
    """Tags from a config list (``key`` names it in errors); a built-in tag may omit ``env``/``env_config``."""
    from ragen_rllib.envs.loading import resolve_env_name
    from ragen_rllib.envs.tags import RAGEN_TAGS

    if not isinstance(entries, (list, tuple)) or not entries:
        raise ValueError(f"{key}={entries!r} is invalid: use a non-empty list of {{tag, env, env_config, groups}} "
                         f"mappings, e.g. [{{tag: SimpleSokoban, groups: 4}}]")
    tags: list[EnvTag] = []
    for i, entry in enumerate(entries):
        where = f"{key}[{i}]"
        if not isinstance(entry, Mapping) or "tag" not in entry:
            raise ValueError(f"{where}={entry!r} is invalid: use a mapping with at least 'tag' and 'groups'")
        unknown = sorted(set(entry) - set(TAG_KEYS))
        if unknown:
            close = {k: difflib.get_close_matches(k, TAG_KEYS, n=1) for k in unknown}
            said = ", ".join(f"{k!r}" + (f" (did you mean {c[0]!r}?)" if c else "") for k, c in close.items())
            raise ValueError(f"{where}: unknown key(s) {said}; a tag takes {list(TAG_KEYS)}")
        name = entry["tag"]
        if not isinstance(name, str) or not name or "/" in name:
            raise ValueError(f"{where}.tag={name!r} is invalid: use a non-empty name without '/' (it prefixes "
                             "metric keys), e.g. 'SimpleSokoban'")
        env, env_config = entry.get("env"), entry.get("env_config")
        if env is None:
            if name not in RAGEN_TAGS:
                close = difflib.get_close_matches(name, list(RAGEN_TAGS), n=3)
                raise ValueError(f"{where}: tag {name!r} is not built in" + (f" (did you mean {close}?)" if close
                                 else "") + f", so it needs 'env' (a gymnasium id); built-in tags: "
                                 f"{sorted(RAGEN_TAGS)}")
            env, settings = resolve_env_name(name)
            env_config = {**settings, **dict(env_config or {})}
        groups, seed = entry.get("groups"), entry.get("seed")
        if not isinstance(groups, int) or isinstance(groups, bool) or groups < 1:
            raise ValueError(f"{where}.groups={groups!r} is invalid: use a positive integer (env groups per rollout)")
        if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
            raise ValueError(f"{where}.seed={seed!r} is invalid: use an integer or leave it out (val_seed)")
        if not isinstance(env_config or {}, Mapping):
            raise ValueError(f"{where}.env_config={env_config!r} is invalid: use a mapping of gym.make arguments")
        tags.append(EnvTag(tag=name, env=str(env), env_config=dict(env_config or {}), groups=groups, seed=seed))
    names = [t.tag for t in tags]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"{key}: tag(s) {dupes} appear twice; give each entry its own 'tag' name")
    return tags


def flatten(tags: Sequence[EnvTag]) -> list[GroupSlot]:
    """Every group of every tag, tag by tag."""
    slots, index = [], 0
    for tag in tags:
        for j in range(tag.groups):
            slots.append(GroupSlot(tag=tag, index=index, tag_index=j))
            index += 1
    return slots


def split_groups(tags: Sequence[EnvTag], num_runners: int) -> list[list[GroupSlot]]:
    """The groups each runner holds: equal contiguous blocks of :func:`flatten` (see the module docstring).

    Raises ValueError when the total number of groups does not divide by ``num_runners``.
    """
    slots = flatten(tags)
    if num_runners < 1 or len(slots) % num_runners:
        n, r = len(slots), max(num_runners, 1)
        near = sorted({max(r, n // r * r), (n // r + 1) * r})
        raise ValueError(f"{n} env groups ({', '.join(f'{t.tag}: {t.groups}' for t in tags)}) do not split evenly "
                         f"over num_env_runners={num_runners} (each runner holds the same number of whole groups): "
                         f"use a total of {' or '.join(map(str, near))} groups, or change num_env_runners")
    per = len(slots) // num_runners
    return [slots[r * per:(r + 1) * per] for r in range(num_runners)]


def train_seed(slot: GroupSlot, step: int, env_groups: int, base: int) -> int:
    """Env seed of a training group at step ``step``."""
    return base + step * env_groups + slot.index


def val_seed(slot: GroupSlot, default: int) -> int:
    """Env seed of a validation group (fixed)."""
    return (default if slot.tag.seed is None else slot.tag.seed) + slot.tag_index
