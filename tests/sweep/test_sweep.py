"""`ragen-rllib sweep`: the tune section in YAML (search spaces, variants, schedulers), bad keys named before any
trial starts, and a 2-trial sweep end to end from a config file."""

import json

import pytest
import yaml
from ray import tune
from tests.conftest import ray_temp_dir

from ragen_rllib import RagenConfig
from ragen_rllib.sweep.run import swept_values, table
from ragen_rllib.sweep.space import apply_param_space, make_scheduler, to_tune

M = "evaluation/env_runners/success_rate"
BASE = {
    "environment": {"env": "ragen/FrozenLake-v0", "env_config": {"size": 4, "success_rate": 1.0}},
    "env_runners": {"num_env_runners": 1},
    "learners": {"num_learners": 0},
    "rl_module": {"model_config": {"model": "tiny:nano", "autocast": None}},
    "training": {"adv_estimator": "grpo", "env_groups": 2, "group_size": 2, "minibatch_size": 4, "max_turns": 2,
                 "max_response_tokens": 16, "lr": 1.0e-3, "val_env_groups": 2, "engine": "vllm",
                 "engine_kwargs": {"max_model_len": 1024}, "val_before_train": True},
    "evaluation": {"evaluation_interval": 1},
    "debugging": {"seed": 0},
    "run": {"stop": {"training_iteration": 1}},
}


def test_yaml_distributions_become_tune_objects():
    assert isinstance(to_tune({"grid_search": [1, 2]}, "k"), dict)  # tune.grid_search is a marked dict
    assert to_tune({"grid_search": [1, 2]}, "k") == tune.grid_search([1, 2])
    assert type(to_tune({"loguniform": [1e-6, 1e-4]}, "k")).__name__ == "Float"
    assert to_tune({"not_a_distribution": 3}, "k") == {"not_a_distribution": 3}
    with pytest.raises(ValueError, match=r"k: uniform takes \[low, high\]"):
        to_tune({"uniform": [1]}, "k")


def test_param_space_sets_keys_and_validates_one_sample():
    c = RagenConfig().environment("ragen/FrozenLake-v0", env_config={"size": 4}).rl_module(
        model_config={"model": "tiny:nano"})
    c, sample = apply_param_space(c, {
        "environment.env_config.success_rate": {"grid_search": [1.0, 0.5]},
        "training.lr": {"loguniform": [1e-6, 1e-4]},
        "variant": {"grid_search": [{"name": "on", "training.filter_strategy": "top_p", "training.filter_value": 0.9},
                                    {"name": "off", "training.filter_strategy": None}]}})
    assert c.env_config == {"size": 4, "success_rate": tune.grid_search([1.0, 0.5])}
    assert (sample.env_config["success_rate"], sample.lr, sample.filter_strategy) == (1.0, 1e-6, "top_p")
    sample.validate()
    trial = RagenConfig().update_from_dict({**c.to_dict(), "lr": 3e-5, "env_config": {"size": 4, "success_rate": 0.5},
                                            "sweep_variant": {"name": "on", "training.filter_value": 0.7}})
    assert (trial.lr, trial.filter_value, trial.env_config["success_rate"]) == (3e-5, 0.7, 0.5)


def test_several_grouped_axes_cross_and_a_preset_applies_before_the_other_keys():
    c = RagenConfig().environment("ragen/FrozenLake-v0", env_config={"size": 4}).rl_module(
        model_config={"model": "tiny:nano"})
    c, sample = apply_param_space(c, {
        "variant.algo": {"grid_search": [{"name": "dapo", "preset": "dapo", "training.clip_high": 0.3},
                                         {"name": "ppo", "preset": "ppo"}]},
        "variant.env": {"grid_search": [{"name": "lake", "environment.env_config": {"size": 4}},
                                        {"name": "box", "environment.env": "ragen/Sokoban-v0",
                                         "environment.env_config": {"dim_room": [6, 6]}}]}})
    assert (sample.adv_estimator, sample.clip_high, sample.dynamic_sampling) == ("grpo", 0.3, True)
    sample.validate()
    trial = RagenConfig().update_from_dict({**c.to_dict(), "sweep_variants": {
        "algo": {"name": "ppo", "preset": "ppo"},
        "env": {"name": "box", "environment.env": "ragen/Sokoban-v0", "environment.env_config": {"dim_room": [6, 6]}}}})
    assert (trial.adv_estimator, trial.env, trial.env_config) == ("gae", "ragen/Sokoban-v0", {"dim_room": [6, 6]})
    rows = swept_values(trial.to_dict(), {"variant.algo": None, "variant.env": None})
    assert rows == {"variant.algo": "ppo", "variant.env": "box"}
    with pytest.raises(ValueError, match="preset='dapp' is unknown"):
        apply_param_space(c, {"variant.algo": {"grid_search": [{"name": "x", "preset": "dapp"}]}})


