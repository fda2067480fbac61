"""RagenLearner: what happens on a learner before the gradient steps (framework-independent plan).

Before the minibatch loop, on the WHOLE batch this learner received (and without gradients): recompute
the pre-update log-probs of the sampled tokens (``old_logprobs``), the critic values (GAE), the reference
log-probs (KL loss), then the advantages. GRPO advantages arrive ready-made from the driver (whole
groups); token-level GAE is computed here per sample.
"""

from __future__ import annotations

import torch

from ragen_rllib.algorithms.ragen import keys as K
from ragen_rllib.algorithms.ragen.batch import LAST_INDEX, TURN_ENDS, TURN_REWARDS
from ragen_rllib.algorithms.ragen.hyperparams import CRITIC_ESTIMATORS
from ragen_rllib.rl.advantages import bilevel_gae, gae, token_rewards, turn_token_rewards
from ragen_rllib.rl.losses import kl_penalty

def needs_forward(config, on_policy: bool) -> bool:
    """Whether the learner must run the no-grad pass before its gradient steps.

    On-policy updates (one epoch, the learner's whole shard in one minibatch) score every token with the
    very weights that are about to take the step, so the old log-probs equal the current ones detached
    (verl does the same); only critic values (GAE) or the reference policy (KL) then need the pass. With
    ``old_logprobs="engine"`` the old log-probs are the engine's sampling-time ones (no pass for them).
    """
    recompute_old = not on_policy and config.old_logprobs == "learner"
    return recompute_old or config.adv_estimator in CRITIC_ESTIMATORS or uses_reference(config)


def uses_reference(config) -> bool:
    """Whether the reference policy's log-probs are needed (KL as a loss or in the reward)."""
    return bool(config.use_kl_loss or getattr(config, "use_kl_in_reward", False))


@torch.no_grad()
def prepare_columns(module, batch: dict[str, torch.Tensor], config, ref_lm=None,
                    on_policy: bool = False) -> dict[str, torch.Tensor]:
    """Add OLD_LOGPROBS (+ OLD_VALUES, ADVANTAGES, RETURNS for GAE; REF_LOGPROBS for KL) to ``batch``.

    ``batch`` columns are ``[B, T]`` tensors on the learner's device (see :mod:`.batch`). With
    ``on_policy`` (see :func:`needs_forward`) OLD_LOGPROBS is left out: the loss uses the detached
    current log-probs. With ``config.old_logprobs == "engine"`` OLD_LOGPROBS is SAMPLE_LOGPROBS (always).
    """
    mask = batch[K.LOSS_MASK].float()
    if config.old_logprobs == "engine":
        batch[K.OLD_LOGPROBS] = batch[K.SAMPLE_LOGPROBS].float() * mask
    if not needs_forward(config, on_policy):
        return batch
    was_training = module.training
    module.eval()
    ids = batch[K.INPUT_IDS]
    logps, values, refs = [], [], []
    for start in range(0, ids.shape[0], config.micro_batch_size):
        chunk = {K.INPUT_IDS: ids[start:start + config.micro_batch_size]}
        out = module._forward_train(chunk, entropy=False)
        logps.append(out[K.LOGPROBS].float())
        if K.VALUES in out:
            values.append(out[K.VALUES].float())
        if uses_reference(config):
            refs.append(_reference_logprobs(module, ref_lm, chunk[K.INPUT_IDS]))
    if was_training:
        module.train()
    if not on_policy and config.old_logprobs == "learner":
        batch[K.OLD_LOGPROBS] = torch.cat(logps) * mask
    if refs:
        batch[K.REF_LOGPROBS] = torch.cat(refs) * mask
    if config.adv_estimator in CRITIC_ESTIMATORS:
        vals = torch.cat(values) * mask
        if config.adv_estimator == "bi_level_gae":
            ends = batch[TURN_ENDS].long()
            adv, ret = bilevel_gae(last_turn_rewards(batch[K.SCORES].float(), ends), ends, vals, mask,
                                   high_gamma=config.high_level_gamma, gamma=config.gamma, lam=config.lambda_)
        else:
            T = ids.shape[1]
            if config.use_turn_scores:
                rewards = turn_token_rewards(batch[TURN_REWARDS].float(), batch[TURN_ENDS].long(), T)
            else:
                rewards = token_rewards(batch[K.SCORES].float(), batch[LAST_INDEX].long(), T)
            if config.use_kl_in_reward:  # r_t -= kl_coeff * KL_t(policy before the update || reference)
                kl = kl_penalty(torch.cat(logps), batch[K.REF_LOGPROBS], config.kl_type)
                rewards = rewards - config.kl_coeff * kl * mask
                batch[K.KL_REWARD] = kl * mask
            adv, ret = gae(rewards, vals, mask, gamma=config.gamma, lam=config.lambda_)
        batch[K.OLD_VALUES], batch[K.ADVANTAGES], batch[K.RETURNS] = vals, adv, ret
    return batch


def _reference_logprobs(module, ref_lm, ids: torch.Tensor) -> torch.Tensor:
    """Token log-probs of the reference policy: the frozen copy ``ref_lm``, or with LoRA the base model
    (the module's LM with its adapter disabled)."""
    from ragen_rllib.models.logprobs import gather_token_logprobs

    if ref_lm is not None:
        logits = ref_lm(input_ids=ids).logits
    elif getattr(module, "lora", None):
        with module.lm.disable_adapter():
            logits = module.lm(input_ids=ids).logits
    else:
        raise ValueError("use_kl_loss needs a reference policy: a frozen copy (no LoRA) or a LoRA adapter to disable")
    return gather_token_logprobs(logits, ids, module.temperature).float()


def last_turn_rewards(scores: torch.Tensor, turn_ends: torch.Tensor) -> torch.Tensor:
    """``[B, N]`` turn rewards with each row's score ``[B]`` on its last real turn (``turn_ends`` -1 pads)."""
    last = ((turn_ends >= 0).sum(dim=1) - 1).clamp(min=0)
    out = torch.zeros(turn_ends.shape, dtype=scores.dtype, device=scores.device)
    return out.scatter(1, last.unsqueeze(1), scores.unsqueeze(1))
