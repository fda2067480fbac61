"""RagenTorchLearner: the StarPO loss (clipped surrogate, entropy bonus, value and KL losses as configured)
and the micro-batched update."""

from __future__ import annotations

import contextlib
import copy
import logging
from collections import defaultdict
from typing import Any

import numpy as np
import torch
from ray.rllib.core.learner.torch.torch_learner import TorchLearner
from ray.rllib.policy.sample_batch import MultiAgentBatch, SampleBatch
from ray.rllib.utils.annotations import override

from ragen_rllib.algorithms.ragen.estimators import estimator
from ragen_rllib.algorithms.ragen.memory import learner_token_budget
from ragen_rllib.algorithms.ragen.ragen_learner import RagenLearner, prepare_columns, select_rows, uses_reference
from ragen_rllib.core import keys as K
from ragen_rllib.core.threads import learner_cpu_threads
from ragen_rllib.engines.base import set_cpu_threads
from ragen_rllib.rl.losses import aggregate, kl_penalty, micro_batch_weights, policy_loss, value_loss
from ragen_rllib.rl.micro_batches import pack_by_tokens, row_lengths

logger = logging.getLogger("ragen_rllib.learner")

ACTOR, CRITIC = "actor", "critic"  # optimizer names


class RagenTorchLearner(RagenLearner, TorchLearner):
    """TorchLearner for :class:`RagenTorchRLModule`: one optimizer step per minibatch, its gradient
    accumulated over micro-batches of at most ``micro_batch_size`` trajectories and ``max_tokens_per_micro_batch``
    padded tokens (resolved at build from the learner memory estimate, :mod:`..memory`; less memory, and faster
    per token on CPUs than one wide pass)."""

    @override(TorchLearner)
    def build(self) -> None:
        super().build()
        threads = learner_cpu_threads(self.config.num_cpus_per_learner) if self.device.type == "cpu" else None
        if threads is not None:  # the CPUs the config asks for (the vLLM-CPU fix, OMP_NUM_THREADS=1, would give 1)
            set_cpu_threads(threads)
            logger.info("learner on CPU: %d torch threads (the CPUs its config asks for)", threads)
        self._micro_metrics: dict[tuple[str, str], float] = defaultdict(float)  # weighted sums over micro-batches
        self._ref_lms: dict[str, torch.nn.Module] = {}
        for module_id, module in self.module.items():
            cfg = self.config.get_config_for_module(module_id)
            module.unwrapped().entropy_requires_grad = cfg.entropy_coeff != 0
            if uses_reference(cfg) and not module.unwrapped().lora:
                ref = copy.deepcopy(module.unwrapped().lm).eval()
                for p in ref.parameters():
                    p.requires_grad_(False)
                self._ref_lms[module_id] = ref
        #: module id -> the token budget of one forward/backward pass (max_tokens_per_micro_batch, resolved)
        self._token_budgets: dict[str, int] = {}
        for module_id, module in self.module.items():
            cfg = self.config.get_config_for_module(module_id)
            budget, text = learner_token_budget(module.unwrapped(), cfg, self.device, module_id in self._ref_lms)
            self._token_budgets[module_id] = budget
            logger.info("module %s: %d tokens per micro-batch (%s)", module_id, budget, text)

    @override(TorchLearner)
    def configure_optimizers_for_module(self, module_id: str, config=None) -> None:
        module = self.module[module_id]
        actor = [p for p in module.lm.parameters() if p.requires_grad]
        self.register_optimizer(module_id=module_id, optimizer_name=ACTOR, optimizer=adamw(actor),
                                params=actor, lr_or_lr_schedule=config.lr)
        if module.has_value_head:
            critic = list(module.value_head.parameters())
            self.register_optimizer(module_id=module_id, optimizer_name=CRITIC, optimizer=adamw(critic),
                                    params=critic, lr_or_lr_schedule=config.critic_lr)

    # ------------------------------------------------------------------ before the minibatches
    @override(RagenLearner)
    def prepare_batch(self, batch: MultiAgentBatch, num_epochs: int, minibatch_size: int | None) -> MultiAgentBatch:
        out = {}
        for module_id, sb in batch.policy_batches.items():
            module = self.module[module_id].unwrapped()
            on_policy = num_epochs == 1 and (minibatch_size is None or minibatch_size >= len(sb))
            cols = {k: torch.as_tensor(np.asarray(v)).to(self.device) for k, v in sb.items()}
            cols = prepare_columns(module, cols, self.config.get_config_for_module(module_id),
                                   ref_lm=self._ref_lms.get(module_id), on_policy=on_policy,
                                   max_tokens=self._token_budgets.get(module_id))
            out[module_id] = SampleBatch({k: v.cpu().numpy() for k, v in cols.items()})
        return MultiAgentBatch(out, env_steps=batch.env_steps())

    # ------------------------------------------------------------------ one minibatch: micro-batched

    def _zero_grads(self) -> None:
        for module_id in self.module.keys():
            for _, optim in self.get_optimizers_for_module(module_id):
                optim.zero_grad(set_to_none=True)
    @override(TorchLearner)
    def _uncompiled_update(self, batch: dict, **kwargs):
        """Like ``TorchLearner._uncompiled_update``, with the forward/backward split into micro-batches.

        The one private override of this package: RLlib has no public hook between the forward/backward and
        the optimizer step, and gradient accumulation needs exactly that. The micro-batches are the minibatch's
        rows packed by tokens (:func:`pack_by_tokens`), each cut to its longest row (:func:`select_rows`). Each
        micro-batch's rows carry its loss weight in MICRO_WEIGHT (:func:`micro_batch_weights`), so the
        accumulated gradient equals the whole minibatch's; with DDP only the last backward all-reduces. Metrics
        are the weighted sums. A NaN or inf anywhere in the accumulated gradient skips the optimizer step
        (counted as ``skipped_updates``).
        """
        # _compute_off_policyness: what TorchLearner._uncompiled_update logs first (RLlib has no public name for it)
        self._compute_off_policyness(batch)
        plans = {}
        for mid, cols in batch.items():
            cfg = self.config.get_config_for_module(mid)
            mask = cols[K.LOSS_MASK]
            lengths = row_lengths(cols.get(K.ATTENTION_MASK), *mask.shape)
            parts = pack_by_tokens(lengths, self._token_budgets.get(mid), cfg.micro_batch_size)
            widths = [max(int(lengths[p].max()), 1) for p in parts]
            weights = micro_batch_weights(mask, parts, cfg.loss_agg_mode, widths=widths)
            plans[mid] = list(zip(parts, widths, weights.tolist()))
            self.metrics.log_value((mid, K.MICRO_BATCH_TOKENS), float(self._token_budgets.get(mid, 0)), window=1)
            self.metrics.log_value((mid, K.MICRO_BATCHES), float(len(parts)), window=1)
        steps = max(len(plan) for plan in plans.values())
        self._zero_grads()
        self._micro_metrics = defaultdict(float)
        loss_per_module: dict[str, torch.Tensor] = {}
        fwd_out: dict[str, Any] = {}
        for step in range(steps):
            micro = {}
            for mid, plan in plans.items():
                if step < len(plan):
                    rows, width, weight = plan[step]
                    micro[mid] = select_rows(batch[mid], rows, width)
                    micro[mid][K.MICRO_WEIGHT] = torch.full_like(micro[mid][K.MICRO_WEIGHT], weight)
            with contextlib.ExitStack() as stack:
                if self.config.num_learners > 1 and step < steps - 1:
                    for mod in self.module.values():
                        if isinstance(mod, torch.nn.Module):
                            stack.enter_context(mod.no_sync())
                fwd_out = self.module.forward_train(micro)
                losses = self.compute_losses(fwd_out=fwd_out, batch=micro)
                total = sum(losses.values())
                if isinstance(total, torch.Tensor) and total.grad_fn is not None:
                    total.backward()
            for mid, loss in losses.items():
                loss_per_module[mid] = loss_per_module.get(mid, 0.0) + loss.detach()
        for (mid, key), value in self._micro_metrics.items():
            self.metrics.log_value((mid, key), value, window=1)
        gradients = {self.get_param_ref(p): p.grad for mod in self.module.values() for p in self.get_parameters(mod)
                     if p.grad is not None}
        finite = all_finite(gradients.values())  # all-reduced already under DDP: every learner agrees
        for mid in batch:
            self.metrics.log_value((mid, K.SKIPPED_UPDATES), float(not finite), reduce="sum")
        if not finite:  # a NaN or inf loss or gradient: skip this optimizer step, keep the weights
            self._zero_grads()
            return fwd_out, loss_per_module, {}
        with contextlib.ExitStack() as stack:
            if self.config.num_learners > 1:
                for mod in self.module.values():
                    if isinstance(mod, torch.nn.Module):
                        stack.enter_context(mod.no_sync())
            self.apply_gradients(self.postprocess_gradients(gradients))
        return fwd_out, loss_per_module, {}

    # ------------------------------------------------------------------ the loss
    @override(TorchLearner)
    def compute_loss_for_module(self, *, module_id: str, config, batch: dict[str, Any],
                                fwd_out: dict[str, torch.Tensor]) -> torch.Tensor:
        mask = batch[K.LOSS_MASK].float()
        agg = config.loss_agg_mode
        logp = fwd_out[K.LOGPROBS]
        current = batch[K.OLD_IS_CURRENT].unsqueeze(1) > 0  # on-policy step: old = current, detached
        old = torch.where(current, logp.detach() * mask, batch[K.OLD_LOGPROBS])
        pl, stats = policy_loss(logp, old, batch[K.ADVANTAGES], mask, clip_low=config.clip_low,
                                clip_high=config.clip_high, dual_clip=config.dual_clip, agg=agg)
        entropy = aggregate(fwd_out[K.ENTROPY], mask, agg)
        loss = pl - config.entropy_coeff * entropy
        logged = {K.POLICY_LOSS: pl, K.ENTROPY_METRIC: entropy, K.APPROX_KL: stats["approx_kl"],
                  K.CLIP_FRACTION: stats["clip_fraction"], K.DUAL_CLIP_FRACTION: stats["dual_clip_fraction"]}
        if estimator(config.adv_estimator).critic:
            vl, _ = value_loss(fwd_out[K.VALUES], batch[K.OLD_VALUES], batch[K.RETURNS], mask, clip=config.vf_clip,
                               agg=agg)
            loss = loss + config.vf_loss_coeff * vl
            logged[K.VALUE_LOSS] = vl
        if config.use_kl_loss:
            kl = aggregate(kl_penalty(logp, batch[K.REF_LOGPROBS], config.kl_type), mask, agg)
            loss = loss + config.kl_coeff * kl
            logged[K.KL_LOSS] = kl
        loss = loss * batch[K.LOSS_SCALE].float().mean()  # filter_loss_scale: the step's kept ratio, else 1
        weight = batch[K.MICRO_WEIGHT][0].float()  # the same value on every row of a micro-batch
        for key, value in logged.items():
            self._micro_metrics[(module_id, key)] += (weight * value.detach().float()).item()
        return weight * loss

    @override(TorchLearner)
    def postprocess_gradients_for_module(self, *, module_id, config=None, module_gradients_dict):
        grads = [g for g in module_gradients_dict.values() if g is not None]
        if grads:
            norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g.float()) for g in grads]))
            self.metrics.log_value((module_id, K.GRAD_NORM), norm.item(), window=1)
        return super().postprocess_gradients_for_module(module_id=module_id, config=config,
                                                        module_gradients_dict=module_gradients_dict)


def all_finite(tensors) -> bool:
    """Whether every element of every tensor is finite (one device sync for all of them)."""
    flags = [torch.isfinite(t).all() for t in tensors]
    return bool(torch.stack(flags).all().item()) if flags else True


def adamw(params: list[torch.nn.Parameter]) -> torch.optim.AdamW:
    """AdamW, fused (one kernel per parameter instead of several elementwise passes: a faster update at the same
    peak memory, docs/scale.md) where torch supports it for these parameters (CPU or CUDA floats)."""
    fused = bool(params) and all(p.is_floating_point() and p.device.type in ("cpu", "cuda") for p in params)
    return torch.optim.AdamW(params, fused=fused)
