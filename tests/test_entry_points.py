"""One config and seed train alike through every entry point: the Python API (``build_algo().train()``),
``ragen-rllib train``, a ``ragen-rllib sweep`` trial and the real-model example script. Each writes a trace
(``training.trace_dir``: the sampled token ids, scores and advantages of the update batch, and the learner's
losses) of its first iteration; the traces must agree. The config is the shipped SmolLM2 FrozenLake run
(slippery ice, so slip noise is in the rewards) with a warm-started tiny model and a tiny budget."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ragen_rllib.algorithms.ragen.driver.trace import read_trace

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "configs" / "runs" / "frozenlake_smollm2_cpu.yaml"
#: the shipped run at a tiny budget (one iteration, no lr warm-up: the example sets lr_decay_steps to its
#: iterations), with slip; the example sets the same keys itself or takes them with --set
SHARED = ["environment.env_config.is_slippery=true", "environment.env_config.success_rate=0.8",
          "training.env_groups=3", "training.group_size=4", "training.minibatch_size=12", "training.max_turns=3",
          "training.val_env_groups=4", "training.lr=1e-3", "training.lr_warmup_steps=0",
          "training.engine_kwargs.kv_cache_gib=1", "training.filter_min_std=0.0"]
API_ONLY = ["training.lr_decay_steps=1", "debugging.seed=0"]  # what the example sets from --iterations / --seed


pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def warm_model(tmp_path_factory) -> Path:
    """A tiny model warm-started on FrozenLake in the run's agent settings (no thinking): valid actions often,
    not always, so groups differ in reward and the advantages are not all zero."""
    out = tmp_path_factory.mktemp("warm") / "model"
    subprocess.run([sys.executable, "-m", "ragen_rllib.cli", "make-model", "--preset", "nano", "--out", str(out),
                    "--warm-start", "FrozenLake", "--episodes", "128", "--epochs", "4", "--lr", "5e-3",
                    "--noise", "0.4", "--eval-episodes", "4", "--agent", "enable_think=false",
                    "--agent", "max_response_tokens=48"], cwd=ROOT, check=True, capture_output=True, timeout=300)
    return out


def _cli(*args: str, timeout: int = 600) -> None:
    proc = subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]


def _compare(name: str, got: dict, want: dict) -> None:
    """``got`` (the trace of entry point ``name``) equals ``want`` (the Python API's): rows, token ids and scores
    exactly, advantages to float32 rounding, losses within float tolerance."""
    g, w = got["modules"]["default_policy"], want["modules"]["default_policy"]
    assert (g["group_ids"], g["scores"]) == (w["group_ids"], w["scores"]), name
    assert g["token_ids"] == w["token_ids"], f"{name}: the sampled token ids differ"
    for row_g, row_w in zip(g["advantages"], w["advantages"]):
        np.testing.assert_allclose(row_g, row_w, rtol=1e-6, atol=1e-7, err_msg=f"{name}: advantages")
    assert g["learner"].keys() == w["learner"].keys(), name
    for key in w["learner"]:
        np.testing.assert_allclose(g["learner"][key], w["learner"][key], rtol=1e-3, atol=1e-5,
                                   err_msg=f"{name}: learner {key}")


def test_the_api_the_cli_a_sweep_trial_and_the_example_train_alike(warm_model, tmp_path, ray_session):
    from ragen_rllib import RagenConfig

    model = f"rl_module.model_config.model={warm_model}"
    traces = {name: tmp_path / name / "trace" for name in ("api", "train", "sweep", "example")}
    algo = RagenConfig.from_yaml(RUN, [model, *SHARED, *API_ONLY, f"training.trace_dir={traces['api']}"]).build_algo()
    try:
        algo.train()
    finally:
        algo.stop()
    want = read_trace(traces["api"] / "iter_0001.json")
    rows = want["modules"]["default_policy"]
    assert len(rows["token_ids"]) == 12 and len(set(rows["scores"])) > 1  # rewards differ: advantages are not 0
    assert any(abs(a) > 0 for row in rows["advantages"] for a in row)

    stop = ["run.stop.training_iteration=1", "run.checkpoint_every=0"]
    _cli("-m", "ragen_rllib.cli", "train", str(RUN), model, *SHARED, *API_ONLY, *stop,
         f"training.trace_dir={traces['train']}", f"run.out_dir={tmp_path / 'train'}")
    sweep = tmp_path / "sweep.yaml"  # the run, swept over one value of the seed: one Tune trial
    sweep.write_text(f"defaults: [{RUN}]\ntune:\n  param_space:\n    debugging.seed: {{grid_search: [0]}}\n")
    _cli("-m", "ragen_rllib.cli", "sweep", str(sweep), model, *SHARED, "training.lr_decay_steps=1", *stop,
         f"training.trace_dir={traces['sweep']}", f"run.out_dir={tmp_path / 'sweep'}")
    _cli("examples/train_smollm2.py", "--env", "frozenlake", "--model", str(warm_model), "--iterations", "1",
         "--out", str(tmp_path / "example"), *(a for s in [*SHARED, f"training.trace_dir={traces['example']}"]
                                               for a in ("--set", s)))
    for name in ("train", "sweep", "example"):
        _compare(name, read_trace(traces[name] / "iter_0001.json"), want)
    assert json.loads((tmp_path / "example" / "result.json").read_text())["iterations"] == 1
