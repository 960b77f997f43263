"""PPO on per-token rewards, CleanRL style: every equation is a few visible lines.

Tensors are laid out over *response tokens*: shape [batch, T], right-padded, with
`mask` (1 for a real response token, 0 for padding). Everything is a pure function
of tensors except `PPOAlgorithm`, the strategy object the trainer calls
(see `densecode/rl/protocols.py` for the interface).

Paper names: rewards r_t, values V_t, deltas δ_t = r_t + γ V_{t+1} − V_t,
advantages A_t = Σ_k (γλ)^k δ_{t+k} (GAE), returns R_t = A_t + V_t,
ratio = π_θ(a_t|s_t) / π_old(a_t|s_t), clipfrac, approx_kl, explained variance.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from densecode.config import PPOConfig, check_choices
from densecode.rl.protocols import Algorithm
from densecode.rl.tensors import masked_mean

# ---------------------------------------------------------------- helpers


def masked_var(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    mean = masked_mean(x, mask)
    n = mask.sum()
    var = masked_mean((x - mean) ** 2, mask)
    # Bessel's correction, like TRL/CleanRL; a single token has variance 0.
    return var * n / (n - 1) if n > 1 else var


def whiten(x: torch.Tensor, mask: torch.Tensor, shift_mean: bool = True, eps: float = 1e-8) -> torch.Tensor:
    """(x − mean) / std over the masked tokens of the whole batch; padding stays 0."""
    mean, var = masked_mean(x, mask), masked_var(x, mask)
    out = (x - mean) * torch.rsqrt(var + eps)
    if not shift_mean:
        out = out + mean
    return out * mask


def logprobs_from_logits(logits: torch.Tensor, tokens: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """log π(token) under softmax(logits / temperature) — the distribution the rollout sampled from."""
    logp = torch.log_softmax(logits.float() / temperature, dim=-1)
    return torch.gather(logp, -1, tokens.unsqueeze(-1)).squeeze(-1)


def entropy_from_logits(logits: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    return entropy_from_logp(torch.log_softmax(logits.float() / temperature, dim=-1))


def entropy_from_logp(logp: torch.Tensor) -> torch.Tensor:
    """H = −Σ p log p from log-probabilities over the vocabulary (the log_softmax the logprobs already took)."""
    return -(logp.exp() * logp).sum(-1)


# ---------------------------------------------------------------- GAE


@torch.no_grad()
def compute_gae(
    rewards: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, gamma: float, lam: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimation over response tokens.

    The episode ends after the last real token: V_{T} = 0 (no bootstrap), and
    padded positions contribute neither reward nor value.
    Returns (advantages, returns) with returns = advantages + values.
    """
    rewards = rewards * mask
    values = values * mask
    T = rewards.shape[1]
    advantages = torch.zeros_like(rewards)
    lastgaelam = torch.zeros_like(rewards[:, 0])
    for t in reversed(range(T)):
        nextvalues = values[:, t + 1] if t + 1 < T else torch.zeros_like(values[:, 0])
        delta = rewards[:, t] + gamma * nextvalues - values[:, t]
        lastgaelam = delta + gamma * lam * lastgaelam
        # Padding after the episode: keep the running sum at 0 so nothing leaks backwards.
        lastgaelam = lastgaelam * mask[:, t]
        advantages[:, t] = lastgaelam
    returns = advantages + values
    return advantages * mask, returns * mask


# ---------------------------------------------------------------- losses


