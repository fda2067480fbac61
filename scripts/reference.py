"""Write docs/reference.md from the code's own tables: every hyperparameter (``HYPERPARAMS``), the RLlib defaults
Ragen changes, the config file sections, the estimator table, ``model_config`` keys, the batch columns
(``COLUMNS``) and every metric name (``ragen_rllib.core.keys``).

Run:  .venv/bin/python scripts/reference.py            # rewrites docs/reference.md
      .venv/bin/python scripts/reference.py --check    # exit 1 when docs/reference.md is not current
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET = ROOT / "docs" / "reference.md"


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _table(header: list[str], rows: list[list[object]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
            *("| " + " | ".join(_cell(c) for c in row) + " |" for row in rows), ""]


def metric_sections() -> list[tuple[str, list[tuple[str, str]]]]:
    """``(section title, [(metric name, comment)])`` from ``core/keys.py``: its ``# ---- title`` blocks of
    ``NAME = "name"  # meaning`` lines (the batch columns are listed separately)."""
    import ragen_rllib.core.keys as keys

    source = Path(keys.__file__).read_text().splitlines()
    sections: list[tuple[str, list[tuple[str, str]]]] = []
    for node in ast.parse("\n".join(source)).body:
        if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)):
            continue
        title = next((line.strip("# -").strip() for line in reversed(source[:node.lineno - 1])
                      if line.startswith("# ----")), "")
        if "batch columns" in title:
            continue
        line = source[node.lineno - 1]
        comment = line.split("#", 1)[1].strip() if "#" in line else ""
        if not sections or sections[-1][0] != title:
            sections.append((title, []))
        sections[-1][1].append((node.value.value, comment))
    return sections


def render() -> str:
    from ragen_rllib.algorithms.ragen.config.config_files import RUN_KEYS, SECTIONS, section_keys
    from ragen_rllib.algorithms.ragen.config.hyperparams import HYPERPARAMS, RLLIB_OVERRIDES, TYPES, type_name
    from ragen_rllib.algorithms.ragen.estimators import ESTIMATORS
    from ragen_rllib.core.keys import COLUMNS
    from ragen_rllib.core.model_config import MODEL_SETTINGS

    out = ["# Reference", "",
           "Generated from the code by `scripts/reference.py` (a test checks that this page is current): "
           "every setting, column and metric name, with its meaning as the code declares it.", "",
           "## Hyperparameters (`RagenConfig.training(...)`, a config file's `training` section)", ""]
    out += _table(["key", "type", "default", "meaning"],
                  [[f"`{k}`", type_name(TYPES[k]), f"`{d!r}`", m] for k, (d, m) in HYPERPARAMS.items()])
    out += ["## RLlib settings whose defaults Ragen changes", ""]
    out += _table(["key", "Ragen's default", "why"], [[f"`{k}`", f"`{v!r}`", why]
                                                       for k, (v, why) in RLLIB_OVERRIDES.items()])
    out += ["## Config file sections", "",
            "Each section is the RLlib builder method of that name; its keys are the method's keyword arguments "
            "(RLlib's deprecated aliases excluded), plus Ragen's where noted. `run` and `tune` are Ragen's.", ""]
    rows = [[f"`{s}`", len(section_keys(s)), "+ Ragen's hyperparameters" if s == "training" else
             "+ `env_tags`, `val_env_tags`, `env_modules`" if s == "environment" else ""] for s in SECTIONS]
    rows.append(["`run`", len(RUN_KEYS), ", ".join(f"`{k}`" for k in RUN_KEYS)])
    rows.append(["`tune`", "-", "`param_space`, `metric`, `mode`, `scheduler`, `num_samples`, "
                 "`max_concurrent_trials` (see `ragen_rllib.sweep.run`)"])
    out += _table(["section", "keys", "notes"], rows)
    out += ["## Advantage estimators (`adv_estimator`)", ""]
    out += _table(["name", "runs on", "critic", "groups", "meaning"],
                  [[f"`{n}`", e.where, "yes" if e.critic else "no", "yes" if e.groups else "no", e.meaning]
                   for n, e in ESTIMATORS.items()])
    out += ["## `model_config` keys (`RagenConfig.rl_module(model_config=...)`)", ""]
    out += _table(["key", "default", "allowed", "meaning"],
                  [[f"`{k}`", f"`{s.default!r}`", s.expected, s.meaning] for k, s in MODEL_SETTINGS.items()])
    out += ["## Batch columns (the driver-learner contract)", ""]
    out += _table(["column", "shape", "dtype", "written by", "read by"],
                  [[f"`{n}`", c.shape, c.dtype, c.writer, c.readers] for n, c in COLUMNS.items()])
    out += ["## Metric names", ""]
    for title, metrics in metric_sections():
        out += [f"### {title}", ""]
        out += _table(["name", "meaning"], [[f"`{n}`", m] for n, m in metrics])
    return "\n".join(out).rstrip() + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--check", action="store_true", help="compare instead of writing")
    text = render()
    if p.parse_args().check:
        if not TARGET.is_file() or TARGET.read_text() != text:
            print(f"{TARGET} is not current: run .venv/bin/python scripts/reference.py", file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(text)
    print(f"wrote {TARGET}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