@pytest.mark.parametrize("space, match", [
    ({"training.lrr": 1.0}, r"training.lrr is not a config key; did you mean training.lr"),
    ({"trainig.lr": 1.0}, r"'trainig.lr' is not a config key path.*did you mean 'training'"),
    ({"environment.env_config.sucess_rate": {"grid_search": [1.0]}},
     r"ragen/FrozenLake-v0 takes no env_config key 'sucess_rate'; did you mean \['success_rate'\]"),
    ({"variant": {"grid_search": [{"name": "x", "training.filter_valu": 0.9}]}}, r"did you mean training.filter_value"),
    ({"training.filter_strategy": {"grid_search": ["top_q"]}}, r"filter_strategy='top_q' is invalid"),
])
def test_bad_search_space_keys_fail_before_any_trial(space, match):
    c = RagenConfig().environment("ragen/FrozenLake-v0").rl_module(model_config={"model": "tiny:nano"})
    with pytest.raises(ValueError, match=match):
        _, sample = apply_param_space(c, space)
        sample.validate()


def test_schedulers_by_name():
    c = RagenConfig().environment("ragen/FrozenLake-v0")
    assert type(make_scheduler({"type": "asha", "grace_period": 1, "max_t": 4}, M, "max", c)).__name__ == \
        "AsyncHyperBandScheduler"
    pbt = make_scheduler({"type": "pbt", "perturbation_interval": 2,
                          "hyperparam_mutations": {"training.lr": {"loguniform": [1e-6, 1e-4]},
                                                   "environment.env_config.success_rate": [0.5, 1.0]}}, M, "max", c)
    assert set(pbt._hyperparam_mutations) == {"lr", "env_config"}
    with pytest.raises(ValueError, match="tune.scheduler.type='hyperband' is unknown"):
        make_scheduler({"type": "hyperband"}, M, "max", c)
    with pytest.raises(ValueError, match="pbt needs hyperparam_mutations"):
        make_scheduler({"type": "pbt"}, M, "max", c)


def test_a_metric_no_result_reports_fails_fast():
    c = RagenConfig().environment("ragen/FrozenLake-v0")
    make_scheduler(None, "evaluation/env_runners/Lake/success_rate", "max", c)  # per-tag metrics are fine
    with pytest.raises(ValueError, match=r"tune.metric='evaluation/env_runners/succes_rate' is not reported.*"
                                         r"did you mean \['evaluation/env_runners/success_rate'"):
        make_scheduler({"type": "asha"}, "evaluation/env_runners/succes_rate", "max", c)


def test_storage_path_places_the_experiment_and_refuses_what_it_cannot_use(tmp_path):
    from ragen_rllib.run.train import experiment_location

    out = tmp_path / "runs" / "lake"
    assert experiment_location({}, out) == (str(out.resolve()), "trials")
    assert experiment_location({"storage_path": str(tmp_path / "nfs")}, out) == (str(tmp_path / "nfs"), "lake")
    assert experiment_location({"storage_path": "file:///shared/ragen/"}, out) == ("file:///shared/ragen", "lake")
    with pytest.raises(ValueError, match="run.storage_path='nosuch://x': pyarrow cannot open it"):
        experiment_location({"storage_path": "nosuch://x"}, out)
    with pytest.raises(ValueError, match="train's --resume .* needs a directory"):
        experiment_location({"storage_path": "s3://bucket/x"}, out, uri_ok=False)


