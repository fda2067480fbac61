"""The engine backend is decided in one place (engines/factory.py): the names every reader accepts, and what
``auto`` means."""

import importlib.util
from pathlib import Path

import pytest

from ragen_rllib.algorithms.ragen.config.hyperparams import CHOICES
from ragen_rllib.cli import build_parser
from ragen_rllib.engines.factory import BACKENDS, resolve_backend

SRC = Path(__file__).resolve().parents[2] / "src" / "ragen_rllib"


def test_auto_is_vllm_where_it_is_installed_and_unknown_names_are_refused():
    assert resolve_backend("auto") == ("vllm" if importlib.util.find_spec("vllm") else "hf")
    assert resolve_backend("hf") == "hf" and resolve_backend("vllm") == "vllm"
    with pytest.raises(ValueError, match=r"backend='trt'.*use one of \('auto', 'vllm', 'hf'\)"):
        resolve_backend("trt")


def test_the_config_and_the_command_line_accept_the_same_backends():
    assert tuple(CHOICES["engine"]) == BACKENDS
    evaluate = build_parser()._subparsers._group_actions[0].choices["eval"]
    assert tuple(next(a for a in evaluate._actions if a.dest == "engine").choices) == BACKENDS


def test_only_the_factory_spells_the_backend_rule():
    spellings = ('backend == "auto"', '("auto", "vllm", "hf")', '["auto", "vllm", "hf"]', 'engine == "auto"')
    found = sorted(f"{p.relative_to(SRC)}: {s}" for p in SRC.rglob("*.py") for s in spellings
                   if s in p.read_text() and p.name != "factory.py")
    assert found == []
