"""An env server as a child process, up once it answers: for scripts, notebooks, examples and tests.

>>> from ragen_rllib.run.server_process import served_env
>>> with served_env("SearchQA") as url:          # ragen-rllib serve-env SearchQA --port <a free port>
...     config = RagenConfig().environment(url)
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

#: The env server's defaults (``ragen-rllib serve-env``, :func:`ragen_rllib.run.serve_env.serve`): where it listens
#: (never all interfaces by default), how many episodes (sessions) it holds, and how long an idle one lives.
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
MAX_SESSIONS = 64
SESSION_TIMEOUT_S = 600.0


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve_env_command(env: str, port: int, env_config: dict | None = None) -> list[str]:
    """The ``ragen-rllib serve-env`` command line, run with this Python."""
    return [sys.executable, "-m", "ragen_rllib.cli", "serve-env", env, "--port", str(port),
            "--env-config", json.dumps(env_config or {})]


@contextlib.contextmanager
def server_process(cmd: list[str], port: int, timeout_s: float = 60.0,
                   **popen_kwargs) -> Iterator[subprocess.Popen]:
    """Run ``cmd`` (a server on 127.0.0.1:``port``) in its own process group until its ``/health`` answers; yield
    the process; kill the group on exit. A server that exits or stays silent for ``timeout_s`` raises
    RuntimeError (with its output when it was piped)."""
    import requests

    proc = subprocess.Popen(cmd, start_new_session=True, **popen_kwargs)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            with contextlib.suppress(requests.RequestException):
                if requests.get(f"http://127.0.0.1:{port}/health", timeout=1).ok:
                    break
            if proc.poll() is not None or time.monotonic() > deadline:
                said = proc.stdout.read().decode(errors="replace")[-2000:] if proc.stdout else ""
                raise RuntimeError(f"the server {cmd} did not come up on port {port} (exit code {proc.poll()}) "
                                   f"{said}")
            time.sleep(0.2)
        yield proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@contextlib.contextmanager
def served_env(env: str, env_config: dict | None = None, port: int = 0) -> Iterator[str]:
    """``ragen-rllib serve-env ENV`` as a child process (``port`` 0: a free one); yields its URL."""
    port = port or free_port()
    with server_process(serve_env_command(env, port, env_config), port):
        yield f"http://127.0.0.1:{port}"
