"""RagenLearner: what a Ragen learner does around its gradient steps (like RLlib's ``PPOLearner``).

- Before the minibatch loop, on the WHOLE batch this learner received (and without gradients): the columns
  the loss needs (:func:`prepare_columns`): the pre-update log-probs of the sampled tokens (``old_logprobs``),
  the critic values and advantages of learner estimators (GAE), the reference log-probs (KL). Driver
  estimators (GRPO, ...) arrive ready-made from the driver (whole groups).
- Before each update: the lr schedule of the training step (``lr_warmup_steps``, ``lr_decay``).

The torch learner (:mod:`.torch.ragen_torch_learner`) adds the loss and the micro-batched update.
"""

from __future__ import annotations

import abc
from typing import Any

import numpy as np
import torch
from ray.rllib.core.learner.learner import Learner
from ray.rllib.core.learner.training_data import TrainingData
from ray.rllib.policy.sample_batch import MultiAgentBatch
from ray.rllib.utils.annotations import override

from ragen_rllib.algorithms.ragen.estimators import LEARNER, LearnerInputs, estimator
from ragen_rllib.core import keys as K
from ragen_rllib.core.allocator import release_freed_memory
from ragen_rllib.rl.micro_batches import pack_by_tokens, row_lengths
from ragen_rllib.rl.schedules import lr_multiplier


class RagenLearner(Learner):
    """The framework-independent part of the Ragen learner (see the module docstring)."""

    @override(Learner)
    def after_gradient_based_update(self, *, timesteps: dict[str, Any]) -> None:
        """Hand the memory this update freed back to the system (see :mod:`ragen_rllib.core.allocator`)."""
        super().after_gradient_based_update(timesteps=timesteps)
        release_freed_memory()

    @override(Learner)
    def before_gradient_based_update(self, *, timesteps: dict[str, Any]) -> None:
        """Scale the base learning rates (``lr``, ``critic_lr``) by the schedule factor of this training step
        (``lr_warmup_steps``, ``lr_decay``); RLlib resets them to the base after the update."""
        super().before_gradient_based_update(timesteps=timesteps)
        step = int(timesteps.get(K.TRAINING_STEP, 0))
        for module_id in self.module.keys():
            cfg = self.config.get_config_for_module(module_id)
            factor = lr_multiplier(step, warmup_steps=cfg.lr_warmup_steps, decay=cfg.lr_decay,
                                   decay_steps=cfg.lr_decay_steps, min_ratio=cfg.lr_min_ratio)
            for _, optimizer in self.get_optimizers_for_module(module_id):
                # RLlib 2.60 keeps each optimizer's base lr only in this private map (and resets the lr to it
                # after every update with the private framework setter used here); no public API exists.
                base = float(self._optimizer_lr_schedules[optimizer].get_current_value())
                self._set_optimizer_lr(optimizer, base * factor)
            self.metrics.log_value((module_id, K.LR_MULTIPLIER), factor, window=1)

    @override(Learner)
    def update(self, batch: MultiAgentBatch | None = None, *, training_data: TrainingData | None = None,
               **kwargs) -> Any:
        """Prepare the learner's columns on this learner's whole shard first (:func:`prepare_columns`), then
        RLlib's minibatch loop."""
        if training_data is None:
            training_data = TrainingData(batch=batch, batches=kwargs.pop("batches", None),
                                         batch_refs=kwargs.pop("batch_refs", None))
        training_data.validate()
        training_data.solve_refs()
        if training_data.batch is None:
            raise ValueError("RagenLearner.update needs a prepared MultiAgentBatch (batch=...), not episodes")
        training_data.batch = self.prepare_batch(training_data.batch, kwargs.get("num_epochs", 1),
                                                 kwargs.get("minibatch_size"))
        if self.config.seed is not None:
            # RLlib shuffles minibatches with the global numpy RNG (SampleBatch.shuffle), whose state no
            # checkpoint holds: seeding it from the training step makes a resumed run shuffle exactly as the
            # uninterrupted one did.
            step = int((kwargs.get("timesteps") or {}).get(K.TRAINING_STEP, 0))
            np.random.seed((int(self.config.seed) * 1_000_003 + step) % 2**32)
        return super().update(training_data=training_data, **kwargs)

    @abc.abstractmethod
    def prepare_batch(self, batch: MultiAgentBatch, num_epochs: int, minibatch_size: int | None) -> MultiAgentBatch:
        """Run :func:`prepare_columns` on every module's batch (framework-specific tensors and devices)."""


def needs_forward(config, on_policy: bool) -> bool:
    """Whether the learner must run the no-grad pass before its gradient steps.

    On-policy updates (one epoch, the learner's whole shard in one minibatch) score every token with the
    very weights that are about to take the step, so the old log-probs equal the current ones detached
    (verl does the same); only critic values (GAE) or the reference policy (KL) then need the pass. With
    ``old_logprobs="engine"`` the old log-probs are the engine's sampling-time ones (no pass for them).
    """
    recompute_old = not on_policy and config.old_logprobs == "learner"
    return recompute_old or estimator(config.adv_estimator).critic or uses_reference(config)


def uses_reference(config) -> bool:
    """Whether the reference policy's log-probs are needed (KL as a loss or in the reward)."""
    return bool(config.use_kl_loss or getattr(config, "use_kl_in_reward", False))


