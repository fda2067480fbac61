"""How much of the learner's gradient on the shared backbone comes from the critic's value loss?

The Sokoban recipe's critic is a value head on the policy's own backbone, so the value loss trains the backbone too
(RAGEN's critic is a separate model). This restores a run's learner from a checkpoint, samples one batch of the
recipe's 128 trajectories with its weights (an in-process env runner with its vLLM engine), keeps the 32 rows of the
groups with the widest reward spread (what the filter would train on first), and takes one update from a fresh
restore per setting, with no gradient clipping: ``vf_loss_coeff`` 1 (the recipe), 0.1 and 0 (the policy loss
alone). It prints, per setting, the gradient norms of the backbone and of the value head, and writes them to
benchmarks/results/critic_gradient.json.

Run (heavy: alone on the machine):
    .venv/bin/python benchmarks/critic_gradient.py CHECKPOINT_DIR [--model WARM_START_DIR]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "runs" / "sokoban_ragen_smollm2_cpu.yaml"
OUT = Path(__file__).parent / "results" / "critic_gradient.json"
ROWS = 32
SETTINGS = {"vf_loss_coeff_1": 1.0, "vf_loss_coeff_0.1": 0.1, "policy_only": 0.0}


def main() -> None:
    import numpy as np
    import torch
    from ray.rllib.core import DEFAULT_MODULE_ID
    from ray.rllib.policy.sample_batch import MultiAgentBatch, SampleBatch
    from transformers import AutoTokenizer

    from ragen_rllib import RagenConfig
    from ragen_rllib.algorithms.ragen.driver.batch import build_batch
    from ragen_rllib.core.precision import cpu_info
    from ragen_rllib.envs.base import text_space
    from ragen_rllib.runner.ragen_env_runner import RagenEnvRunner

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("checkpoint", type=Path)
    p.add_argument("--model", default=str(ROOT / ".cache/demo/smollm2-sokoban-480x1ep-noise0.1-bf16"))
    args = p.parse_args()
    ckpt = args.checkpoint.resolve()

    def config(**training):
        return RagenConfig.from_yaml(CONFIG, [f"rl_module.model_config.model={args.model}",
                                              "training.val_before_train=false"]).training(**training)

    def learner_for(cfg):
        learner = cfg.build_learner(spaces={DEFAULT_MODULE_ID: (text_space(), text_space())})
        learner.restore_from_path(str(ckpt / "learner_group" / "learner"))
        return learner

    start = time.time()
    learner = learner_for(config())
    weights = {k: v.clone() for k, v in learner.module[DEFAULT_MODULE_ID].unwrapped().hf_state_dict().items()}
    del learner
    runner = RagenEnvRunner(config=config())
    runner.load_weights(weights, 1)
    trajectories = runner.sample(step=1000)
    runner.stop()
    groups: dict[int, list] = {}
    for t in trajectories:
        groups.setdefault(t.group_id, []).append(t)
    rows = [t for g in sorted(groups.values(), key=lambda g: -np.std([t.score for t in g])) for t in g][:ROWS]
    pad = AutoTokenizer.from_pretrained(args.model).pad_token_id
    out = {}
    for name, coeff in SETTINGS.items():
        cfg = config(vf_loss_coeff=coeff, grad_clip=None)
        learner = learner_for(cfg)
        batch = build_batch(rows, pad, config=cfg)
        result = learner.update(batch=MultiAgentBatch({DEFAULT_MODULE_ID: SampleBatch(batch)}, env_steps=len(rows)),
                                minibatch_size=len(rows), num_epochs=1, num_total_minibatches=1)[DEFAULT_MODULE_ID]
        module = learner.module[DEFAULT_MODULE_ID].unwrapped()

        def norm(params):
            grads = [q.grad.float().norm() ** 2 for q in params if q.grad is not None]
            return float(torch.stack(grads).sum().sqrt()) if grads else 0.0

        out[name] = {"vf_loss_coeff": coeff, "backbone_grad_norm": norm(module.lm.parameters()),
                     "value_head_grad_norm": norm(module.value_head.parameters()),
                     **{k: float(result[k].peek()) for k in ("policy_loss", "value_loss", "entropy")}}
        print(name, json.dumps(out[name]), flush=True)
        del learner
    record = {"checkpoint": str(ckpt.relative_to(ROOT)) if ckpt.is_relative_to(ROOT) else str(ckpt),
              "rows": ROWS, "sampled_success": float(np.mean([t.metrics.get("success", 0) for t in trajectories])),
              "cpu": cpu_info(), "seconds": time.time() - start, "settings": out}
    OUT.write_text(json.dumps(record, indent=2) + "\n")
    print("saved", OUT)


if __name__ == "__main__":
    main()
