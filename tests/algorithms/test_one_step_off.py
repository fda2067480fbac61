"""One-step-off bookkeeping: staleness, the background sample's hand-over, the waiting batch's checkpoint form
and the phase timeline."""

import threading
import time

import pytest

from ragen_rllib.algorithms.ragen.driver.one_step_off import (
    Collected,
    NoHealthyRunners,
    Prefetcher,
    dumps,
    loads,
    staleness,
    timeline,
)


def batch(version, sampled=("a", "b")):
    return Collected(list(sampled), list(sampled[:1]), 1.5, {"rounds": 0.0}, runner_metrics=[{"m": 1}],
                     version=version, start=10.0, end=11.5)


def test_staleness_counts_updates_between_sampling_and_training_weights():
    # sync mode: sampled and trained at the same version
    assert staleness(3, batch(3)) == 0
    # one-step-off: sampled before the last update
    assert staleness(4, batch(3)) == 1
    with pytest.raises(ValueError, match="cannot be newer"):
        staleness(2, batch(3))


def test_the_waiting_batch_survives_a_checkpoint_without_runner_metrics():
    restored = loads(dumps(batch(7)))
    assert (restored.sampled, restored.kept, restored.seconds, restored.extra, restored.version) == (
        ["a", "b"], ["a"], 1.5, {"rounds": 0.0}, 7)
    assert restored.runner_metrics == []  # logged when sampled, not twice
    assert dumps(None) is None and loads(None) is None


def test_prefetcher_runs_the_sample_on_another_thread_and_hands_it_over():
    prefetcher = Prefetcher()
    main, seen, release = threading.get_ident(), [], threading.Event()

    def collect():
        seen.append(threading.get_ident())
        release.wait(5)
        return batch(2)

    prefetcher.launch(collect)
    with pytest.raises(RuntimeError, match="already in flight"):
        prefetcher.launch(collect)
    time.sleep(0.05)  # the caller goes on (e.g. learns) while the sample runs
    release.set()
    got, waited = prefetcher.wait()
    assert got.version == 2 and seen and seen[0] != main and waited >= 0
    assert prefetcher.wait() == (None, 0.0)  # nothing in flight
    prefetcher.close()


def test_prefetcher_reports_no_batch_when_no_runner_is_healthy_and_raises_other_errors():
    prefetcher = Prefetcher()

    def down():
        raise NoHealthyRunners("none")

    prefetcher.launch(down)
    assert prefetcher.wait()[0] is None  # the next iteration samples in the foreground

    def broken():
        raise TimeoutError("env runner(s) [1] sent no rollout")

    prefetcher.launch(broken)
    with pytest.raises(TimeoutError, match="sent no rollout"):
        prefetcher.wait()
    prefetcher.close()


def test_timeline_is_relative_to_the_iteration_and_skips_phases_that_did_not_run():
    assert timeline(100.0, sample=None, learn=(101.0, 104.5), prefetch=(100.5, 103.0)) == {
        "ragen_learn_start_s": 1.0, "ragen_learn_end_s": 4.5,
        "ragen_prefetch_start_s": 0.5, "ragen_prefetch_end_s": 3.0}
