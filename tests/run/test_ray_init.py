"""A Ray that ``init_ray`` starts stays on 127.0.0.1, has its dashboard, keeps its token out of the home directory,
and ends with its driver (a real local Ray in a separate process: tests/run/ray_local_probe.py)."""

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from tests.conftest import ray_temp_dir

from ragen_rllib.run.ray_init import LOOPBACK, ray_init_kwargs

LOOPBACK_IPS = {LOOPBACK, "::ffff:127.0.0.1", "::1"}


def test_a_local_ray_gets_the_dashboard_on_loopback_and_a_setting_turns_it_off(monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.delenv("RAGEN_RLLIB_DASHBOARD", raising=False)
    kwargs = ray_init_kwargs(num_cpus=2)
    assert kwargs["include_dashboard"] is True and kwargs["dashboard_host"] == LOOPBACK
    assert ray_init_kwargs(include_dashboard=False)["include_dashboard"] is False
    assert ray_init_kwargs(dashboard_host="0.0.0.0")["dashboard_host"] == "0.0.0.0"
    monkeypatch.setenv("RAGEN_RLLIB_DASHBOARD", "0")
    assert ray_init_kwargs()["include_dashboard"] is False
    monkeypatch.delenv("RAGEN_RLLIB_DASHBOARD")
    # joining a cluster leaves the dashboard to the cluster
    assert "include_dashboard" not in ray_init_kwargs(address="127.0.0.1:6379")
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:6379")
    assert "dashboard_host" not in ray_init_kwargs()


def test_a_temp_dir_too_deep_for_the_dashboards_sockets_turns_the_default_dashboard_off_or_names_the_fix(
        monkeypatch, caplog):
    """Ray's dashboard opens Unix sockets under its temp dir; past Linux's 107 bytes Ray fails to start with
    'Module MetricsHead failed to start'. The default dashboard is turned off with a warning; an explicit one fails
    here, naming the setting and the fix."""
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.delenv("RAGEN_RLLIB_DASHBOARD", raising=False)
    deep = "/tmp/" + "d" * 40 + "/ray"
    with caplog.at_level("WARNING", logger="ragen_rllib.run.ray_init"):
        assert ray_init_kwargs(_temp_dir=deep)["include_dashboard"] is False
    assert "dashboard off" in caplog.text and "over Linux's 107" in caplog.text
    with pytest.raises(ValueError, match=r"include_dashboard=True: .*use a shorter _temp_dir"):
        ray_init_kwargs(_temp_dir=deep, include_dashboard=True)
    assert ray_init_kwargs(_temp_dir="/tmp/ray")["include_dashboard"] is True  # a short one keeps it


def _alive(pid: int, created: float) -> bool:
    try:
        proc = psutil.Process(pid)
        return proc.create_time() == created and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


@pytest.mark.slow
def test_a_local_ray_listens_on_loopback_only_lists_its_actors_and_ends_with_its_killed_driver(tmp_path):
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items()
           if k not in ("RAY_ADDRESS", "RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH",
                        "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER")}
    env["HOME"] = str(home)
    env.pop("RAGEN_RLLIB_DASHBOARD", None)  # the default: on
    ray_dir = ray_temp_dir("ray", unique=True)  # short: Ray's socket paths have 107 bytes
    log = tmp_path / "probe.log"
    probe = subprocess.Popen([sys.executable, str(Path(__file__).parent / "ray_local_probe.py"), str(ray_dir)],
                             stdout=subprocess.PIPE, stderr=log.open("w"), env=env, text=True)
    descendants: list = []
    try:
        line = probe.stdout.readline()
        assert line, f"the probe exited with {probe.wait()} before reporting: {log.read_text()[-2000:]}"
        report = json.loads(line)
        descendants = report["descendants"]
        assert report["node_ips"] == [LOOPBACK]
        assert report["gcs_address"].startswith(f"{LOOPBACK}:")
        assert report["dashboard_url"].startswith(f"{LOOPBACK}:")
        listening = {ip for _, ip, _ in report["sockets"]}
        assert listening and listening <= LOOPBACK_IPS, f"Ray listens beyond loopback: {sorted(listening)}"
        assert "ragen_probe" in report["actor_names"]  # the dashboard's state API, with the run's token
        token = Path(report["token_path"])
        assert token.parent == ray_dir and stat.S_IMODE(token.stat().st_mode) == 0o600
        assert not (home / ".ray").exists()
        assert len(descendants) >= 5  # GCS, raylet, dashboard, its agents, workers
        probe.send_signal(signal.SIGKILL)
        probe.wait(timeout=10)
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline and any(_alive(*d) for d in descendants):
            time.sleep(0.2)
        left = [psutil.Process(pid).name() for pid, created in descendants if _alive(pid, created)]
        assert not left, f"still running 40 s after the driver was killed: {left}"
    finally:
        probe.kill()
        for pid, created in descendants:
            if _alive(pid, created):
                psutil.Process(pid).kill()
        shutil.rmtree(ray_dir, ignore_errors=True)
