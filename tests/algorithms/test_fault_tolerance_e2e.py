"""Fault injection on a real run (modelled on RLlib's test_env_runner_failures.py): a runner SIGKILLed
mid-sample, faulty and hanging envs on chosen runners. Each fault is armed by writing into the trigger file of
:class:`ragen_rllib.testing.fault_inject.FaultInjectEnv` while the algorithm runs."""

import os
import time

import pytest

from ragen_rllib.core import keys as K

pytestmark = pytest.mark.slow

FAULTY = "ragen_rllib.testing.fault_inject:FaultInjectEnv"


def runner_attr(algo, runner_id, fn):
    return algo.env_runner_group.foreach_env_runner(fn, remote_worker_ids=[runner_id], local_env_runner=False)[0]


@pytest.mark.slow(seconds=30)
def test_killed_runner_hung_and_faulty_envs(ray_session, tiny_config, tmp_path):
    trigger = tmp_path / "trigger"
    config = (tiny_config(num_env_runners=2, adv_estimator="grpo", engine="hf", engine_kwargs={},
                          env_step_timeout_s=2.0)
              .environment(FAULTY)
              .fault_tolerance(env_runner_health_probe_timeout_s=120))
    config.env_config = {"env_config": {"size": 4, "success_rate": 1.0}, "trigger_file": str(trigger)}  # replaced
    algo = config.build_algo()
    try:
        pids = {i: runner_attr(algo, i, lambda r: os.getpid()) for i in (1, 2)}
        # (faults fire at env reset: the nano model's answers rarely reach env.step)
        # 1. runner 2 is SIGKILLed as its rollout starts: its group is re-sampled on runner 1, nothing is lost
        trigger.write_text(f"kill {pids[2]} reset")
        result = algo.train()
        runners = result["env_runners"]
        assert runners[K.GROUPS_LOST] == 1 and runners[K.GROUPS_RESAMPLED] == 1
        assert runners["num_episodes"] == 4 and runners[K.RUNNER_ERRORS] == 0
        assert algo.env_runner_group.num_healthy_remote_workers() == 1
        # 2. Ray restarts it (a new process, back once its engine is built); until then its groups are sampled on
        # runner 1, and before it samples again it takes the current weights
        trigger.unlink()
        start, iterations = time.perf_counter(), 0
        while True:
            result = algo.train()
            iterations += 1
            runners = result["env_runners"]
            assert runners[K.GROUPS_LOST] == 0 and runners["num_episodes"] == 4
            if runners[K.RUNNERS_RESTORED] == 1 or iterations == 10:
                break
        restored_in = time.perf_counter() - start
        assert runners[K.RUNNERS_RESTORED] == 1, f"runner 2 not back after {iterations} iterations"
        assert algo.env_runner_group.num_healthy_remote_workers() == 2
        assert runner_attr(algo, 2, lambda r: os.getpid()) != pids[2]
        seqs = algo.env_runner_group.foreach_env_runner(lambda r: r.weights_seq_no, local_env_runner=False)
        assert seqs == [algo._weights_seq_no] * 2 == [1 + iterations] * 2
        # 3. a hanging env on runner 1: each of its episodes ends after env_step_timeout_s, the iteration goes on
        trigger.write_text(f"hang {pids[1]} reset")
        start = time.perf_counter()
        result = algo.train()
        hung_in = time.perf_counter() - start
        assert result["env_runners"][K.RUNNER_ERRORS] == 2 and hung_in < 30
        # 4. an env that raises on runner 2 only: its episodes end as errors, runner 1's train
        trigger.write_text(f"raise {runner_attr(algo, 2, lambda r: os.getpid())} reset")
        result = algo.train()
        assert result["env_runners"][K.RUNNER_ERRORS] == 2 and result["env_runners"]["num_episodes"] == 4
        trigger.unlink()
        result = algo.train()  # the stuck envs of step 3 were replaced: all clean again
        assert result["env_runners"][K.RUNNER_ERRORS] == 0
        print(f"runner back after {restored_in:.1f} s ({iterations} iterations); hung-env iteration {hung_in:.1f} s")
    finally:
        algo.stop()


def node_loss_run(tmp_path):
    """node_failure_scenario.py in its own process: its waits for nodes and health probes leave the cores idle most
    of the time, so it starts early (``early_run``: beside the estimator tests, which use about one core)."""
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).with_name("node_failure_scenario.py")
    temp_dir = Path(__file__).resolve().parents[2] / ".cache" / "ray_nodes"  # short: Ray's socket paths are limited
    return subprocess.run([sys.executable, str(script), str(temp_dir)], capture_output=True, text=True, timeout=400)


@pytest.mark.slow(seconds=30)
@pytest.mark.early_run(node_loss_run, start_with=["tests/algorithms/test_estimators_e2e.py",
                                                  "tests/algorithms/test_fault_tolerance_e2e.py"])
def test_losing_the_runners_node(early_result):
    import json

    proc = early_result()  # node_loss_run's finished process
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["nodes_before"] == [out["second"]] * 2  # both runners on the node that is removed
    # the node dies mid-run, a new one joins: the runners restart there and their groups are sampled again
    assert out["groups_lost"] == 2 and out["restored"] >= 1 and set(out["episodes"]) == {4}  # no group lost
    assert out["nodes_after"] == [out["third"]] * 2, out
    # no node left for them: a clear error, not a hang
    assert out["error"].startswith("RuntimeError: no env runner is healthy"), out["error"]
    print(f"node loss: recovered in {out['recovery_s']:.1f} s, both runners back after {out['extra_iterations']} "
          "more iteration(s)")
