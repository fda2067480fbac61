"""One trial's placement group (RLlib's own request), cluster specs, and the fit check of plan / train / sweep."""

import subprocess
import sys
from pathlib import Path

import pytest

from ragen_rllib import RagenConfig
from ragen_rllib.run.resources import TrialPlan, check_fits, concurrent_trials, parse_cluster, trial_plan

ROOT = Path(__file__).resolve().parents[2]
SOKOBAN = ROOT / "configs" / "runs" / "sokoban_smollm2_cpu.yaml"


def test_cluster_specs_read_as_one_resource_dict_per_node():
    assert parse_cluster("2 nodes x 8 CPUs, 1 GPU") == [{"CPU": 8.0, "GPU": 1.0}] * 2
    assert parse_cluster("1 node x 4 CPUs; 2 nodes x 2 cpus, rollout=1") == [
        {"CPU": 4.0}, {"CPU": 2.0, "rollout": 1.0}, {"CPU": 2.0, "rollout": 1.0}]
    assert parse_cluster("16 CPUs") == [{"CPU": 16.0}]
    with pytest.raises(ValueError, match="cannot read '4 bananas'.*2 nodes x 8 CPUs"):
        parse_cluster("2 nodes x 4 bananas")
    with pytest.raises(ValueError, match="names no node"):
        parse_cluster(" ; ")


def test_the_plan_is_rllibs_request_with_each_bundle_named_by_its_role():
    config = RagenConfig.from_yaml(SOKOBAN, ["env_runners.num_env_runners=2", "learners.num_learners=2",
                                             "learners.num_gpus_per_learner=1",
                                             "env_runners.custom_resources_per_env_runner={rollout: 1}"])
    plan = trial_plan(config)
    assert [role for role, _ in plan.bundles] == ["driver", "env runner 1", "env runner 2", "learner 1", "learner 2"]
    assert plan.bundles[1][1] == {"CPU": 2.0, "rollout": 1.0}
    assert plan.bundles[3][1] == {"CPU": 2.0, "GPU": 1.0}  # the config's num_cpus_per_learner: 2
    assert plan.total == {"CPU": 9.0, "rollout": 2.0, "GPU": 2.0}
    local = trial_plan(RagenConfig.from_yaml(SOKOBAN))
    assert [role for role, _ in local.bundles] == ["driver + local learner", "env runner 1"]


def test_trials_at_once_pack_bundles_onto_nodes_and_never_split_a_bundle():
    plan = TrialPlan((("driver", {"CPU": 1.0}), ("env runner 1", {"CPU": 2.0})), "PACK")
    assert concurrent_trials(plan, [{"CPU": 3.0}]) == 1
    assert concurrent_trials(plan, [{"CPU": 8.0}, {"CPU": 8.0}]) == 5  # 2 per node, then 2 CPUs left in all
    assert concurrent_trials(plan, [{"CPU": 1.0}, {"CPU": 1.0}, {"CPU": 1.0}]) == 0  # 3 CPUs, no node holds 2
    with pytest.raises(ValueError, match=r"env runner 1 needs 2 CPU on one node.*CPU 2 \(largest node: 1\)"):
        check_fits(plan, [{"CPU": 1.0}] * 3, "test")
    with pytest.raises(ValueError, match=r"needs 3 CPU in all .*the cluster has 2 CPU\. Fix: .*run\.ray_init"):
        check_fits(plan, [{"CPU": 2.0}], "test")
    check_fits(plan, [{"CPU": 3.0}], "test")


def _plan(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ragen_rllib.cli", "plan", str(SOKOBAN), *args],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)


def test_plan_prints_each_bundle_the_total_and_trials_at_once_and_fails_with_the_fix():
    out = _plan("env_runners.num_env_runners=2", "--cluster", "2 nodes x 4 CPUs, 1 GPU")
    assert out.returncode == 0, out.stderr
    assert "env runner 2" in out.stdout and "total                        6 CPU" in out.stdout
    assert "trials at once: 1" in out.stdout  # 6 CPUs per trial on 8: one at a time
    bad = _plan("run.ray_init.num_cpus=2")
    assert bad.returncode == 2
    assert "needs 4 CPU in all" in bad.stderr and "run.ray_init" in bad.stderr
