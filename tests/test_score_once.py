"""Rollout scoring once: log pi_old and V from the sampling pass equal a separate forward pass."""

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from densecode.config import load_config
from densecode.models import load_model_and_tokenizer
from densecode.rl.ppo import PPOAlgorithm
from densecode.rl.trainer import Trainer


class _Task:
    prompt = "x = "

    def train_batch(self, n, seed):
        return [self.prompt] * n, [{}] * n

    def evaluate(self, model, tokenizer, *, n, seed):
        return {}


class _Reward:
    """+1 on even token ids, minus beta*KL per token (as the real kl component)."""

    def __init__(self, beta=0.05):
        self.weights = {"kl": beta}

    def set_weight(self, name, value):
        self.weights[name] = value

    def __call__(self, samples):
        target = [np.array([1.0 if t % 2 == 0 else 0.0 for t in s.token_ids], dtype=np.float32) for s in samples]
        kl = [self.weights["kl"] * (s.logprobs - s.ref_logprobs) for s in samples]
        return SimpleNamespace(total=[t - k for t, k in zip(target, kl)], components={"target": target}, outputs={},
                               stats={})


def _trainer(model_dir, tmp_path, score_pass: bool, *extra):
    cfg = load_config(None, [
        f"model.name_or_path={model_dir}", "reward.weights={target: 1.0, kl: 0.05}", "reward.code_regions=completion",
        "generation.max_new_tokens=8", "generation.top_p=0.95", "generation.batch_size=8", "train.batch_size=8",
        "train.lr=3e-3", "algo.ppo.epochs=2", "algo.num_minibatches=2", "train.eval_every=0", "train.save_every=0",
        f"train.output_dir={tmp_path}", f"algo.score_pass={str(score_pass).lower()}", *extra,
    ])
    torch.manual_seed(0)
    model, tok = load_model_and_tokenizer(cfg.model, None, device="cpu", for_training=True)
    critic = None
    if cfg.model.value_model == "separate":
        critic, _ = load_model_and_tokenizer(cfg.model, None, device="cpu", for_training=True)
    algo = PPOAlgorithm.from_config(cfg.algo, cfg.generation)
    return Trainer(cfg, model=model, tokenizer=tok, task_source=_Task(), reward_fn=_Reward(), algo=algo,
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


@pytest.mark.slow
def test_training_unchanged_when_the_score_pass_is_skipped(tiny_model_dir, tmp_path):
    logs = {}
    for score_pass in (True, False):
        tr = _trainer(tiny_model_dir, tmp_path / str(score_pass), score_pass)
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
