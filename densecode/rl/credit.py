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

Findings: the located parts of the reward components, read from their diagnostics (a record with a token
range and a value: the line that raised in the simulator or the tests, a Ruff finding, a syntax error's
token), each times its component's reward weight; ℓ_{c,t} for source c. Whole-response scores (the
simulator's score spread over the code, the tests' pass rate) are not findings: the outcome carries them.

outcome+dense (PRIME-style, arXiv 2502.01456), per source c:
    L_{c,i}      Σ_t ℓ_{c,t} of response i (its findings' total; a finding's value is split among its tokens)
    b_{c,i}      the leave-one-out baseline of L_c (as b_i above): each source its own baseline
    D_t          Σ_c (Σ_{s≥t} ℓ_{c,s} − b_{c,i})      (each source's return-to-go minus its baseline)
    A_t          outcome's A_t + β·D_t / σ
  A token before a finding carries its blame; tokens after the last finding carry only −Σ_c b_{c,i},
  the same as every token of a response without findings.

outcome+local (RLTF-style, arXiv 2307.04349):
    A_t          outcome's A_t + β·ℓ_t / σ,  ℓ_t = Σ_c ℓ_{c,t} with each finding's whole value on every one of
                 its tokens; nothing is spread: a token without a finding gets the outcome's advantage only.

Both terms are in the reward's units over the outcome's σ, so the reward weights say what a finding is worth
next to the outcome (robotics: a failing robot line 0.8 x 0.25 = 0.2 of a success) and β scales them all.

Length: appending tokens without findings leaves every other token's advantage unchanged, and the appended
tokens get what any finding-free token of the response gets (outcome and +local: A_i/σ; +dense: that
− β·Σ_c b_{c,i}/σ), so no estimator pays a longer response more per token for the same outcome and findings
(tests/rl/test_credit_estimators.py checks it for each estimator).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, get_args

import torch

from densecode.config import Credit

if TYPE_CHECKING:
    from densecode.rewards.assembler import RewardBatch

CREDITS = get_args(Credit)  # algo.ppo.credit; GRPO takes the three without a critic
# How a finding's value is laid on its tokens for each estimator (see the module docstring).
FINDINGS_SPREAD = {"outcome+dense": "split", "outcome+local": "each"}


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


def findings_token_rewards(reward_outputs: RewardBatch, n: int, length: int, spread: str = "split",
                           exclude: tuple[str, ...] = ("kl",)) -> dict[str, torch.Tensor]:
    """{component: [n, length] weighted findings ℓ_c} from the assembler's RewardBatch (its `outputs`, the
    components' diagnostics, and `weights`). spread "split": a finding's value divided among its tokens (its
    sum is the value, whatever the line's length); "each": the value on every one of its tokens."""
    if spread not in ("split", "each"):
        raise ValueError(f"findings spread must be split or each, got {spread!r}")
    weights = reward_outputs.weights
    found: dict[str, torch.Tensor] = {}
    for name, outs in reward_outputs.outputs.items():
        w = float(weights.get(name, 0.0))
        if name in exclude or w == 0.0:
            continue
        values = torch.zeros((n, length), dtype=torch.float32)
        for i, comp in enumerate(outs[:n]):
            for d in comp.diagnostics or []:
                tokens, value = d.get("tokens"), d.get("value")
                if tokens is None or value is None:
                    continue
                a, b = int(tokens[0]), int(tokens[1])
                if b <= a:
                    continue
                share = float(value) if spread == "each" else float(value) / (b - a)
                values[i, a:min(b, length)] += w * share
        found[name] = values
    return found


@torch.no_grad()
def dense_return_term(findings: dict[str, torch.Tensor], prompt_index: torch.Tensor,
                      mask: torch.Tensor) -> tuple[torch.Tensor, dict[str, float]]:
    """D_t [B, T] of `outcome+dense` (module docstring): per source, the return-to-go of its findings minus
    their leave-one-out baseline; summed over the sources."""
    total = torch.zeros_like(mask, dtype=torch.float32)
    stats: dict[str, float] = {}
    for name, values in findings.items():
        values = values.to(mask.device).float() * mask
        sums = values.sum(dim=1)
        baseline = leave_one_out_baseline(sums.cpu(), prompt_index.cpu()).to(mask.device)
        total = total + (reward_to_go(values, mask) - baseline[:, None]) * mask
        stats[f"dense_{name}_sum_mean"] = float(sums.mean())
    return total * mask, stats


@torch.no_grad()
def local_term(findings: dict[str, torch.Tensor], mask: torch.Tensor) -> tuple[torch.Tensor, dict[str, float]]:
    """ℓ_t [B, T] of `outcome+local` (module docstring): the findings on their own tokens."""
    total = torch.zeros_like(mask, dtype=torch.float32)
    for values in findings.values():
        total = total + values.to(mask.device).float()
    total = total * mask
    stats = {"local_tokens_share": float((total != 0).float().sum() / mask.sum().clamp(min=1.0))}
    return total, stats


def credit_term(credit: str, findings: dict[str, torch.Tensor] | None, prompt_index: torch.Tensor,
                mask: torch.Tensor) -> tuple[torch.Tensor | None, dict[str, float]]:
    """The token term (in reward units, before β/σ) a credit estimator adds to the outcome advantage
    (None for `outcome` and `gae`)."""
    if credit not in CREDITS:
        raise ValueError(f"credit must be one of {', '.join(CREDITS)}; got {credit!r}")
    if credit not in FINDINGS_SPREAD:
        return None, {}
    findings = findings or {}
    if credit == "outcome+dense":
        return dense_return_term(findings, prompt_index, mask)
    return local_term(findings, mask)


@torch.no_grad()
def outcome_advantages(outcomes: torch.Tensor, prompt_index: torch.Tensor, mask: torch.Tensor,
                       kl_rewards: torch.Tensor | None = None, whiten: bool = True, negative_scale: float = 1.0,
                       credit: str = "outcome", findings: dict[str, torch.Tensor] | None = None,
                       dense_scale: float = 0.5, eps: float = 1e-6) -> tuple[torch.Tensor, dict[str, float]]:
    """A_t [B, T] of the `outcome` credit, or `outcome+dense` / `outcome+local` with `findings` (from
    findings_token_rewards with FINDINGS_SPREAD[credit]) weighted by `dense_scale` (β); module docstring.
    `negative_scale` multiplies the outcome advantage of responses below their baseline (1 = plain; 0 = only
    responses above it are reinforced)."""
    outcomes = outcomes.float().to(mask.device)
    seq_adv = outcomes - leave_one_out_baseline(outcomes.cpu(), prompt_index.cpu()).to(mask.device)
    if negative_scale != 1.0:
        seq_adv = torch.where(seq_adv < 0, seq_adv * float(negative_scale), seq_adv)
    advantages = seq_adv[:, None] * mask
    if kl_rewards is not None:
        advantages = advantages + reward_to_go(kl_rewards.float(), mask)
    scale = float(seq_adv.std(unbiased=False)) if whiten and seq_adv.numel() > 1 else 1.0
    if whiten:
        # A batch whose responses all agree has no outcome contrast: leave the (KL) terms unscaled.
        advantages = advantages / (scale + eps if scale > eps else 1.0)
    all_pass, all_fail = no_signal_share(outcomes.cpu(), prompt_index.cpu())
    stats = {"outcome_mean": float(outcomes.mean()), "outcome_adv_std": scale,
             "all_pass_prompts": all_pass, "all_fail_prompts": all_fail}
    term, term_stats = credit_term(credit, findings, prompt_index, mask)
    if term is not None:
        term = term / (scale + eps if whiten and scale > eps else 1.0)
        advantages = advantages + float(dense_scale) * term
        stats.update(term_stats)
        stats["dense_term_abs_mean"] = float((term.abs() * mask).sum() / mask.sum().clamp(min=1.0))
    return advantages * mask, stats
