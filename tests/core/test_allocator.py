"""core/allocator.py: freed heap memory goes back to the system (glibc's malloc_trim), as the learner relies on."""

import os
import sys

import pytest

from ragen_rllib.core.allocator import release_freed_memory


def resident_mib() -> float:
    with open("/proc/self/statm", encoding="utf-8") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2 ** 20


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim and /proc are Linux's")
def test_freed_heap_blocks_stay_resident_until_released():
    blocks = [bytearray(64 * 1024) for _ in range(4096)]  # 256 MiB of heap blocks (under the mmap threshold)
    pin = bytearray(64 * 1024)  # allocated last: keeps the heap's top in use, so free() alone cannot shrink it
    for block in blocks:
        block[::4096] = b"x" * len(block[::4096])  # touch every page
    full = resident_mib()
    del blocks
    freed = resident_mib()
    assert release_freed_memory() is True
    released = resident_mib()
    assert full - freed < 64, "the freed blocks should still be resident before the release"
    assert freed - released > 192, f"released only {freed - released:.0f} MiB of 256"
    del pin
