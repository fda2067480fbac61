"""RagenTorchLearner: the StarPO loss (clipped surrogate, entropy bonus, optional value and KL losses)."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import torch
from ray.rllib.core.learner.torch.torch_learner import TorchLearner
from ray.rllib.core.learner.training_data import TrainingData
from ray.rllib.policy.sample_batch import MultiAgentBatch, SampleBatch

from ragen_rllib.algorithms.ragen import keys as K
from ragen_rllib.algorithms.ragen.ragen_learner import prepare_columns
from ragen_rllib.rl.losses import aggregate, kl_penalty, policy_loss, value_loss

ACTOR, CRITIC = "actor", "critic"  # optimizer names


class RagenTorchLearner(TorchLearner):
    """TorchLearner for :class:`RagenTorchRLModule` (one optimizer step per minibatch)."""

    def build(self) -> None:
        super().build()
        self._ref_lms: dict[str, torch.nn.Module] = {}
        for module_id, module in self.module._rl_modules.items():
            module.unwrapped().entropy_requires_grad = self.config.get_config_for_module(module_id).entropy_coeff != 0
            if self.config.get_config_for_module(module_id).use_kl_loss and not module.unwrapped().lora:
                ref = copy.deepcopy(module.unwrapped().lm).eval()
                for p in ref.parameters():
                    p.requires_grad_(False)
                self._ref_lms[module_id] = ref

    def configure_optimizers_for_module(self, module_id: str, config=None) -> None:
        module = self._module[module_id]
        actor = [p for p in module.lm.parameters() if p.requires_grad]
        self.register_optimizer(module_id=module_id, optimizer_name=ACTOR, optimizer=torch.optim.AdamW(actor),
                                params=actor, lr_or_lr_schedule=config.lr)
        if module.has_value_head:
            critic = list(module.value_head.parameters())
            self.register_optimizer(module_id=module_id, optimizer_name=CRITIC,
                                    optimizer=torch.optim.AdamW(critic), params=critic,
                                    lr_or_lr_schedule=config.critic_lr)

    # ------------------------------------------------------------------ before the minibatches
    def update(self, batch: MultiAgentBatch | None = None, *, training_data: TrainingData | None = None,
               **kwargs) -> Any:
        """Recompute old log-probs (+ values, GAE, reference log-probs) on this learner's whole shard first."""
        if training_data is None:
            training_data = TrainingData(batch=batch, batches=kwargs.pop("batches", None),
                                         batch_refs=kwargs.pop("batch_refs", None))
        training_data.validate()
        training_data.solve_refs()
        if training_data.batch is None:
            raise ValueError("RagenTorchLearner.update needs a prepared MultiAgentBatch (batch=...), not episodes")
        training_data.batch = self._prepare(training_data.batch, kwargs.get("num_epochs", 1),
                                            kwargs.get("minibatch_size"))
        return super().update(training_data=training_data, **kwargs)

    def _prepare(self, batch: MultiAgentBatch, num_epochs: int, minibatch_size: int | None) -> MultiAgentBatch:
        out = {}
        for module_id, sb in batch.policy_batches.items():
            module = self.module[module_id].unwrapped()
            on_policy = num_epochs == 1 and (minibatch_size is None or minibatch_size >= len(sb))
            cols = {k: torch.as_tensor(np.asarray(v)).to(self._device) for k, v in sb.items()}
            cols = prepare_columns(module, cols, self.config.get_config_for_module(module_id),
                                   ref_lm=self._ref_lms.get(module_id), on_policy=on_policy)
            out[module_id] = SampleBatch({k: v.cpu().numpy() for k, v in cols.items()})
        return MultiAgentBatch(out, env_steps=batch.env_steps())

    # ------------------------------------------------------------------ the loss
    def compute_loss_for_module(self, *, module_id: str, config, batch: dict[str, Any],
                                fwd_out: dict[str, torch.Tensor]) -> torch.Tensor:
        mask = batch[K.LOSS_MASK].float()
        agg = config.loss_agg_mode
        logp = fwd_out[K.LOGPROBS]
        old = batch[K.OLD_LOGPROBS] if K.OLD_LOGPROBS in batch else logp.detach() * mask  # on-policy: see prepare
        pl, stats = policy_loss(logp, old, batch[K.ADVANTAGES], mask, clip_low=config.clip_low,
                                clip_high=config.clip_high, dual_clip=config.dual_clip, agg=agg)
        entropy = aggregate(fwd_out[K.ENTROPY], mask, agg)
        loss = pl - config.entropy_coeff * entropy
        logged = {K.POLICY_LOSS: pl, K.ENTROPY_METRIC: entropy, K.APPROX_KL: stats["approx_kl"],
                  K.CLIP_FRACTION: stats["clip_fraction"]}
        if K.VALUES in fwd_out:
            vl, _ = value_loss(fwd_out[K.VALUES], batch[K.OLD_VALUES], batch[K.RETURNS], mask, clip=config.vf_clip,
                               agg=agg)
            loss = loss + config.vf_loss_coeff * vl
            logged[K.VALUE_LOSS] = vl
        if config.use_kl_loss and K.REF_LOGPROBS in batch:
            kl = aggregate(kl_penalty(logp, batch[K.REF_LOGPROBS], config.kl_type), mask, agg)
            loss = loss + config.kl_coeff * kl
            logged[K.KL_LOSS] = kl
        for key, value in logged.items():
            self.metrics.log_value((module_id, key), value.detach().float().item(), window=1)
        return loss

    def postprocess_gradients_for_module(self, *, module_id, config=None, module_gradients_dict):
        grads = [g for g in module_gradients_dict.values() if g is not None]
        if grads:
            norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g.float()) for g in grads]))
            self.metrics.log_value((module_id, K.GRAD_NORM), norm.item(), window=1)
        return super().postprocess_gradients_for_module(module_id=module_id, config=config,
                                                        module_gradients_dict=module_gradients_dict)
