import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM

from ragen_rllib.models import tiny
from ragen_rllib.models.sft import length_buckets, lr_factor, pad_batch, plan_batches, sft_train, token_logprobs
from ragen_rllib.models.warm_start import WarmStartConfig
from ragen_rllib.rl.logprobs import gather_token_logprobs


def test_pad_batch_and_buckets():
    ids, attn, loss = pad_batch([{"input_ids": [5, 6, 7], "loss_mask": [0, 1, 1]},
                                 {"input_ids": [8], "loss_mask": [1]}], pad_id=0)
    assert ids.tolist() == [[5, 6, 7], [8, 0, 0]]
    assert attn.tolist() == [[1, 1, 1], [1, 0, 0]] and loss.tolist() == [[0, 1, 1], [1, 0, 0]]
    lengths = [1, 50, 2, 49, 3, 48]
    batches = length_buckets(lengths, 3, np.random.default_rng(0))
    assert sorted(i for b in batches for i in b) == list(range(6))
    assert sorted(sorted(lengths[i] for i in b) for b in batches) == [[1, 2, 3], [48, 49, 50]]


def test_random_batches_mix_lengths_that_length_batches_keep_apart():
    """Where length goes with the target (8 short samples, 8 long ones), length batches are pure and random
    batches mix them; both cover every sample once per epoch, and "length" is the old plan, draw for draw."""
    lengths = [10] * 8 + [40] * 8
    by_length = plan_batches(lengths, 4, 2, "length", np.random.default_rng(0))
    rng = np.random.default_rng(0)
    assert by_length == length_buckets(lengths, 4, rng) + length_buckets(lengths, 4, rng)
    assert all(len({lengths[i] for i in b}) == 1 for b in by_length)
    mixed = plan_batches(lengths, 4, 2, "random", np.random.default_rng(0))
    for epoch in (mixed[:4], mixed[4:]):
        assert sorted(i for b in epoch for i in b) == list(range(16))
    assert sum(len({lengths[i] for i in b}) == 2 for b in mixed) >= 4


def test_an_unknown_batching_is_refused_with_the_choices():
    with pytest.raises(ValueError, match="batching='shuffled'.*'length'.*'random'"):
        plan_batches([1, 2], 1, 1, "shuffled", np.random.default_rng(0))
    with pytest.raises(ValueError, match="WarmStartConfig.batching='shuffled'"):
        WarmStartConfig(batching="shuffled")


def test_lr_factor_warms_up_linearly_then_decays_by_cosine():
    assert [lr_factor(k, 4) for k in range(4)] == pytest.approx([1.0, 0.5 * (1 + np.cos(np.pi / 4)), 0.5,
                                                                 0.5 * (1 + np.cos(3 * np.pi / 4))])
    # 2 warm-up steps of 6: 1/2, 1, then cosine over the remaining 4 steps from the peak
    assert [lr_factor(k, 6, 2) for k in range(6)] == pytest.approx([0.5, 1.0, 1.0, 0.5 * (1 + np.cos(np.pi / 4)),
                                                                    0.5, 0.5 * (1 + np.cos(3 * np.pi / 4))])


def test_sft_warmup_reaches_the_optimizer(monkeypatch):
    """sft_train's scheduler follows lr_factor with the warm-up it is given."""
    seen = []
    step = torch.optim.AdamW.step

    def record(self, *a, **k):
        seen.append(self.param_groups[0]["lr"])
        return step(self, *a, **k)

    monkeypatch.setattr(torch.optim.AdamW, "step", record)
    model = AutoModelForCausalLM.from_pretrained(tiny.tiny_model_path("nano"))
    sample = {"input_ids": [3, 4, 5, 6], "loss_mask": [0, 0, 1, 1]}
    sft_train(model, [sample] * 8, pad_id=0, lr=1e-3, batch_size=2, epochs=1, progress=False, warmup_steps=2)
    assert seen == pytest.approx([1e-3 * lr_factor(k, 4, 2) for k in range(4)])
    assert seen[0] == pytest.approx(5e-4)


def test_sft_log_probs_take_the_chunked_path_with_equal_results():
    """No [B, T, V] logits in the warm start (a real vocabulary makes them GBs), and the same values."""
    model = AutoModelForCausalLM.from_pretrained(tiny.tiny_model_path("nano"))
    ids = torch.randint(0, model.config.vocab_size, (3, 600), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        full = gather_token_logprobs(model(input_ids=ids).logits, ids)
        chunked = token_logprobs(model, ids)
    assert full.shape == chunked.shape and torch.allclose(full, chunked, atol=1e-5)
    calls = []
    model.lm_head.register_forward_hook(lambda mod, inp, out: calls.append(inp[0].shape))
    with torch.no_grad():
        token_logprobs(model, ids)
    assert not calls  # the head's weight is read in vocabulary slices, never called on all positions at once


def test_sft_learns_masked_tokens_only():
    model = AutoModelForCausalLM.from_pretrained(tiny.tiny_model_path("nano"))
    prompt, answer = [3, 4, 5, 6], [10, 11, 12]
    sample = {"input_ids": prompt + answer, "loss_mask": [0] * 4 + [1] * 3}
    ids = torch.tensor([sample["input_ids"]])

    def logp():
        with torch.no_grad():
            return gather_token_logprobs(model(input_ids=ids).logits, ids)[0]

    before = logp()
    losses = sft_train(model, [sample] * 64, pad_id=0, lr=1e-2, batch_size=8, epochs=4, progress=False)
    after = logp()
    assert losses[-1] < losses[0] * 0.5
    assert (after[4:] > before[4:] + 0.5).all()  # the trained (assistant) tokens got likely
    assert after[4:].exp().min() > 0.5


@pytest.mark.parametrize("autocast, bf16_units, expected", [
    ("auto", False, "float32"), ("auto", True, "bfloat16"), ("none", True, "float32"),
    ("bfloat16", True, "bfloat16")])
def test_warm_start_records_its_precision_and_machine(tmp_path, monkeypatch, autocast, bf16_units, expected):
    import json
    import shutil

    from ragen_rllib.core import precision
    from ragen_rllib.models.warm_start import REPORT_FILE, WarmStartConfig, warm_start

    monkeypatch.setattr(precision, "cpu_has_bf16_units", lambda: bf16_units)
    model_dir = tmp_path / "m"
    shutil.copytree(tiny.tiny_model_path("nano"), model_dir)
    cfg = WarmStartConfig(episodes_per_env=4, epochs=1, autocast=autocast)
    report = warm_start(model_dir, cfg, evaluate=False, progress=False)
    assert report.precision == expected and report.steps > 0
    assert report.cpu == precision.cpu_info() and report.cpu["bf16_units"] is bf16_units
    assert f"({expected}" in report.summary()
    record = json.loads((model_dir / REPORT_FILE).read_text())
    assert record["config"]["autocast"] == autocast and record["report"]["precision"] == expected
    assert record["report"]["cpu"]["capability"] == torch.backends.cpu.get_cpu_capability()


def test_warm_start_config_rejects_a_bad_autocast():
    from ragen_rllib.models.warm_start import WarmStartConfig

    with pytest.raises(ValueError, match="WarmStartConfig.autocast='fp16' is invalid"):
        WarmStartConfig(autocast="fp16")