def test_table_has_one_row_per_trial():
    rows = [{"variant": "on", "validation_success": 0.5, "validation_return": 0.4, "validation_valid_actions": 1.0,
             "iterations": 3}]
    text = table(rows, {"variant": {}})
    assert "| on | - | 50.0% | +0.400 | 100.0% | 3 |" in text


@pytest.mark.slow(seconds=60)
def test_asha_stops_the_worse_of_two_trials_early(ray_session, tmp_path):
    """ASHA, 2 trials one after the other, a rung at 1 iteration (reduction factor 2, 2 at most), on a metric that
    differs by construction (time, lower is better; the second trial writes 6x longer answers): the first runs
    to the end, the second is stopped at its first rung."""
    from ragen_rllib.sweep.run import sweep

    cfg = _write(tmp_path, {**BASE, "run": {"stop": {"training_iteration": 2}, "out_dir": str(tmp_path / "out")},
                            "tune": {"param_space": {"training.max_response_tokens": {"grid_search": [16, 96]}},
                                     "metric": "time_total_s", "mode": "min", "max_concurrent_trials": 1,
                                     "scheduler": {"type": "asha", "grace_period": 1, "max_t": 2,
                                                   "reduction_factor": 2}}})
    sweep(cfg, [])
    trials = json.loads((tmp_path / "out" / "sweep.json").read_text())["trials"]
    iterations = {t["training.max_response_tokens"]: t["iterations"] for t in trials}
    assert iterations[16] == 2 and iterations[96] < 2, iterations


