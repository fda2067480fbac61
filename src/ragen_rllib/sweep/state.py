"""A killed sweep's Tune state, checked (and mended where it can be) before ``sweep --resume``.

Tune writes its experiment state and its searcher's state atomically into the driver's staging directory
(``<ray temp>/session_*/artifacts/*/<experiment>/driver_artifacts``), then copies them to the experiment directory
on the storage path; the copy is not atomic. A SIGKILL during it leaves a truncated file there, and
``tune.Tuner.restore`` then fails deep inside Tune (``EOFError``). The staging copy survives the kill, so
:func:`mend_experiment_state` puts it back, keeping the truncated file beside it.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

#: the state files Tune reads on restore: the newest of each pattern, by name
STATE_FILES = ("experiment_state-*.json", "basic-variant-state-*.json")


def readable(path: Path) -> bool:
    """Whether Tune can read the state file ``path`` (JSON experiment state, or a pickled searcher state)."""
    try:
        if path.name.startswith("experiment_state-"):
            json.loads(path.read_text())
        else:
            import ray.cloudpickle as cloudpickle

            with open(path, "rb") as f:
                cloudpickle.load(f)
    except Exception:  # noqa: BLE001 (any failure to read is a broken file)
        return False
    return True


def staging_copies(ray_temp: Path, experiment: str, file_name: str) -> list[Path]:
    """The driver staging copies of ``file_name`` of experiment ``experiment`` under Ray's temp dir, newest
    first."""
    found = ray_temp.glob(f"session_*/artifacts/*/{experiment}/driver_artifacts/{file_name}")
    return sorted(found, key=lambda p: p.stat().st_mtime, reverse=True)


def ray_temp_dir(ray_kwargs: dict) -> Path:
    """Ray's temp dir of a run's ``ray.init`` keyword arguments (``_temp_dir``, else Ray's default)."""
    import tempfile

    return Path(ray_kwargs.get("_temp_dir") or Path(tempfile.gettempdir()) / "ray")


def mend_experiment_state(experiment_dir: Path, ray_temp: Path, log: Callable[[str], None] = print) -> list[Path]:
    """Check the newest of each of Tune's state files (``STATE_FILES``) in ``experiment_dir``; put back a readable
    staging copy (from under ``ray_temp``) of each one that cannot be read, the broken file kept as
    ``<name>.truncated``. Returns the files mended; RuntimeError naming the file and the way out when a broken one
    has no readable copy."""
    mended = []
    for pattern in STATE_FILES:
        files = sorted(experiment_dir.glob(pattern))
        if not files or readable(files[-1]):
            continue
        broken = files[-1]
        copy = next((c for c in staging_copies(ray_temp, experiment_dir.name, broken.name) if readable(c)), None)
        if copy is None:
            raise RuntimeError(
                f"the sweep's Tune state {broken} cannot be read (the kill landed while Tune copied it to the "
                f"storage path) and no readable copy of it is under Ray's temp dir {ray_temp}: this sweep cannot be "
                "resumed; its finished trials' results and checkpoints stay in the experiment directory, and a new "
                "sweep (without --resume) reruns the rest")
        broken.rename(broken.with_name(broken.name + ".truncated"))
        shutil.copy2(copy, broken)
        log(f"mended {broken.name}: the copy in the storage path was truncated (kept as {broken.name}.truncated); "
            f"restored Tune's staging copy {copy}")
        mended.append(broken)
    return mended
