"""What tests in several folders share: a tiny PPO trainer on a trivial task (the tiny test model learns to emit
"target" token ids), with its config and reward."""

from __future__ import annotations

import numpy as np
import torch

from densecode.config import load_config
from densecode.models import load_model_and_tokenizer
from densecode.rewards import RewardBatch
from densecode.rl.ppo import PPOAlgorithm
from densecode.rl.protocols import TaskSource
from densecode.rl.trainer import Trainer

TARGET = 48  # "target tokens": ids below 48, ~1/8 of the tiny vocab


class TargetTokenTask(TaskSource):
    """Trivial task: the prompt is fixed; evaluation = share of sampled tokens that are targets."""

    prompt = "x = "

    def train_batch(self, n, seed):
        return [self.prompt] * n, [{}] * n

    def evaluate(self, model, tokenizer, *, n, seed):
        from densecode.generation import generate

        gens = generate(model, tokenizer, [self.prompt] * 48, n=1, max_new_tokens=6, temperature=1.0, seed=seed,
                        progress=False)
        ids = [t for g in gens for t in g.token_ids]
        return {"target_frac": float(np.mean([t < TARGET for t in ids]))}


class TargetReward:
    """+1 on every target token, minus β·KL per token (what the real kl component does)."""

    def __init__(self, beta=0.05, poison=False):
        self.weights = {"kl": beta}
        self.poison = poison

    def set_weight(self, name, value):
        self.weights[name] = value

    def __call__(self, samples):
        target = [np.array([1.0 if t < TARGET else 0.0 for t in s.token_ids], dtype=np.float32) for s in samples]
        kl = [self.weights["kl"] * (s.logprobs - s.ref_logprobs) for s in samples]
        total = [t - k for t, k in zip(target, kl)]
        if self.poison:
            total[0] = total[0] * np.nan
        return RewardBatch(total, {"target": target}, {}, {},
                           {"reward/target/token_mean": float(np.mean(np.concatenate(target)))})


def make_cfg(model_dir, tmp_path, *extra):
    return load_config(None, [
        # One model (a shared value head): a test trainer needs no critic copy.
        f"model.name_or_path={model_dir}", "model.value_model=shared", "reward.weights={target: 1.0, kl: 0.05}",
        "reward.code_regions=completion",
        "generation.max_new_tokens=6", "generation.top_p=1.0", "generation.batch_size=16", "train.batch_size=16",
        "train.lr=3e-3", "algo.ppo.epochs=2", "algo.num_minibatches=2", "train.eval_every=0", "train.save_every=0",
        f"train.output_dir={tmp_path}", *extra,
    ])


def make_trainer(cfg, run_dir, reward=None, task=None, **kw):
    torch.manual_seed(0)
    model, tok = load_model_and_tokenizer(cfg.model, None, device="cpu", for_training=True)
    algo = PPOAlgorithm.from_config(cfg.algo, cfg.generation)
    return Trainer(cfg, model=model, tokenizer=tok, task_source=task or TargetTokenTask(),
                   reward_fn=reward or TargetReward(), algo=algo, run_dir=run_dir, progress=False, **kw)
