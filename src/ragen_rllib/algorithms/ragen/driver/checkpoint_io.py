"""Checkpoint directories written atomically: a reader sees the old directory or the complete new one."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path


def write_atomically(path: str | os.PathLike, write: Callable[[str], object]) -> str:
    """Call ``write(tmp_dir)`` on a fresh sibling of ``path``, then rename it onto ``path``; returns ``path``.

    An existing empty ``path`` (Tune hands one over) is replaced in one rename. A non-empty one is moved aside
    first and deleted after the new one is in place; the two renames are the only window in which ``path`` is
    absent, and the previous checkpoint then still sits beside it (``<name>.old-*``). A failure or a kill during
    ``write`` leaves ``path`` untouched (and a ``<name>.partial-*`` directory to delete).
    """
    path = Path(path).expanduser().absolute()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f"{path.name}.partial-", dir=path.parent))
    try:
        write(str(tmp))
        _fsync_tree(tmp)
        old = None
        if path.exists() and any(path.iterdir()):
            old = Path(tempfile.mkdtemp(prefix=f"{path.name}.old-", dir=path.parent))
            os.replace(path, old)  # onto the fresh empty dir: one rename
        os.replace(tmp, path)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return str(path)


def _fsync_tree(root: Path) -> None:
    """Flush every file under ``root`` to disk, so the rename never publishes data still in the page cache."""
    for file in root.rglob("*"):
        if file.is_file():
            with open(file, "rb") as handle:
                os.fsync(handle.fileno())
