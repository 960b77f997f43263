"""Rollout scoring once: log pi_old and V from the sampling pass equal a separate forward pass."""


import numpy as np
import pytest
import torch

from densecode.config import load_config
from densecode.models import load_model_and_tokenizer
from densecode.rewards import RewardBatch
from densecode.rl import packed_scoring
from densecode.rl.packed_scoring import pack, plan_chunks
from densecode.rl.ppo import PPOAlgorithm
from densecode.rl.trainer import Trainer


class _Task:
    prompt = "x = "

    def train_batch(self, n, seed):
        return [self.prompt] * n, [{}] * n

    def evaluate(self, model, tokenizer, *, n, seed):
        return {}


class _VariedTask(_Task):
    """Prompts of different lengths, so rows carry different amounts of left padding."""

    prompts = ("x = ", "def add(a, b):\n    return", "for room in get_all_rooms():\n    go_to(room)\n    say(",
               "import math\nresult = math.sqrt(16)\nassert result ==")

    def train_batch(self, n, seed):
        return [self.prompts[i % len(self.prompts)] for i in range(n)], [{}] * n


class _Reward:
    """+1 on even token ids, minus beta*KL per token (as the real kl component)."""

    def __init__(self, beta=0.05):
        self.weights = {"kl": beta}

    def set_weight(self, name, value):
        self.weights[name] = value

    def __call__(self, samples):
        target = [np.array([1.0 if t % 2 == 0 else 0.0 for t in s.token_ids], dtype=np.float32) for s in samples]
        kl = [self.weights["kl"] * (s.logprobs - s.ref_logprobs) for s in samples]
        return RewardBatch([t - k for t, k in zip(target, kl)], {"target": target}, {}, {}, {})


def _trainer(model_dir, tmp_path, score_pass: bool, *extra, task=None):
    cfg = load_config(None, [
        f"model.name_or_path={model_dir}", "model.value_model=shared", "reward.weights={target: 1.0, kl: 0.05}",
        "reward.code_regions=completion", "generation.max_new_tokens=8", "generation.top_p=0.95", "generation.batch_size=8", "train.batch_size=8",
        "train.lr=3e-3", "algo.ppo.epochs=2", "algo.num_minibatches=2", "train.eval_every=0", "train.save_every=0",
        f"train.output_dir={tmp_path}", f"algo.score_pass={str(score_pass).lower()}", *extra,
    ])
    torch.manual_seed(0)
    model, tok = load_model_and_tokenizer(cfg.model, None, device="cpu", for_training=True)
    critic = None
    if cfg.model.value_model == "separate":
        critic, _ = load_model_and_tokenizer(cfg.model, None, device="cpu", for_training=True)
    algo = PPOAlgorithm.from_config(cfg.algo, cfg.generation)
    return Trainer(cfg, model=model, tokenizer=tok, task_source=task or _Task(), reward_fn=_Reward(), algo=algo,
                   run_dir=tmp_path, progress=False, critic=critic)


def test_sampling_pass_logprobs_and_values_match_a_forward_pass(tiny_model_dir, tmp_path):
    tr = _trainer(tiny_model_dir, tmp_path, score_pass=False)
    tr.unwrapped.value_head.summary.weight.data.normal_(0, 0.1)  # a non-zero head, so V is tested
    batch, timings = tr.rollout(0)
    assert timings["score/logprobs_from_sampling"] == 1.0 and timings["score/values_from_sampling"] == 1.0
    assert timings["score/policy_pass"] == 0.0
    args = (batch.input_ids, batch.attention_mask, batch.position_ids, batch.response_ids)
    with torch.no_grad():
        out = tr.unwrapped(*args, temperature=batch.temperature)
    mask = batch.response_mask
    assert mask.sum() > 20
    assert float(((out.logprobs - batch.logprobs) * mask).abs().max()) < 1e-4
    assert float(((out.values - batch.values) * mask).abs().max()) < 1e-4
    # The EOS decision is scored too (the trainer appends the EOS token).
    assert any(r.finish_reason == "eos" for r in batch.responses) or mask.all()


