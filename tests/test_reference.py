"""docs/reference.md is generated from the code's tables and is current; meanings never hand-type choices."""

import runpy
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_reference_page_is_current_and_lists_every_key_column_and_metric():
    render = runpy.run_path(str(ROOT / "scripts" / "reference.py"))["render"]
    text = render()
    assert (ROOT / "docs" / "reference.md").read_text() == text, \
        "docs/reference.md is stale: run .venv/bin/python scripts/reference.py"
    from ragen_rllib.algorithms.ragen.config.hyperparams import HYPERPARAMS
    from ragen_rllib.core.keys import COLUMNS, SUCCESS_RATE, WEIGHTS_STALENESS

    for name in [*HYPERPARAMS, *COLUMNS, SUCCESS_RATE, WEIGHTS_STALENESS, "gradient_checkpointing"]:
        assert f"`{name}`" in text, name


def test_every_enumerated_setting_lists_its_choices_from_the_choice_table_only():
    from ragen_rllib.algorithms.ragen.config import hyperparams as H

    for key, choices in H.CHOICES.items():
        meaning = H.HYPERPARAMS[key][1]
        assert meaning.endswith("one of " + ", ".join(map(repr, choices))), key
    for key, (_, meaning) in H.HYPERPARAMS.items():  # no hand-typed choice list before the generated one
        written = meaning.rsplit("; one of ", 1)[0] if key in H.CHOICES else meaning
        assert "one of (" not in written and " | " not in written, (key, written)
