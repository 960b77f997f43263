"""Critic-free credit: the outcome's advantage on every token, baselined by the other samples of its prompt.

Pure functions over a rollout batch's tensors (layout as in densecode/rl/ppo.py: [B, T] right-padded
response tokens with a `mask`). `PPOAlgorithm` uses them when `algo.ppo.credit` is not `gae`.

outcome (RLOO / GRPO-style, arXiv 2402.14740):
    r_i          the verifiable outcome of response i in [0, 1] (tests pass rate, simulator success)
    b_i          leave-one-out baseline: the mean outcome of the OTHER responses to i's prompt
                 (one response per prompt: the mean of the other responses of the batch)
    A_i          r_i − b_i on every token of response i; a prompt whose responses all agree gives 0
    kl_t         the reward's per-token KL part (−β·KL_t), as a return-to-go Σ_{s≥t} kl_s (γ = 1)
    A_t          (A_i + Σ_{s≥t} kl_s) / σ,  σ = the batch's std of A_i (`whiten`), so a step's
                 update size does not depend on how hard the batch's prompts were

The outcome term is the same on every token whatever the response's length, so padding a response
with neutral tokens changes no token's outcome credit (no length bonus by construction).
"""

from __future__ import annotations

import torch

CREDITS = ("gae", "outcome")


def leave_one_out_baseline(outcomes: torch.Tensor, prompt_index: torch.Tensor) -> torch.Tensor:
    """b_i = mean of the outcomes of the other responses to i's prompt; with one response per prompt, of the
    other responses of the batch (a batch of one: 0)."""
    outcomes = outcomes.float()
    groups = torch.unique(prompt_index, return_inverse=True)[1]
    n_groups = int(groups.max()) + 1 if groups.numel() else 0
    sums = torch.zeros(n_groups).index_add_(0, groups, outcomes)
    counts = torch.zeros(n_groups).index_add_(0, groups, torch.ones_like(outcomes))
    own_sum, own_count = sums[groups], counts[groups]
    if bool((counts > 1).all()):
        return (own_sum - outcomes) / (own_count - 1)
    n = outcomes.numel()
    if n <= 1:
        return torch.zeros_like(outcomes)
    return (outcomes.sum() - outcomes) / (n - 1)


def reward_to_go(rewards: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Σ_{s≥t} r_s over each row's real tokens (γ = 1); padding stays 0."""
    rewards = rewards * mask
    return torch.flip(torch.cumsum(torch.flip(rewards, [1]), 1), [1]) * mask


def no_signal_share(outcomes: torch.Tensor, prompt_index: torch.Tensor) -> tuple[float, float]:
    """(share of prompts whose responses all pass, share whose responses all fail); a prompt with one response
    counts by that response. Outcomes >= 1 pass, <= 0 fail."""
    groups = torch.unique(prompt_index, return_inverse=True)[1]
    n_groups = int(groups.max()) + 1 if groups.numel() else 0
    if n_groups == 0:
        return 0.0, 0.0
    lo = torch.full((n_groups,), float("inf")).scatter_reduce(0, groups, outcomes.float(), "amin")
    hi = torch.full((n_groups,), float("-inf")).scatter_reduce(0, groups, outcomes.float(), "amax")
    return float((lo >= 1.0).float().mean()), float((hi <= 0.0).float().mean())


@torch.no_grad()
def outcome_advantages(outcomes: torch.Tensor, prompt_index: torch.Tensor, mask: torch.Tensor,
                       kl_rewards: torch.Tensor | None = None, whiten: bool = True, negative_scale: float = 1.0,
                       eps: float = 1e-6) -> tuple[torch.Tensor, dict[str, float]]:
    """A_t [B, T] of the `outcome` credit (module docstring) and its statistics. `negative_scale` multiplies the
    outcome advantage of responses below their baseline (1 = plain; 0 = only responses above it are reinforced)."""
    outcomes = outcomes.float().to(mask.device)
    seq_adv = outcomes - leave_one_out_baseline(outcomes.cpu(), prompt_index.cpu()).to(mask.device)
    if negative_scale != 1.0:
        seq_adv = torch.where(seq_adv < 0, seq_adv * float(negative_scale), seq_adv)
    advantages = seq_adv[:, None] * mask
    if kl_rewards is not None:
        advantages = advantages + reward_to_go(kl_rewards.float(), mask)
    scale = float(seq_adv.std(unbiased=False)) if whiten and seq_adv.numel() > 1 else 1.0
    if whiten:
        advantages = advantages / (scale + eps)
    all_pass, all_fail = no_signal_share(outcomes.cpu(), prompt_index.cpu())
    stats = {"outcome_mean": float(outcomes.mean()), "outcome_adv_std": scale,
             "all_pass_prompts": all_pass, "all_fail_prompts": all_fail}
    return advantages * mask, stats
