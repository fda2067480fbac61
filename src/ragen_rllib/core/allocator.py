"""The C heap's freed memory back to the operating system, after each learner update and each env-runner rollout or
weight load.

A learner's tensors change shape from one update to the next (the rows the filter keeps, their lengths), and a
rollout's buffers from one step to the next. Under glibc's default allocator, blocks below its mmap threshold (which
rises up to 32 MiB as big blocks are freed) come from the heap, and freed heap memory stays resident: between phases
a process holds its high-water mark, memory the learner or engine beside it could use. ``malloc_trim(0)`` hands
every free page of every arena back (``madvise``), at the cost of one heap walk. A fixed ``MALLOC_MMAP_THRESHOLD_``
in the environment bounds the growth too, but maps and unmaps every big block, which slows the learner and the
engine alike.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools


@functools.cache
def _malloc_trim():
    """glibc's ``malloc_trim`` (None where the C library has none: musl, macOS, Windows)."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        return ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None


def release_freed_memory() -> bool:
    """Return the heap's free pages to the operating system; True if the C library did (glibc), else False."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True