def test_separate_critic_values_without_a_policy_pass(tiny_model_dir, tmp_path):
    tr = _trainer(tiny_model_dir, tmp_path, False, "model.value_model=separate")
    batch, timings = tr.rollout(0)
    assert timings["score/policy_pass"] == 0.0 and timings["score/critic_pass"] == 1.0
    args = (batch.input_ids, batch.attention_mask, batch.position_ids, batch.response_ids)
    with torch.no_grad():
        out = tr.unwrapped(*args, temperature=batch.temperature)
    mask = batch.response_mask
    assert float(((out.values - batch.values) * mask).abs().max()) < 1e-5
    assert float(((out.logprobs - batch.logprobs) * mask).abs().max()) < 1e-4


def _perturb(module, seed, scale=0.05):
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.add_(torch.randn(p.shape, generator=gen) * scale)


@pytest.mark.parametrize("extra", [(), ("lora.enabled=true", "lora.r=4", "lora.alpha=8", "lora.dropout=0.0",
                                        "lora.target_modules=[c_attn]")], ids=["full", "lora"])
def test_packed_critic_and_reference_match_a_padded_forward_pass(tiny_model_dir, tmp_path, extra):
    """The default robotics layout (separate critic, KL term) scored without padding, in several chunks,
    equals the padded forward passes (PolicyWithValue with its critic; ReferencePolicy.logprobs)."""
    tr = _trainer(tiny_model_dir, tmp_path, False, "model.value_model=separate", "generation.max_new_tokens=12",
                  "generation.batch_size=3", *extra, task=_VariedTask())
    pv = tr.unwrapped
    pv.value_head.summary.weight.data.normal_(0, 0.1)  # a non-zero head, so V is tested
    _perturb(pv.critic, 1)  # critic, policy and reference all differ
    _perturb(pv.policy, 2)
    batch, timings = tr.rollout(0)
    assert timings["score/critic_pass"] == 1.0 and timings["score/policy_pass"] == 0.0
    lengths = batch.attention_mask.sum(-1)
    assert len(set(lengths.tolist())) > 3, "rows of one length would not test the packing"
    chunks = pack(batch, max_rows=3)
    assert len(chunks) >= 3 and all(c.input_ids.shape[0] <= 3 for c in chunks)
    assert sum(len(c.tokens) for c in chunks) == int(batch.response_mask.sum())
    assert sum(c.positions for c in chunks) < batch.input_ids.numel()
    args = (batch.input_ids, batch.attention_mask, batch.position_ids, batch.response_ids)
    with torch.no_grad():
        out = pv(*args, temperature=batch.temperature)
        ref = tr.reference.logprobs(pv.policy, *args, temperature=batch.temperature)
    mask = batch.response_mask
    assert float(((out.values - batch.values) * mask).abs().max()) < 1e-5
    assert float(((ref - batch.ref_logprobs) * mask).abs().max()) < 1e-5
    assert float(((ref - out.logprobs) * mask).abs().max()) > 1e-3  # the reference is not the policy
    assert batch.values.requires_grad is False and not batch.values.is_inference()


def test_packed_policy_pass_when_the_sampler_keeps_nothing(tiny_model_dir, tmp_path):
    """A sampler without log-probs or hidden states: log pi_old and V from the packed policy pass."""
    tr = _trainer(tiny_model_dir, tmp_path, False, task=_VariedTask())
    tr.unwrapped.value_head.summary.weight.data.normal_(0, 0.1)
    sample = tr.sampler

    def bare(*a, **k):
        responses = sample(*a, **k)
        for r in responses:
            r.policy_logprobs, r.hidden = None, None
        return responses

    tr.sampler = bare
    batch, timings = tr.rollout(0)
    assert timings["score/policy_pass"] == 1.0 and timings["score/logprobs_from_sampling"] == 0.0
    args = (batch.input_ids, batch.attention_mask, batch.position_ids, batch.response_ids)
    with torch.no_grad():
        out = tr.unwrapped(*args, temperature=batch.temperature)
    mask = batch.response_mask
    assert float(((out.logprobs - batch.logprobs) * mask).abs().max()) < 1e-5
    assert float(((out.values - batch.values) * mask).abs().max()) < 1e-5