class SigkilledSweep:
    """The sweep of :func:`test_a_sigkilled_sweep_resumes_without_rerunning_finished_trials`, run from a thread:
    ``ragen-rllib sweep`` in its own process group, SIGKILLed (with the Ray it started) once the first trial is done
    and the second has checkpointed iteration 2, then ``sweep --resume``. It runs beside the PBT test (its trials'
    start-ups leave a core idle most of the time); :meth:`result` waits for it."""

    def __init__(self, tmp_path):
        import threading

        self.tmp_path, self.out, self.lines, self.resumed, self.error, self.proc = \
            tmp_path, tmp_path / "out", [], None, None, None
        cfg = tmp_path / "sweep.yaml"
        cfg.write_text(yaml.safe_dump({
            **BASE, "evaluation": {"evaluation_interval": 3},  # validation at the last iteration only
            "run": {"stop": {"training_iteration": 3}, "checkpoint_every": 1, "out_dir": str(self.out),
                    "storage_path": str(tmp_path / "shared"),  # trials and checkpoints on "shared" storage
                    "ray_init": {"num_cpus": 2, "_temp_dir": str(ray_temp_dir("ray_sweep_kill"))}},
            "tune": {"param_space": {"environment.env_config.success_rate": {"grid_search": [1.0, 0.5]}},
                     "max_concurrent_trials": 1}}))
        self.cfg = cfg
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        import subprocess
        import sys
        import time

        command = [sys.executable, "-m", "ragen_rllib.cli", "sweep"]
        try:
            self.proc = subprocess.Popen([*command, str(self.cfg)], cwd=self.tmp_path, start_new_session=True,
                                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            lines, deadline = self.lines, time.time() + 400
            for line in self.proc.stdout:  # kill once the first trial is done and the second has a checkpoint
                lines.append(line)
                done = [x.split(":")[0] for x in lines if x.rstrip().endswith(": done")]
                if len(done) == 1 and any(": iter    2" in x and not x.startswith(done[0]) for x in lines) or \
                        time.time() > deadline:
                    break
            self.kill()
            self.proc = subprocess.Popen([*command, "--resume", str(self.out)], cwd=self.tmp_path,
                                         start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                         text=True)
            stdout, stderr = self.proc.communicate(timeout=600)
            self.resumed = subprocess.CompletedProcess(self.proc.args, self.proc.returncode, stdout, stderr)
        except BaseException as e:  # noqa: BLE001 (reported by result())
            self.error = repr(e)
        finally:
            self.kill()

    def kill(self):
        import os
        import signal

        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()

    def result(self):
        self.thread.join(timeout=1100)
        if self.thread.is_alive():
            self.kill()
        assert self.error is None and not self.thread.is_alive(), self.error or "the sweep runs still"
        return self.lines, self.resumed


@pytest.fixture(scope="module")
def sigkilled_sweep(request, tmp_path_factory):
    """Starts :class:`SigkilledSweep` when its test is selected (requested by the test it runs beside)."""
    selected = any(item.module.__name__ == __name__ and
                   item.function.__name__ == "test_a_sigkilled_sweep_resumes_without_rerunning_finished_trials"
                   for item in request.session.items)
    run = SigkilledSweep(tmp_path_factory.mktemp("sigkilled_sweep")) if selected else None
    yield run
    if run is not None:
        run.kill()
        run.thread.join(timeout=60)


@pytest.mark.slow(seconds=110)
@pytest.mark.usefixtures("sigkilled_sweep")  # that sweep's processes run beside this test
def test_a_pbt_exploit_loads_the_donors_weights_into_learner_and_engines(ray_session, tmp_path):
    """Two trials, PBT after every iteration (synchronous, so the donor has a checkpoint): the receiving trial's
    learner holds exactly the donor checkpoint's weights after the exploit, its engine generates what those
    weights generate, and the seed schedule comes along."""
    from ragen_rllib.algorithms.ragen.ragen import Ragen
    from ragen_rllib.sweep.space import apply_param_space

    probe_dir = tmp_path / "probe"
    probe_dir.mkdir()

    def probe(algorithm, **kwargs):  # on_checkpoint_loaded, inside the trial (pickled by value)
        import hashlib
        import json as _json
        import uuid
        from pathlib import Path as _Path

        import torch
        from ray.rllib.core import DEFAULT_MODULE_ID
        from ray.rllib.core.rl_module.rl_module import RLModule

        from ragen_rllib.engines.base import SamplingConfig
        from ragen_rllib.evaluation.evaluate import MODULE_IN_CHECKPOINT

        def digest(state):
            h = hashlib.sha256()
            for name in sorted(state):
                h.update(name.encode() + state[name].detach().float().cpu().numpy().tobytes())
            return h.hexdigest()

        module = next(iter(algorithm.learner_group.foreach_learner(
            lambda learner: learner.module[DEFAULT_MODULE_ID].unwrapped()))).get()
        stored = RLModule.from_checkpoint(_Path(algorithm.restored_from, *MODULE_IN_CHECKPOINT))
        prompt = [1, 2, 3, 4, 5]
        with torch.no_grad():
            greedy = module.lm.generate(torch.tensor([prompt]), max_new_tokens=6, do_sample=False)[0, 5:].tolist()
        engine = algorithm.env_runner_group.foreach_env_runner(
            lambda r: list(r.engine.generate([prompt], SamplingConfig(temperature=0.0, max_tokens=6))[0].token_ids),
            local_env_runner=False)[0]
        record = {"from": algorithm.restored_from, "learner": digest(module.hf_state_dict()),
                  "checkpoint": digest(stored.hf_state_dict()), "greedy": greedy, "engine": engine,
                  "round": algorithm._round, "step": algorithm._step, "iteration": algorithm.iteration}
        (_Path(str(probe_dir)) / f"{uuid.uuid4().hex}.json").write_text(_json.dumps(record))

    config = RagenConfig.from_yaml(_write(tmp_path, {**BASE, "evaluation": {"evaluation_interval": 0}}))
    config.callbacks(on_checkpoint_loaded=probe)
    config.tune_settings = {}
    config, _ = apply_param_space(config, {"training.lr": {"grid_search": [1e-3, 2e-3]}})
    scheduler = make_scheduler({"type": "pbt", "perturbation_interval": 1, "quantile_fraction": 0.5, "synch": True,
                                "hyperparam_mutations": {"training.lr": [1e-3, 2e-3, 4e-3]}},
                               "time_total_s", "max", config)
    tuner = tune.Tuner(Ragen, param_space=config, tune_config=tune.TuneConfig(scheduler=scheduler),
                       run_config=tune.RunConfig(storage_path=str(tmp_path), name="pbt",
                                                 stop={"training_iteration": 2}, verbose=0,
                                                 checkpoint_config=tune.CheckpointConfig(checkpoint_frequency=1)))
    assert not tuner.fit().errors
    records = [json.loads(p.read_text()) for p in probe_dir.glob("*.json")]
    assert records, "no PBT exploit happened"
    for r in records:
        assert r["learner"] == r["checkpoint"]  # the donor's weights, exactly
        assert r["engine"] == r["greedy"] and r["engine"]  # the engine generates with them
        assert r["step"] == r["round"] == r["iteration"] >= 1  # the seed schedule travels with the checkpoint


@pytest.mark.slow
def test_a_sigkilled_sweep_resumes_without_rerunning_finished_trials(sigkilled_sweep):
    """The sweep process (and the Ray it started) dies by SIGKILL mid-way; --resume keeps the finished trial and
    continues the interrupted one from its last checkpoint (the runs: :class:`SigkilledSweep`)."""
    lines, resumed = sigkilled_sweep.result()
    tmp_path, out = sigkilled_sweep.tmp_path, sigkilled_sweep.out
    assert sum("done" in x for x in lines) == 1, "".join(lines[-30:])
    first = [line for line in lines if ": iter" in line][0].split(":")[0]  # the trial that finished

    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert f"{first}: iter" not in resumed.stdout  # the finished trial is not rerun
    iters = [line for line in resumed.stdout.splitlines() if ": iter" in line]
    assert iters and all(int(line.split("iter")[1].split()[0]) >= 2 for line in iters)  # from a checkpoint
    record = json.loads((out / "sweep.json").read_text())
    assert [r["iterations"] for r in record["trials"]] == [3, 3]
    # the sweep's record: one row per grid point, no errors, a table and a plot
    assert sorted(r["environment.env_config.success_rate"] for r in record["trials"]) == [0.5, 1.0]
    assert all(r["error"] is None and 0.0 <= r["validation_success"] <= 1.0 for r in record["trials"])
    assert (out / "sweep.md").read_text().count("\n") == 4 and (out / "sweep.png").is_file()
    # the trials and their checkpoints live on the storage, resumed from there; the sweep directory holds the records
    assert len(list((tmp_path / "shared" / "out").glob("*/checkpoint_*"))) >= 2 and not (out / "trials").exists()


def _write(tmp_path, tree):
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(tree))
    return path


