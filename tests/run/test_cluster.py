"""A real Ray cluster on this machine, started the way a user starts one (``ray start``, token authentication,
loopback addresses): a head node that runs no work (0 CPUs: GCS, dashboard) and two worker nodes, one with a custom
resource. The project's runs on it: ``train`` places its env runner on the marked worker by that resource and
checkpoints; ``ray job submit`` runs a 2-trial ``sweep`` whose trials land on different nodes; a sweep whose
worker node is killed mid-trial continues on a node that joins afterwards, from its last checkpoint on shared
storage (``run.storage_path``). The nodes are stopped by their own process ids, also when a check fails.

Ray 2.60 rewrites a node address of 127.0.0.1 to the machine's network address, so the nodes take other loopback
addresses (127.0.0.2-127.0.0.5: the whole 127.0.0.0/8 is loopback) and every address they advertise stays on
loopback; their gRPC servers still listen on all interfaces (Ray binds them so on any multi-node cluster).
"""

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import psutil
import pytest
from tests.conftest import ROOT, ray_temp_dir

pytestmark = pytest.mark.slow

HEAD_IP, WORKER_IP, OTHER_IP, NEW_IP = "127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"
RAY = str(Path(sys.executable).parent / "ray")
RUN = """
environment: {env: ragen/FrozenLake-v0, env_config: {size: 4, success_rate: 1.0}}
env_runners: {num_env_runners: 1, num_cpus_per_env_runner: 1}
learners: {num_learners: 0}
rl_module: {model_config: {model: "tiny:nano", autocast: null}}
training: {adv_estimator: grpo, env_groups: 2, group_size: 2, minibatch_size: 4, max_turns: 2,
           max_response_tokens: 16, lr: 1.0e-3, engine: hf}
evaluation: {evaluation_interval: 0}
debugging: {seed: 0}
run: {stop: {training_iteration: 1}, checkpoint_every: 1, loggers: []}
"""
SWEEP = RUN + """
tune:
  param_space: {training.lr: {grid_search: [1.0e-3, 2.0e-3]}}
  metric: env_runners/success_rate
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """Nodes started by ``ray start --block`` (each its own process group and temp dir)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.port, self.dashboard_port = _free_port(), _free_port()
        token = root / "auth_token"  # the secret every node, driver and job client reads (RAY_AUTH_TOKEN_PATH)
        token.touch(mode=0o600)
        token.write_text(secrets.token_hex(32))
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
        self.env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(token))
        self.procs: dict[str, subprocess.Popen] = {}
        self.address = f"{HEAD_IP}:{self.port}"
        self.dashboard = f"http://127.0.0.1:{self.dashboard_port}"

    def start(self) -> None:
        self.node("head", ["--head", f"--node-ip-address={HEAD_IP}", f"--port={self.port}", "--num-cpus=0",
                           "--include-dashboard=true", "--dashboard-host=127.0.0.1",
                           f"--dashboard-port={self.dashboard_port}", f"--ray-client-server-port={_free_port()}"])
        # the two workers start together (each start-up is mostly single-core imports and waits)
        self.node("worker", [f"--node-ip-address={WORKER_IP}", "--num-cpus=2", '--resources={"rollout": 1}'],
                  wait=False)
        self.node("other", [f"--node-ip-address={OTHER_IP}", "--num-cpus=2"])

    def node(self, name: str, args: list[str], wait: bool = True) -> None:
        """Start one node (a worker unless ``args`` say ``--head``) and (``wait``) wait until the cluster counts it
        and every node started before it."""
        if "--head" not in args:
            args = [f"--address={self.address}", *args]
        # every agent port of its own: Ray's defaults (e.g. 52365 for the agent that takes job submissions) are
        # also taken on 127.0.0.1 by any other local Ray, such as the test session's, and the job agent then fails
        ports = [f"--{flag}={_free_port()}" for flag in ("dashboard-agent-listen-port", "dashboard-agent-grpc-port",
                                                          "metrics-export-port", "runtime-env-agent-port")]
        log = (self.root / f"{name}.log").open("w")
        self.procs[name] = subprocess.Popen([RAY, "start", "--block", "--disable-usage-stats",
                                             f"--temp-dir={self.root / name}", *ports, *args], env=self.env,
                                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        if wait:
            self._wait_for_nodes(len(self.procs))

    def kill(self, name: str) -> None:
        """SIGKILL a node: its ``ray start`` and every process under it, at once (a machine that dies)."""
        proc = self.procs.pop(name)
        for p in [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]:
            try:
                p.kill()
            except psutil.Error:
                pass
        proc.wait(timeout=30)

    def state(self, path: str):
        token = Path(self.env["RAY_AUTH_TOKEN_PATH"]).read_text().strip()
        request = urllib.request.Request(self.dashboard + path, headers={"Authorization": f"Bearer {token}"})
        with urllib.request.urlopen(request, timeout=10) as reply:
            return json.load(reply)["data"]["result"]["result"]

    def nodes(self) -> list[dict]:
        return [n for n in self.state("/api/v0/nodes?limit=100") if n["state"] == "ALIVE"]

    def actors(self, class_name: str) -> list[dict]:
        return [a for a in self.state("/api/v0/actors?limit=1000&detail=1") if a["class_name"] == class_name]

    def _wait_for_nodes(self, count: int, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for proc in self.procs.values():
                assert proc.poll() is None, f"ray start exited with {proc.returncode}: {self.logs()}"
            try:
                if len(self.nodes()) >= count:
                    return
            except OSError:
                pass
            time.sleep(0.25)
        raise AssertionError(f"{count} nodes did not come up in {timeout} s: {self.logs()}")

    def logs(self) -> str:
        return "\n".join(p.read_text()[-1500:] for p in sorted(self.root.glob("*.log")))

    def stop(self) -> None:
        """SIGTERM each ``ray start --block`` (it stops its node's processes), then kill what is left of them."""
        tree = []
        for proc in self.procs.values():
            try:
                tree += [proc.pid, *(c.pid for c in psutil.Process(proc.pid).children(recursive=True))]
            except psutil.Error:
                pass
            proc.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
        for pid in tree:
            try:
                psutil.Process(pid).kill()
            except psutil.Error:
                pass


@pytest.fixture(scope="module")
def cluster():
    root = ray_temp_dir("rc", unique=True, below="head")  # the head node (the dashboard's sockets) in root/head
    nodes = Cluster(root)
    try:
        nodes.start()
        yield nodes
    finally:
        nodes.stop()
        shutil.rmtree(root, ignore_errors=True)


def _cli(cluster: Cluster, *args: str, cwd: Path, timeout: float = 400) -> subprocess.CompletedProcess:
    env = dict(cluster.env, RAY_ADDRESS=cluster.address)
    return subprocess.run([sys.executable, "-m", "ragen_rllib.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


def test_the_nodes_advertise_loopback_addresses_and_need_the_token(cluster):
    nodes = cluster.nodes()
    assert sorted(n["node_ip"] for n in nodes) == [HEAD_IP, WORKER_IP, OTHER_IP]
    with pytest.raises(urllib.error.HTTPError, match="401"):  # the dashboard and job API want the token
        urllib.request.urlopen(cluster.dashboard + "/api/v0/nodes", timeout=10)


@pytest.mark.slow(seconds=27)
def test_train_places_its_env_runner_on_the_worker_node_and_checkpoints(cluster, tmp_path):
    (tmp_path / "run.yaml").write_text(RUN)
    proc = _cli(cluster, "train", "run.yaml", "env_runners.custom_resources_per_env_runner={rollout: 1}",
                "run.out_dir=out", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "iter    1" in proc.stdout
    assert list((tmp_path / "out" / "checkpoints").glob("iter_0001/rllib_checkpoint.json"))
    worker = next(n["node_id"] for n in cluster.nodes() if n["node_ip"] == WORKER_IP)
    runners = cluster.actors("RagenEnvRunner")
    assert runners and {a["node_id"] for a in runners} == {worker}


@pytest.mark.slow(seconds=55)
def test_a_submitted_job_runs_a_sweep_whose_two_trials_land_on_different_nodes(cluster, tmp_path):
    job_dir = tmp_path / "job"
    job_dir.mkdir()
    (job_dir / "sweep.yaml").write_text(SWEEP)
    before = {a["actor_id"] for a in cluster.actors("Ragen")}
    env = dict(cluster.env, RAY_API_SERVER_ADDRESS=cluster.dashboard)
    for _ in range(30):  # Ray answers "No available agent to submit job, please try again later" until its job
        submit = subprocess.run(  # agent has registered, a few seconds after the nodes are up
            [RAY, "job", "submit", "--working-dir", str(job_dir),
             "--runtime-env-json", json.dumps({"py_modules": [str(ROOT / "src" / "ragen_rllib")]}),
             "--", sys.executable, "-m", "ragen_rllib.cli", "sweep", "sweep.yaml", "run.out_dir=sweep_out"],
            env=env, capture_output=True, text=True, timeout=500)
        if "No available agent to submit job" not in submit.stderr + submit.stdout:
            break
        time.sleep(2)
    assert submit.returncode == 0, (submit.stdout + submit.stderr)[-3000:]
    assert "succeeded" in submit.stdout.lower() and "sweep saved to sweep_out" in submit.stdout
    trials = [a for a in cluster.actors("Ragen") if a["actor_id"] not in before]
    assert len(trials) == 2 and len({a["node_id"] for a in trials}) == 2, trials


@pytest.mark.slow(seconds=50)
def test_a_sweep_trial_whose_node_dies_continues_on_another_node_from_shared_storage(cluster, tmp_path):
    """Kill the node that runs the trial after its 2nd checkpoint, add a new node: Tune restarts the trial
    (run.max_failures) from that checkpoint on run.storage_path and it finishes all 4 iterations."""
    (tmp_path / "sweep.yaml").write_text(SWEEP.replace("grid_search: [1.0e-3, 2.0e-3]", "grid_search: [1.0e-3]"))
    before = {a["actor_id"] for a in cluster.actors("Ragen")}
    env = dict(cluster.env, RAY_ADDRESS=cluster.address)
    proc = subprocess.Popen([sys.executable, "-m", "ragen_rllib.cli", "sweep", "sweep.yaml", "run.out_dir=out",
                             f"run.storage_path={tmp_path / 'shared'}", "run.max_failures=3",
                             "run.stop.training_iteration=4"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    lines = []
    try:
        for line in proc.stdout:  # until the trial has checkpointed its 2nd iteration
            lines.append(line)
            if ": iter    2" in line:
                break
        first = [a for a in cluster.actors("Ragen") if a["actor_id"] not in before and a["state"] == "ALIVE"]
        assert len(first) == 1, "".join(lines[-20:])
        ip = next(n["node_ip"] for n in cluster.nodes() if n["node_id"] == first[0]["node_id"])
        cluster.kill({WORKER_IP: "worker", OTHER_IP: "other"}[ip])
        cluster.node("new", [f"--node-ip-address={NEW_IP}", "--num-cpus=2"])
        rest, _ = proc.communicate(timeout=400)
    finally:
        proc.kill()
    after = rest.splitlines()
    assert proc.returncode == 0, "".join(lines[-10:]) + rest[-3000:]
    record = json.loads((tmp_path / "out" / "sweep.json").read_text())["trials"]
    assert [(t["iterations"], t["error"]) for t in record] == [(4, None)]
    iterations = [int(x.split("iter")[1].split()[0]) for x in after if ": iter" in x]
    assert iterations and iterations[-1] == 4 and 1 not in iterations  # continued from a checkpoint, not anew
    trials = [a for a in cluster.actors("Ragen") if a["actor_id"] not in before]
    assert len({a["node_id"] for a in trials}) == 2  # the first died with its node; the restart ran elsewhere
    assert list((tmp_path / "shared" / "out").glob("*/checkpoint_*"))