def test_a_head_that_is_not_the_logits_falls_back_to_the_full_logits(tiny_model_dir, tmp_path, monkeypatch):
    """The LM head applied to hidden_states[-1] is checked against the model's own logits; where they
    differ (a logit scale, a soft cap), the model's full logits are used."""
    tr = _trainer(tiny_model_dir, tmp_path, False, task=_VariedTask())
    batch, _ = tr.rollout(0)
    model = tr.reference.scoring_model(tr.unwrapped.policy)[0]
    expected = packed_scoring.score_packed(batch, max_rows=4, reference=model)["ref_logprobs"]
    wrong = torch.nn.Linear(model.config.n_embd, model.config.vocab_size, bias=False)
    monkeypatch.setattr(model, "get_output_embeddings", lambda: wrong)
    got = packed_scoring.score_packed(batch, max_rows=4, reference=model)["ref_logprobs"]
    assert float((got - expected).abs().max()) < 1e-5


def _chunk_cost(chunks, lengths, overhead):
    return sum(len(c) * max(lengths[i] for i in c) + overhead for c in chunks)


def test_plan_chunks_covers_every_row_once_at_the_least_cost():
    rng = np.random.default_rng(0)
    for trial in range(20):
        lengths = rng.integers(0, 60, size=int(rng.integers(1, 9))).tolist()
        max_rows = int(rng.integers(1, 5))
        chunks = plan_chunks(lengths, max_rows, overhead=16)
        flat = sorted(i for c in chunks for i in c)
        assert flat == [i for i, n in enumerate(lengths) if n > 0]
        assert all(0 < len(c) <= max_rows for c in chunks)
        # Brute force over every split of the length-sorted rows into runs of at most max_rows.
        order = sorted((i for i, n in enumerate(lengths) if n > 0), key=lambda i: -lengths[i])
        best = float("inf")
        for bits in range(1 << max(0, len(order) - 1)):
            runs, start = [], 0
            for k in range(1, len(order)):
                if bits >> (k - 1) & 1:
                    runs.append(order[start:k])
                    start = k
            runs.append(order[start:])
            if order and all(len(r) <= max_rows for r in runs):
                best = min(best, _chunk_cost(runs, lengths, 16))
        if order:
            assert _chunk_cost(chunks, lengths, 16) == best


@pytest.mark.slow
@pytest.mark.parametrize("extra", [(), ("model.value_model=separate",)], ids=["shared", "separate"])
def test_training_unchanged_when_the_score_pass_is_skipped(tiny_model_dir, tmp_path, extra):
    logs = {}
    for score_pass in (True, False):
        tr = _trainer(tiny_model_dir, tmp_path / str(score_pass), score_pass, *extra, task=_VariedTask())
        logs[score_pass] = [tr.train_step(s) for s in range(3)]
    compared = 0
    for with_pass, without in zip(logs[True], logs[False]):
        for key, value in with_pass.items():
            if key.startswith(("time/", "score/", "perf/")) or not isinstance(value, (int, float)):
                continue
            other = without[key]
            assert abs(value - other) <= 1e-3 * max(1.0, abs(value)), (key, value, other)
            compared += 1
    assert compared > 20


def test_fused_gelu_only_while_scoring_and_equal_to_gpt2s(tiny_model_dir):
    from transformers import AutoModelForCausalLM
    from transformers.activations import NewGELUActivation, PytorchGELUTanh

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    acts = lambda: [type(m) for m in model.modules() if isinstance(m, (NewGELUActivation, PytorchGELUTanh))]
    assert acts() and set(acts()) == {NewGELUActivation}
    ids = torch.tensor([[5, 17, 42, 99, 3, 250]])
    with torch.no_grad():
        plain = model(input_ids=ids).logits
        with packed_scoring.fused_activations(model, None):
            assert set(acts()) == {PytorchGELUTanh}
            fused = model(input_ids=ids).logits
    assert set(acts()) == {NewGELUActivation}
    assert float((plain - fused).abs().max()) < 1e-5
