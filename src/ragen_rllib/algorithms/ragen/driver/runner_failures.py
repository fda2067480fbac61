"""Which env runner samples which block of env groups, when some runners are down.

Every runner owns one block of the run's groups (:func:`~.env_tags.split_groups`). A runner that is healthy
samples its own block; the blocks of runners that are down (dead mid-sample, or not yet restarted) go to the
healthy runners, fewest blocks first. Seeds and sampling seeds follow the block, not the runner, so a
re-sampled block draws the same env instances it would have on its own runner.
"""

from __future__ import annotations


def assign_blocks(blocks: list[int], healthy: list[int]) -> dict[int, list[int]]:
    """RLlib runner id (1-based) -> the blocks (0-based) it samples, for the ``blocks`` still to sample.

    Args:
        blocks: the blocks to sample, e.g. ``[0, 1, 2]``.
        healthy: the ids of the healthy remote runners (block ``b`` belongs to runner ``b + 1``).

    Returns:
        A plan covering every block exactly once; ``{}`` when ``blocks`` is empty.

    Raises:
        RuntimeError: blocks are left and no runner is healthy.
    """
    if blocks and not healthy:
        raise RuntimeError(f"no env runner is healthy to sample the env groups of runner(s) "
                           f"{[b + 1 for b in blocks]}: every runner died and none came back (Ray restarts them "
                           "while restart_failed_env_runners=True and resources allow; see the runners' logs)")
    plan: dict[int, list[int]] = {}
    orphans = []
    for block in blocks:
        if block + 1 in healthy:
            plan.setdefault(block + 1, []).append(block)
        else:
            orphans.append(block)
    for block in orphans:
        runner = min(healthy, key=lambda r: (len(plan.get(r, [])), r))
        plan.setdefault(runner, []).append(block)
    return plan
