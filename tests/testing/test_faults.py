"""Env faults: time limits on reset/step (TimeLimitedEnv) and injected faults (FaultInjectEnv)."""

import math
import os
import time

import pytest

from ragen_rllib.envs.loading import check_env_config, make_env
from ragen_rllib.envs.timeout import EnvTimeout, TimeLimitedEnv

FAULTY = "ragen_rllib.testing.fault_inject:FaultInjectEnv"


def faulty(tmp_path, line, **kw):
    trigger = tmp_path / "trigger"
    trigger.write_text(line)
    return make_env(FAULTY, {"env_config": {"size": 3}, "trigger_file": str(trigger), **kw}), trigger


def test_fault_fires_only_in_the_named_process_and_while_the_file_exists(tmp_path):
    env, trigger = faulty(tmp_path, f"raise {os.getpid() + 1}")
    env.reset(seed=0)
    env.step("Down")  # another process's pid: no fault
    trigger.write_text(f"raise {os.getpid()}")
    with pytest.raises(RuntimeError, match="injected fault in step"):
        env.step("Down")
    trigger.unlink()
    env.step("Down")


def test_nan_fault_poisons_the_reward(tmp_path):
    env, _ = faulty(tmp_path, "nan")  # target defaults to every process, when to step
    env.reset(seed=0)
    assert math.isnan(env.step("Down")[1])


def test_a_hung_step_times_out_and_the_env_stays_stuck(tmp_path):
    env, trigger = faulty(tmp_path, "hang *", hang_s=5.0)
    limited = TimeLimitedEnv(env, timeout_s=0.3)
    limited.reset(seed=0)
    start = time.perf_counter()
    with pytest.raises(EnvTimeout, match="env.step ran longer than env_step_timeout_s=0.3"):
        limited.step("Down")
    assert time.perf_counter() - start < 2.0 and limited.stuck
    trigger.unlink()
    with pytest.raises(EnvTimeout, match="still running a call that timed out"):
        limited.reset(seed=0)


def test_a_time_limited_env_passes_results_and_errors_through(tmp_path):
    limited = TimeLimitedEnv(make_env("ragen/FrozenLake-v0", {"size": 3}), timeout_s=5)
    obs, info = limited.reset(seed=0)
    assert "P" in obs and info["success"] is False
    assert len(limited.step("Down")) == 5 and not limited.stuck
    env, _ = faulty(tmp_path, "raise * reset")
    with pytest.raises(RuntimeError, match="injected fault in reset"):
        TimeLimitedEnv(env, timeout_s=5).reset(seed=0)
    with pytest.raises(ValueError, match="timeout_s=0 is invalid"):
        TimeLimitedEnv(env, timeout_s=0)


def test_fault_env_config_and_trigger_lines_are_checked(tmp_path):
    check_env_config(FAULTY, {"trigger_file": "x", "hang_s": 1})
    with pytest.raises(ValueError, match="env_config key 'trigger'.*did you mean 'trigger_file'"):
        check_env_config(FAULTY, {"trigger": "x"})
    env, trigger = faulty(tmp_path, "explode *")
    with pytest.raises(ValueError, match="'explode \\*' is not '<fault> <target> \\[<when>\\]'"):
        env.reset(seed=0)
    trigger.write_text("")  # empty: no fault
    env.reset(seed=0)
