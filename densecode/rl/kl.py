"""KL coefficient controllers (Ziegler et al. 2019, as in TRL).

The KL penalty itself is a reward component (`kl`, −KL per token, computed by the
reward assembler from the rollout's policy and reference log-probs); the controller
only chooses its weight β each step and the trainer writes it back with
`assembler.set_weight("kl", beta)`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch

from densecode.errors import DensecodeError

if TYPE_CHECKING:
    from densecode.rewards.assembler import RewardBatch


class FixedKLController:
    def __init__(self, beta: float):
        self.value = float(beta)

    def update(self, current_kl: float, n_steps: int) -> float:
        return self.value

    def state_dict(self) -> dict:
        return {"value": self.value}

    def load_state_dict(self, state: dict) -> None:
        self.value = float(state["value"])


class AdaptiveKLController:
    """β ← β · (1 + clip(KL/target − 1, −0.2, 0.2) · n_steps / horizon)."""

    def __init__(self, init_beta: float, target: float, horizon: int):
        self.value = float(init_beta)
        self.target = float(target)
        self.horizon = int(horizon)

    def update(self, current_kl: float, n_steps: int) -> float:
        if not np.isfinite(current_kl):
            return self.value
        proportional_error = float(np.clip(current_kl / self.target - 1, -0.2, 0.2))
        self.value *= 1 + proportional_error * n_steps / self.horizon
        return self.value

    def state_dict(self) -> dict:
        return {"value": self.value, "target": self.target, "horizon": self.horizon}

    def load_state_dict(self, state: dict) -> None:
        self.value = float(state["value"])


def make_kl_controller(algo_cfg, beta: float):
    """PPO's `algo.ppo.adaptive_kl` adapts the reward's KL weight; any other algorithm keeps it fixed."""
    ppo = algo_cfg.ppo
    if algo_cfg.name == "ppo" and ppo.adaptive_kl:
        return AdaptiveKLController(beta, ppo.target_kl, ppo.kl_horizon)
    return FixedKLController(beta)


def reward_kl(reward_outputs: RewardBatch) -> float | None:
    """Mean over samples of the sequence KL the reward measured (`ComponentOutput.kl`: the `kl` component, with
    its own estimator).

    The adaptive controller must be fed this number, not a k1 recomputed elsewhere: with the
    k3 estimator in the reward, k1 and k3 differ per token and the controller would steer a
    quantity the reward does not penalise. None when no component measured one (no kl
    component, or no sample had log-probs).
    """
    values = [o.kl for outs in reward_outputs.outputs.values() for o in outs if o.kl is not None]
    return float(np.mean(values)) if values else None


def sample_kl_coefs(hook, base: float, batch) -> torch.Tensor | None:
    """[B] weights of the algorithm's KL loss term from a task source's `kl_loss_coefs` hook, checked; None = base."""
    if hook is None:
        return None
    coefs = hook(batch.tasks, float(base))
    if coefs is None:
        return None
    t = torch.as_tensor(list(coefs), dtype=torch.float32)
    if t.shape != (batch.size,) or not bool(torch.isfinite(t).all()) or bool((t < 0).any()):
        raise DensecodeError(f"the task source's kl_loss_coefs gave {t.tolist()}; it must give one finite "
                             f"weight >= 0 per sample ({batch.size})")
    if bool((t > 0).any()) and batch.ref_logprobs is None:
        raise DensecodeError("the task source's kl_loss_coefs are > 0 but no reference model is loaded: its "
                             "uses_kl_loss(base) must say True for such a run")
    return t.to(batch.response_mask.device)
