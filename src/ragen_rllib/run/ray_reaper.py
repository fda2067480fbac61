"""Ends what a local Ray left behind when its driver dies without ``ray.shutdown`` (``kill -9``, a crash).

Ray 2.60's raylet and GCS end with the driver, but its ``DashboardAgent`` and ``RuntimeEnvAgent`` notice the dead
raylet, log that they exit, and then hang (their last message goes to the dead GCS) instead of exiting.
:func:`start_reaper` starts this module as a small process in its own session. It records the driver's
descendants every second (the Ray processes, their workers, and the engines those start) and, once the driver is
gone and a grace period has let Ray end its own processes, kills those still alive. Process ids are matched with
their start times, so a reused id is never killed.

Run as ``python -m ragen_rllib.run.ray_reaper DRIVER_PID [GRACE_S]``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

#: Seconds between two looks at the driver's process tree.
POLL_S = 1.0
#: Seconds Ray gets to end its own processes after the driver died, before the reaper kills what is left.
GRACE_S = 5.0


def start_reaper(driver_pid: int, grace_s: float = GRACE_S) -> subprocess.Popen:
    """Start the reaper for ``driver_pid`` (detached: a signal to the driver's process group does not reach it)."""
    return subprocess.Popen([sys.executable, "-m", __name__, str(driver_pid), str(grace_s)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True, close_fds=True)


def watch(driver_pid: int, grace_s: float = GRACE_S, poll_s: float = POLL_S) -> list[int]:
    """Record ``driver_pid``'s descendants until it exits; then kill those still alive. Returns the killed ids."""
    import psutil

    try:
        driver = psutil.Process(driver_pid)
    except psutil.NoSuchProcess:
        return []
    seen: dict[int, float] = {}  # pid -> create_time
    me = os.getpid()  # a child of the driver too
    while True:
        try:
            if driver.status() == psutil.STATUS_ZOMBIE:
                break
            for child in driver.children(recursive=True):
                if child.pid != me:
                    seen.setdefault(child.pid, child.create_time())
        except psutil.NoSuchProcess:
            if not driver.is_running():
                break
        except psutil.Error:
            pass
        time.sleep(poll_s)
    time.sleep(grace_s)
    killed = []
    for pid, created in seen.items():
        try:
            proc = psutil.Process(pid)
            if proc.create_time() == created:
                proc.kill()
                killed.append(pid)
        except psutil.Error:
            continue
    return killed


if __name__ == "__main__":
    watch(int(sys.argv[1]), float(sys.argv[2]) if len(sys.argv) > 2 else GRACE_S)