def test_a_trial_whose_variant_changes_the_estimator_gets_a_value_head_that_follows_it():
    """Tune sends each trial's config as a dict to Ragen.default_resource_request (which validates it) in the
    sweep's own process: a base config with a critic (ppo) and a local model directory must give a grpo trial no
    frozen value_head (it used to end the whole sweep: "value_head=True disagrees with adv_estimator='grpo'")."""
    from ragen_rllib import Ragen
    from ragen_rllib.models.registry import resolve_model
    from ragen_rllib.run.train import absolute_model

    model = str(resolve_model("tiny:nano"))  # a directory: absolute_model rewrites model_config
    config = (RagenConfig().environment("ragen/FrozenLake-v0", env_config={"size": 4})
              .rl_module(model_config={"model": model}).training(env_groups=2, group_size=2, minibatch_size=2))
    space = {"variant.algo": {"grid_search": [{"name": "ppo", "preset": "ppo"}, {"name": "grpo", "preset": "grpo"}]}}
    config, sample = apply_param_space(config, space)
    absolute_model(config, sample.model_name)
    resolved = config.to_dict()
    for entry in space["variant.algo"]["grid_search"]:
        trial = {**resolved, "sweep_variants": {"algo": entry}}
        Ragen.default_resource_request(trial)  # validates the trial's config, as Tune does before placing it
        built = RagenConfig().update_from_dict(trial)
        assert built.model_config["value_head"] is (entry["preset"] == "ppo")