def clipped_policy_loss(
    new_logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip_eps: float = 0.2,
    clip_eps_high: float | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """PPO clipped surrogate, token-mean over the mask. clip_eps_high ≠ clip_eps gives DAPO clip-higher."""
    high = clip_eps if clip_eps_high is None else clip_eps_high
    logratio = new_logprobs - old_logprobs
    ratio = torch.exp(logratio)
    pg_losses = -advantages * ratio
    pg_losses2 = -advantages * torch.clamp(ratio, 1.0 - clip_eps, 1.0 + high)
    pg_loss = masked_mean(torch.max(pg_losses, pg_losses2), mask)
    with torch.no_grad():
        clipfrac = masked_mean((pg_losses2 > pg_losses).float(), mask)
        # k3 estimator of KL(old || new) (Schulman), as in CleanRL.
        approx_kl = masked_mean((ratio - 1) - logratio, mask)
        ratio_mean = masked_mean(ratio, mask)
    return pg_loss, {"clipfrac": clipfrac, "approx_kl": approx_kl, "ratio": ratio_mean}


def clipped_value_loss(
    new_values: torch.Tensor,
    old_values: torch.Tensor,
    returns: torch.Tensor,
    mask: torch.Tensor,
    value_clip: float = 0.3,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """0.5 · max((V − R)², (V_clipped − R)²), V_clipped = V_old + clip(V − V_old, ±value_clip)."""
    v_loss_unclipped = (new_values - returns) ** 2
    v_clipped = old_values + torch.clamp(new_values - old_values, -value_clip, value_clip)
    v_loss_clipped = (v_clipped - returns) ** 2
    v_loss = 0.5 * masked_mean(torch.max(v_loss_unclipped, v_loss_clipped), mask)
    with torch.no_grad():
        # The clip is active only where it moved V (|V - V_old| > clip) and its loss won the max; comparing the
        # two losses alone counts float-rounding ties (V_old + (V - V_old) != V) as clips.
        clipped = (new_values - old_values).abs() > value_clip
        vf_clipfrac = masked_mean((clipped & (v_loss_clipped > v_loss_unclipped)).float(), mask)
    return v_loss, {"vf_clipfrac": vf_clipfrac}


def explained_variance(values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor) -> float:
    """1 − Var(R − V) / Var(R): 1 = perfect critic, 0 = no better than a constant, < 0 = worse."""
    var_r = masked_var(returns, mask)
    if var_r.item() == 0:
        return float("nan")
    return float(1 - masked_var(returns - values, mask) / var_r)


def explained_variance_by_fifth(values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor) -> list[float]:
    """Explained variance over the tokens of each fifth of the responses (by relative position in its own
    response): where along a response the critic knows the return (nan for a fifth with no spread)."""
    lengths = mask.sum(-1, keepdim=True).clamp(min=1)
    pos = torch.cumsum(mask, -1) - 1  # 0-based index of each real token
    fifth = torch.clamp((pos * 5 / lengths).long(), 0, 4)
    return [explained_variance(values, returns, mask * (fifth == k).float()) for k in range(5)]


# ---------------------------------------------------------------- the strategy object


@dataclass
class PPOAlgorithm(Algorithm):
    """PPO with a value head: GAE advantages, clipped surrogate, clipped value loss.

    Implements the trainer's `Algorithm` interface (densecode.rl.protocols); its settings are `algo.ppo` as they
    are (`cfg`, densecode.config.PPOConfig: declared once).
    """

    cfg: PPOConfig = field(default_factory=PPOConfig)
    temperature: float = 1.0  # generation.temperature

    name = "ppo"

    def __post_init__(self) -> None:
        check_choices(self.cfg, "algo.ppo.")
        if self.cfg.samples_per_prompt < 1:
            raise ValueError("algo.ppo.samples_per_prompt must be >= 1")
        if self.cfg.value_warmup_steps and not self.needs_value_head:
            raise ValueError(f"algo.ppo.value_warmup_steps needs credit: gae (a critic to warm up); "
                             f"credit {self.cfg.credit!r} has none")

    # What the trainer reads of any algorithm (densecode.rl.protocols.Algorithm), from the config.
    @property
    def needs_value_head(self) -> bool:
        return self.cfg.credit == "gae"

    @property
    def samples_per_prompt(self) -> int:
        return self.cfg.samples_per_prompt  # responses per prompt (the outcome credit's baseline is the others' mean)

    @property
    def epochs(self) -> int:
        return self.cfg.epochs

    @classmethod
    def from_config(cls, algo_cfg, gen_cfg) -> PPOAlgorithm:
        """From `algo` (its `ppo:` section) and `generation` (the sampling temperature)."""
        return cls(algo_cfg.ppo, temperature=gen_cfg.temperature)

    def sampling_temperature(self, step: int) -> float:
        return self.temperature

    def compute_advantages(self, batch) -> dict[str, float]:
        mask = batch.response_mask
        if self.cfg.credit != "gae":
            return self._outcome_advantages(batch)
        advantages, returns = compute_gae(batch.rewards, batch.values, mask, self.cfg.gamma, self.cfg.lam)
        if self.cfg.lam_critic is not None and self.cfg.lam_critic != self.cfg.lam:
            # VC-PPO's decoupled GAE: the critic regresses on λ_critic returns, the policy uses λ's advantages.
            returns = compute_gae(batch.rewards, batch.values, mask, self.cfg.gamma, self.cfg.lam_critic)[1]
        batch.returns = returns
        # Advantages are whitened, rewards are not (as in the reference implementation).
        batch.advantages = whiten(advantages, mask) if self.cfg.whiten_advantages else advantages
        stats = {
            "ppo/returns_mean": float(masked_mean(returns, mask)),
            "ppo/advantages_raw_mean": float(masked_mean(advantages, mask)),
            "ppo/advantages_raw_std": float(masked_var(advantages, mask).sqrt()),
            "ppo/values_mean": float(masked_mean(batch.values, mask)),
            "ppo/explained_variance": explained_variance(batch.values, returns, mask),
        }
        for k, ev in enumerate(explained_variance_by_fifth(batch.values, returns, mask), start=1):
            stats[f"ppo/explained_variance_fifth{k}"] = ev
        if batch.step < self.cfg.value_warmup_steps:
            # Value warm-up: the critic fits the returns first; zero advantages give the policy no gradient.
            batch.advantages = torch.zeros_like(batch.advantages)
        stats["ppo/value_warmup"] = float(batch.step < self.cfg.value_warmup_steps)
        return stats

    def _outcome_advantages(self, batch) -> dict[str, float]:
        from densecode.rl.credit import (
            FINDINGS_SPREAD,
            findings_token_rewards,
            outcome_advantages,
        )
        from densecode.rl.grpo import sequence_rewards

        mask = batch.response_mask
        outcomes = sequence_rewards(batch, "outcome")
        kl = batch.components.get("kl")
        findings = None
        if self.cfg.credit in FINDINGS_SPREAD:
            findings = findings_token_rewards(batch.reward_outputs, batch.size, mask.shape[1],
                                              FINDINGS_SPREAD[self.cfg.credit])
        advantages, st = outcome_advantages(outcomes, batch.prompt_index, mask, kl_rewards=kl,
                                            whiten=self.cfg.whiten_advantages, negative_scale=self.cfg.negative_scale,
                                            credit=self.cfg.credit, findings=findings, dense_scale=self.cfg.dense_scale)
        batch.advantages = advantages
        batch.returns = None
        stats = {f"ppo/{k}": v for k, v in st.items()}
        # After whitening (the sd before it is ppo/outcome_adv_std).
        stats["ppo/advantages_mean"] = float(masked_mean(advantages, mask))
        stats["ppo/advantages_std"] = float(masked_var(advantages, mask).sqrt())
        return stats

    def loss(self, mb, out) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        mask = mb.response_mask
        pg_loss, pg_stats = clipped_policy_loss(
            out.logprobs, mb.logprobs, mb.advantages, mask, self.cfg.clip_eps, self.cfg.clip_eps_high
        )
        entropy = masked_mean(out.entropy, mask)
        loss = pg_loss
        if self.cfg.ent_coef:
            # Only then: a zero-weighted term would still send the backward pass through the vocabulary softmax.
            loss = loss - self.cfg.ent_coef * entropy
        stats = {
            "ppo/policy_loss": pg_loss.detach(),
            "ppo/entropy": entropy.detach(),
            "ppo/clipfrac": pg_stats["clipfrac"],
            "ppo/approx_kl": pg_stats["approx_kl"],
            "ppo/ratio": pg_stats["ratio"],
        }
        if self.needs_value_head:
            v_loss, v_stats = clipped_value_loss(out.values, mb.values, mb.returns, mask, self.cfg.value_clip)
            loss = loss + self.cfg.vf_coef * v_loss
            stats["ppo/value_loss"] = v_loss.detach()
            stats["ppo/vf_clipfrac"] = v_stats["vf_clipfrac"]
        return loss, stats

    def signal_rows(self, mb) -> tuple[torch.Tensor, float] | None:
        # A row with every advantage 0 adds 0 to the clipped surrogate (min(ρA, clip(ρ)A) = 0) and so no
        # gradient, unless a value loss or an entropy bonus gives it one.
        if self.needs_value_head or self.cfg.ent_coef:
            return None
        mask = mb.response_mask
        rows = ((mb.advantages * mask) != 0).any(dim=1)
        # The surrogate is a token mean over the micro-batch: the kept rows' mean times their share of its tokens.
        share = float(mask[rows].sum() / mask.sum().clamp(min=1.0))
        return rows, share

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass
