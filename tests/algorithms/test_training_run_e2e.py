"""`ragen-rllib train` end to end on the nano model: config file -> iterations -> checkpoints -> resume -> export
-> eval -> view; and a user env module shipped to the runners by the Ray runtime env."""

import json

import pytest
from tests.conftest import ray_temp_dir

from ragen_rllib.algorithms.ragen.config.config_files import ConfigFileError
from ragen_rllib.cli import main
from ragen_rllib.run.train import CONFIG_FILE, CURVE_FILE, PROGRESS_FILE

pytestmark = pytest.mark.slow

CONFIG = """
environment: {env: ragen/FrozenLake-v0, env_config: {size: 4, success_rate: 1.0}}
env_runners: {num_env_runners: 1}
learners: {num_learners: 0}
rl_module: {model_config: {model: "tiny:nano", autocast: null}}
training: {adv_estimator: grpo, env_groups: 2, group_size: 2, minibatch_size: 4, max_turns: 2,
           max_response_tokens: 24, lr: 1.0e-3, val_env_groups: 2, engine: vllm,
           engine_kwargs: {max_model_len: 1024}}
evaluation: {evaluation_interval: 2}
debugging: {seed: 0}
run: {stop: {training_iteration: 3}, checkpoint_every: 1}
"""


@pytest.mark.slow(seconds=85)
def test_train_checkpoints_and_resumes_exactly_after_a_kill(ray_session, tmp_path, capsys):
    cfg = tmp_path / "run.yaml"
    cfg.write_text(CONFIG)
    # the same run in its own process, SIGKILLed (with its whole process group) once iteration 2 is checkpointed;
    # it runs (and is watched and killed from a thread) while the uninterrupted reference run trains here
    out = tmp_path / "run"
    killed = KillOnceCheckpointed(cfg, out, "iter_0002")
    try:
        ref = tmp_path / "reference"  # uninterrupted: 3 iterations
        assert main(["train", str(cfg), f"run.out_dir={ref}", "run.loggers=[tensorboard,wandb,mlflow]"]) == 0
    except BaseException:
        killed.kill()
        raise
    killed_after = killed.result()
    log = capsys.readouterr().out
    assert log.count("success") == 3 and "validation" in log and "stopped: training_iteration=3 >= 3" in log
    assert sorted(p.name for p in (ref / "checkpoints").iterdir()) == ["iter_0001", "iter_0002", "iter_0003"]
    loggers_wrote(ref)
    rows = [json.loads(line) for line in (ref / PROGRESS_FILE).read_text().splitlines()]
    assert [r["iteration"] for r in rows] == [1, 2, 3] and rows[1]["validation_success_rate"] is not None
    assert rows[1]["num_env_steps_sampled_lifetime"] > rows[0]["num_env_steps_sampled_lifetime"] > 0
    assert (ref / CURVE_FILE).stat().st_size > 0
    assert "tiny:nano" in (ref / CONFIG_FILE).read_text()

    # resume: continues at iteration 3 from the last complete checkpoint, with an override that reaches the run
    # (argparse would take a lone positional for CONFIG) and changes nothing it computes
    mark = "run.ray_init.runtime_env.env_vars.RESUMED_WITH=override"
    assert main(["train", "--resume", str(out), mark]) == 0
    log = capsys.readouterr().out
    assert f"resumed from {out / 'checkpoints' / killed_after}" in log and "iter    3" in log
    assert "resume: run.ray_init.runtime_env.env_vars.RESUMED_WITH = 'override'" in log
    assert "RESUMED_WITH: override" in (out / CONFIG_FILE).read_text()
    rows_resumed = {json.loads(line)["iteration"]: json.loads(line)
                    for line in (out / PROGRESS_FILE).read_text().splitlines()}
    # iteration 3 is the uninterrupted run's: the same samples (metrics) and the same weights and optimizer state
    same = ("success_rate", "episode_return_mean", "action_valid_rate", "num_env_steps_sampled_lifetime")
    assert {k: rows_resumed[3][k] for k in same} == {k: rows[2][k] for k in same}
    assert_same_learner_state(ref / "checkpoints" / "iter_0003", out / "checkpoints" / "iter_0003")

    # export: a Hugging Face directory whose greedy tokens equal the checkpoint's policy, in transformers and vLLM
    checkpoint = out / "checkpoints" / "iter_0003"
    exported = tmp_path / "hf"
    assert main(["export", str(checkpoint), "--out", str(exported)]) == 0
    assert f"model saved to {exported}" in capsys.readouterr().out
    greedy_equal(checkpoint, exported)

    # eval on the checkpoint: per-env metrics and one JSONL line per trajectory
    rollouts = tmp_path / "rollouts.jsonl"
    assert main(["eval", str(checkpoint), "--config", str(cfg), "--episodes", "3", "--k", "2", "--out",
                 str(rollouts)]) == 0
    printed = capsys.readouterr().out.split("trajectories written")[0]
    report = json.loads(printed[printed.index("{\n"):])  # the report, after any library log lines
    assert set(report["ragen/FrozenLake-v0"]) >= {"success", "pass@1", "pass@2", "valid_action_rate"}
    assert len(rollouts.read_text().splitlines()) == 3 * 2

    # view: one self-contained page that a real browser renders with every trajectory shown
    page = tmp_path / "rollouts.html"
    assert main(["view", str(rollouts), "--out", str(page)]) == 0
    dom = headless_dom(page)
    assert dom.count('data-shown="1"') == 6 and '<span id="shown-count">6</span>' in dom


class KillOnceCheckpointed:
    """Run ``ragen-rllib train`` in a new process group; a thread SIGKILLs the group as soon as
    ``checkpoints/<name>`` exists. :meth:`result`: the newest checkpoint's name at that moment."""

    def __init__(self, cfg, out, name):
        import subprocess
        import sys
        import threading

        self.out, self.name, self.error, self.newest = out, name, None, None
        self.proc = subprocess.Popen([sys.executable, "-m", "ragen_rllib.cli", "train", str(cfg),
                                      f"run.out_dir={out}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     start_new_session=True)
        self.thread = threading.Thread(target=self._watch, daemon=True)
        self.thread.start()

    def _watch(self):
        import time

        deadline = time.time() + 600  # AVX2-only CPUs beside other tests: 300 s was too short
        try:
            while not (self.out / "checkpoints" / self.name).exists():
                if self.proc.poll() is not None:
                    self.error = f"the training process ended ({self.proc.returncode}) before {self.name}"
                    return
                if time.time() > deadline:
                    self.error = f"no {self.name} within 600 s"
                    return
                time.sleep(0.1)
            self.kill()
            self.newest = sorted(p.name for p in (self.out / "checkpoints").iterdir())[-1]
        finally:
            self.kill()

    def kill(self):
        import os
        import signal

        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()

    def result(self):
        self.thread.join(timeout=630)
        if self.thread.is_alive():
            self.kill()
        assert self.error is None and not self.thread.is_alive(), self.error
        return self.newest


def assert_same_learner_state(a, b):
    """Two checkpoints' module weights and optimizer state are equal, array for array."""
    import pickle

    import numpy as np

    def arrays(path):
        learner = path.resolve() / "learner_group" / "learner"
        state = {"module": pickle.loads((learner / "rl_module" / "default_policy" / "module_state.pkl").read_bytes()),
                 "learner": pickle.loads((learner / "state.pkl").read_bytes())}
        flat = {}

        def walk(node, key):
            if isinstance(node, dict):
                for k, v in node.items():
                    walk(v, f"{key}/{k}")
            elif isinstance(node, np.ndarray) or hasattr(node, "numpy"):
                flat[key] = np.asarray(node)
        walk(state, "")
        return flat

    left, right = arrays(a), arrays(b)
    assert left.keys() == right.keys() and any("optim" in k for k in left) and len(left) > 10
    differ = [k for k in left if not np.array_equal(left[k], right[k])]
    assert differ == [], differ[:5]


def headless_dom(page):
    """The page's DOM after its script ran, in headless Chromium (console errors fail the test)."""
    import shutil
    import subprocess

    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    assert browser, "Chromium is not installed: run `bash scripts/setup_browser.sh`"
    proc = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0",
                           f"--user-data-dir={page.parent / 'chromium-profile'}", "--dump-dom", page.as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert [line for line in proc.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line] == []
    return proc.stdout


def loggers_wrote(out):
    """TensorBoard events with the training metrics, an offline W&B run, an MLflow run with metrics: all through
    Tune's logger callbacks, none in the user's home."""
    events = list((out / "trials").rglob("events.out.tfevents.*"))
    assert len(events) == 1
    steps = scalar_steps(events[0], "ray/tune/env_runners/success_rate")
    assert steps == [1, 2, 3]
    import os
    from pathlib import Path

    runs = list(Path(os.environ["WANDB_DIR"]).rglob("offline-run-*"))  # the tests' W&B directory (conftest)
    assert any(run.stat().st_mtime > events[0].stat().st_mtime - 600 for run in runs)
    success = [f for f in (out / "mlruns").rglob("success_rate") if f.parts[-3:-1] == ("metrics", "env_runners")]
    assert len(success) == 1 and len(success[0].read_text().splitlines()) == 3  # one line per iteration


def scalar_steps(path, tag):
    """The steps at which a TensorBoard event file holds scalar ``tag`` (TFRecord framing: length, crc, data, crc)."""
    import struct

    from tensorboardX.proto.event_pb2 import Event

    data, pos, steps = path.read_bytes(), 0, []
    while pos < len(data):
        (length,) = struct.unpack("<Q", data[pos:pos + 8])
        event = Event.FromString(data[pos + 12:pos + 12 + length])
        pos += 12 + length + 4
        steps += [event.step for value in event.summary.value if value.tag == tag]
    return steps


def greedy_equal(checkpoint, exported):
    import torch
    from ray.rllib.core.rl_module.rl_module import RLModule
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ragen_rllib.engines.base import SamplingConfig
    from ragen_rllib.engines.factory import make_engine
    from ragen_rllib.evaluation.evaluate import MODULE_IN_CHECKPOINT

    tok = AutoTokenizer.from_pretrained(exported)
    prompt = tok("Turn 1:\nState:\n__P_\n", return_tensors="pt").input_ids
    module = RLModule.from_checkpoint(checkpoint.joinpath(*MODULE_IN_CHECKPOINT).resolve())
    hf = AutoModelForCausalLM.from_pretrained(exported)
    with torch.no_grad():
        a = module.lm.generate(prompt, max_new_tokens=12, do_sample=False)[0, prompt.shape[1]:].tolist()
        b = hf.generate(prompt, max_new_tokens=12, do_sample=False)[0, prompt.shape[1]:].tolist()
    assert a == b
    engine = make_engine("vllm", str(exported), max_model_len=512)
    try:
        c = engine.generate([prompt[0].tolist()], SamplingConfig(temperature=0.0, max_tokens=12))[0].token_ids
    finally:
        engine.close()
    assert list(c) == a[:len(c)] and len(c) > 0


def test_a_config_error_stops_before_any_actor(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the default run directory would be runs/bad here
    cfg = tmp_path / "bad.yaml"
    cfg.write_text(CONFIG.replace("group_size: 2", "group_sise: 2"))
    from ragen_rllib.run.train import train

    with pytest.raises(ConfigFileError, match="group_sise"):
        train(cfg, [])
    assert not (tmp_path / "runs").exists()


USER_ENV = '''
import gymnasium as gym

from ragen_rllib.envs.games.frozen_lake import FrozenLakeEnv


class UserLake(FrozenLakeEnv):
    """FrozenLake under another name: an env that only this module registers."""


gym.register(id="user/Lake-v0", entry_point=UserLake, disable_env_checker=True)
'''


def user_env_run(tmp_path):
    """The module lives in a temp dir that is on no Python path: only run.ray_init's runtime_env ships it. Returns
    ``(the finished train process, tmp_path)``."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    module = tmp_path / "mods" / "user_lake_envs.py"
    module.parent.mkdir()
    module.write_text(USER_ENV)
    cfg = tmp_path / "user.yaml"
    cfg.write_text(CONFIG.replace("env: ragen/FrozenLake-v0,", "env: user/Lake-v0, env_modules: [user_lake_envs],"))
    overrides = ["run.stop.training_iteration=1", "run.checkpoint_every=0", f"run.out_dir={tmp_path / 'run'}",
                 "evaluation.evaluation_interval=0", f"run.ray_init.runtime_env.py_modules=[{module}]",
                 f"run.ray_init._temp_dir={ray_temp_dir('ray_user_env')}", "run.ray_init.num_cpus=4"]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(root / "src")  # the package itself, nothing of tmp_path
    env.pop("RAGEN_RLLIB_DASHBOARD", None)  # the default: the dashboard on
    return subprocess.run([sys.executable, "-m", "ragen_rllib.cli", "train", str(cfg), *overrides], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=400), tmp_path


def no_fit_run(tmp_path):
    """The runner asks for 3 CPUs on a Ray of 2: Tune would wait for resources forever. Returns ``(the finished train
    process, tmp_path)``."""
    import subprocess
    import sys

    cfg = tmp_path / "big.yaml"
    cfg.write_text(CONFIG)
    overrides = ["env_runners.num_cpus_per_env_runner=3", "run.ray_init.num_cpus=2", f"run.out_dir={tmp_path / 'run'}",
                 f"run.ray_init._temp_dir={ray_temp_dir('ray_fit')}"]
    return subprocess.run([sys.executable, "-m", "ragen_rllib.cli", "train", str(cfg), *overrides], cwd=tmp_path,
                          capture_output=True, text=True, timeout=200), tmp_path


# the train subprocesses of the last two tests start early (``early_run``), beside the single-process Ray tests of
# test_ragen_e2e.py, one after the other, or else with this module, beside the kill-and-resume test
EARLY = ["tests/algorithms/test_ragen_e2e.py", "tests/algorithms/test_training_run_e2e.py"]


@pytest.mark.early_run(user_env_run, start_with=EARLY)
def test_a_user_env_module_reaches_the_remote_runners_through_the_runtime_env(early_result):
    """The module lives in a temp dir that is on no Python path: only run.ray_init's runtime_env ships it (the run:
    :func:`user_env_run`)."""
    proc, tmp_path = early_result()
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "iter    1" in proc.stdout and "stopped: training_iteration=1 >= 1" in proc.stdout
    assert "Ray dashboard: http://127.0.0.1:" in proc.stdout  # on by default, on loopback, its URL printed
    assert "env: user/Lake-v0" in (tmp_path / "run" / CONFIG_FILE).read_text()


@pytest.mark.early_run(no_fit_run, start_with=EARLY)
def test_a_trial_that_fits_no_node_stops_with_the_fix_before_tune_starts_it(early_result):
    """The runner asks for 3 CPUs on a Ray of 2: Tune would wait for resources forever (the run: :func:`no_fit_run`)."""
    proc, tmp_path = early_result()
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "its env runner 1 needs 3 CPU on one node" in proc.stderr and "run.ray_init" in proc.stderr
    assert not (tmp_path / "run" / "trials").exists()