@torch.no_grad()
def prepare_columns(module, batch: dict[str, torch.Tensor], config, ref_lm=None,
                    on_policy: bool = False, max_tokens: int | None = None) -> dict[str, torch.Tensor]:
    """Write the learner's columns of :data:`~.keys.COLUMNS` into ``batch`` (always all of them).

    ``batch`` columns are ``[B, T]`` tensors on the learner's device (see :mod:`.driver.batch`). The old log-probs'
    source is chosen here, once: ``old_logprobs="engine"`` -> SAMPLE_LOGPROBS; ``"learner"`` -> recomputed by
    the no-grad pass, except ``on_policy`` (see :func:`needs_forward`), where OLD_IS_CURRENT is 1 and the
    loss takes the current log-probs, detached. REF_LOGPROBS (KL), OLD_VALUES and RETURNS (critic
    estimators) are zeros when not used; learner estimators of the table write ADVANTAGES.

    The pass runs on the micro-batches of the update (:func:`~ragen_rllib.rl.micro_batches.pack_by_tokens`: at
    most ``config.micro_batch_size`` rows and ``max_tokens`` padded tokens, None: no token limit), each cut to its
    longest row (ATTENTION_MASK; the full width without it); outputs past a row's last real token are 0.
    """
    missing = [key for key in K.LEARNER_INPUTS if key not in batch]
    if missing:
        raise ValueError(f"the learner's batch lacks the columns {missing}: build it with "
                         "ragen_rllib.algorithms.ragen.driver.batch.build_batch (see keys.COLUMNS)")
    mask = batch[K.LOSS_MASK].float()
    rows = mask.shape[0]
    zeros = torch.zeros_like(mask)
    current = on_policy and config.old_logprobs == "learner"
    batch[K.OLD_IS_CURRENT] = torch.full((rows,), float(current), device=mask.device)
    batch[K.OLD_LOGPROBS] = batch[K.SAMPLE_LOGPROBS].float() * mask if config.old_logprobs == "engine" else zeros
    batch[K.REF_LOGPROBS], batch[K.OLD_VALUES], batch[K.RETURNS] = zeros, zeros, zeros
    if not needs_forward(config, on_policy):
        return batch
    was_training = module.training
    module.eval()
    ids = batch[K.INPUT_IDS]
    lengths = row_lengths(batch.get(K.ATTENTION_MASK), *ids.shape)
    logps, values, refs = zeros.clone(), zeros.clone(), zeros.clone()
    for part in pack_by_tokens(lengths, max_tokens, config.micro_batch_size):
        width = max(int(lengths[part].max()), 1)
        idx = part.to(ids.device)
        chunk = ids[idx, :width]
        out = module._forward_train({K.INPUT_IDS: chunk, K.LOSS_MASK: mask[idx, :width]}, entropy=False)
        logps[idx, :width] = out[K.LOGPROBS].float()
        if K.VALUES in out:
            values[idx, :width] = out[K.VALUES].float()
        if uses_reference(config):
            refs[idx, :width] = _reference_logprobs(module, ref_lm, chunk)
    if was_training:
        module.train()
    if config.old_logprobs == "learner" and not current:
        batch[K.OLD_LOGPROBS] = logps * mask
    if uses_reference(config):
        batch[K.REF_LOGPROBS] = refs * mask
    row = estimator(config.adv_estimator)
    if row.where == LEARNER:
        vals = values * mask
        inputs = LearnerInputs(batch=batch, values=vals, logprobs=logps, config=config)
        batch[K.OLD_VALUES] = vals
        batch[K.ADVANTAGES], batch[K.RETURNS] = row.compute(inputs)
    return batch


def select_rows(columns: dict[str, torch.Tensor], rows: torch.Tensor, width: int) -> dict[str, torch.Tensor]:
    """One micro-batch of a minibatch: rows ``rows`` (int64 indices) of every column, the ``[B, T]`` columns of
    :data:`~.keys.COLUMNS` cut to their first ``width`` positions (right padding only: nothing trained is cut)."""
    out = {}
    for key, value in columns.items():
        picked = value[rows.to(value.device)]
        column = K.COLUMNS.get(key)
        out[key] = picked[:, :width] if column is not None and column.shape == "[B, T]" else picked
    return out


def _reference_logprobs(module, ref_lm, ids: torch.Tensor) -> torch.Tensor:
    """Token log-probs ``[B, T]`` (float32) of the reference policy: the frozen copy ``ref_lm``, or with LoRA the
    base model (the module's LM with its adapter disabled). With the module's ``logprob_chunk`` the vocabulary
    logits never exist for every position at once (:func:`~ragen_rllib.rl.logprobs.chunked_token_logprobs`)."""
    import contextlib

    from ragen_rllib.rl.logprobs import model_token_logprobs

    lora = getattr(module, "lora", None)
    if ref_lm is None and not lora:
        raise ValueError("use_kl_loss needs a reference policy: a frozen copy (no LoRA) or a LoRA adapter to disable")
    lm = ref_lm if ref_lm is not None else module.lm.get_base_model()
    with contextlib.nullcontext() if ref_lm is not None else module.lm.disable_adapter():
        return model_token_logprobs(lm, ids, module.temperature, chunk=getattr(module, "logprob_chunk", 0))
