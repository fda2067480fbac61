"""A training iteration's trace: what each module trained on (the sampled token ids, scores, group ids and the
driver's advantages of every row) and what its learner reported (losses), one JSON file per iteration under
``trace_dir``. Two runs of the same config and seed trace alike whatever the entry point (the Python API,
``ragen-rllib train``, a sweep trial, an example script); comparing traces shows where they part."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ragen_rllib.core import keys as K

#: the learner results a trace keeps, per module (the loss terms and the step they took)
TRACED_METRICS = (K.POLICY_LOSS, K.VALUE_LOSS, K.ENTROPY_METRIC, K.APPROX_KL, K.CLIP_FRACTION, K.GRAD_NORM,
                  K.LR_MULTIPLIER)


def batch_trace(batch: Mapping[str, np.ndarray]) -> dict[str, list]:
    """One update batch (:func:`~.batch.build_batch`'s numpy columns, rows ``[B, T]``) as lists: per row its
    group id, score, trained token ids (where ``loss_mask`` is 1) and their advantages (float32, rounded to 7
    significant digits by JSON's float repr of the float32 value)."""
    mask = np.asarray(batch[K.LOSS_MASK]) > 0
    ids, adv = np.asarray(batch[K.INPUT_IDS]), np.asarray(batch[K.ADVANTAGES], dtype=np.float32)
    return {"group_ids": [int(g) for g in batch[K.GROUP_IDS]],
            "scores": [float(s) for s in np.asarray(batch[K.SCORES], dtype=np.float32)],
            "token_ids": [ids[r][mask[r]].tolist() for r in range(len(ids))],
            "advantages": [adv[r][mask[r]].tolist() for r in range(len(ids))]}


def learner_trace(metrics, path: tuple[str, ...]) -> dict[str, float]:
    """The :data:`TRACED_METRICS` an RLlib ``MetricsLogger`` holds under ``path`` (e.g. ``("learners", module)``)."""
    return {name: float(metrics.peek((*path, name))) for name in TRACED_METRICS if (*path, name) in metrics}


def write_trace(trace_dir: str | os.PathLike, step: int, modules: Mapping[str, dict[str, Any]]) -> Path:
    """``<trace_dir>/iter_<step+1 as 4 digits>.json`` holding ``{"step": step, "modules": modules}``."""
    path = Path(trace_dir).expanduser() / f"iter_{step + 1:04d}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"step": step, "modules": modules}))
    return path


def read_trace(path: str | os.PathLike) -> dict[str, Any]:
    """A trace file written by :func:`write_trace`."""
    return json.loads(Path(path).read_text())
