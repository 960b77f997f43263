"""MicroCoder-GRPO: group-relative advantages, conditional truncation masking, clip-higher loss.

Paper: "Breaking Training Bottlenecks: Effective and Stable RL for Coding Models"
(arXiv 2603.07777), on top of GRPO (DeepSeekMath) and DAPO (arXiv 2503.14476).
Every equation is written out here with the papers' names; the trainer owns the
rollout → rewards path and calls `GRPOAlgorithm.compute_advantages` / `.loss`.

Layout of a GRPO batch: N = num_groups * G responses, ordered group by group
(response i belongs to group i // G); token tensors are (N, T) with a response
mask (1 on generated tokens, 0 on padding).

1. Group advantages (no value model):
       A_i = (r_i - mean_g(r)) / (std_g(r) + eps)
   where r_i is the sequence reward and mean/std run over the G responses of i's
   group. r_i is the task's verifiable outcome (`algo.grpo.sequence_reward:
   outcome`, MicroCoder: the tests' pass rate, the simulator's success rate), or
   the assembler's per-token total averaged (`mean`) or summed (`sum`) over the
   response (the dense variants). std is the
   population std (ddof=0) so a group of two different rewards gives ±1. A group
   whose rewards have no spread (std < eps) carries no learning signal: its
   advantages are exactly 0 and it is counted (`zero_std_groups`).

2. Conditional truncation masking (MicroCoder): A_i := 0 iff
       truncated_i AND NOT judged_incorrect_i AND NOT repetitive_i AND u_i < rho
   A truncated response that is already known to be wrong keeps its (negative)
   advantage; a truncated response stuck in a loop keeps it too (the model must
   learn not to loop); only the "might have been right if given more room" cases
   are masked, and only a fraction rho of them. "Known to be wrong" must come
   from evidence the cut did not cause (`judged_incorrect_despite_cut`): a cut-off
   program fails its tests and its simulator runs because it is unfinished, so
   those verdicts count only when the code had finished before the cut (the cut
   fell in prose after it); otherwise only an error located on a line finished
   before the cut counts (a syntax error the syntax component found there, a
   runtime or robot error raised there). Repetitive (`repetition_test: paper`):
   the last m tokens equal the m before them. The paper does not pin rho down (10% and 30% both
   appear); the default here is 0.3 (`algo.grpo.truncation_rho`). `mode="all"` is
   DAPO's overlong filtering (mask every truncated response); `mode="none"` masks
   nothing.

3. Loss (PPO-clip with DAPO clip-higher, no KL by default):
       ratio_t = exp(logp_t - old_logp_t)
       pg_loss_t = max(-A_t * ratio_t, -A_t * clip(ratio_t, 1 - eps_low, 1 + eps_high))
       + kl_coef_i * k3_t,   k3_t = exp(ref_logp_t - logp_t) - (ref_logp_t - logp_t) - 1
   (kl_coef_i = algo.grpo.beta, or response i's own weight when the task source gives one per
   sample: the trainer's `kl_loss_coefs` hook, e.g. a multi-task run's beta_k of i's task)
   aggregated "token" (DAPO: sum over all response tokens of the minibatch /
   number of those tokens) or "sequence" (GRPO: mean over tokens of each
   response, then mean over responses).

4. Dense signal inside GRPO (densecode's extension, off by default): each token's
   advantage gets `scale * d_t`, where d is the sum of the precisely attributable
   per-token reward components (syntax, lint, exception line) normalised over
   all response tokens of the group: d_t = (c_t - mean_g(c)) / (std_g(c) + eps).
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, get_args

import numpy as np
import torch

from densecode.config import (
    GRPOConfig,
    LossAggregation,
    RepetitionTest,
    SequenceReward,
    TruncationMasking,
    check_choices,
)
from densecode.errors import DensecodeError
from densecode.rl.credit import (
    FINDINGS_SPREAD,
    credit_term,
    findings_token_rewards,
)
from densecode.rl.protocols import Algorithm
from densecode.rl.temperature import TemperatureController
from densecode.rl.tensors import masked_mean

if TYPE_CHECKING:
    from densecode.rewards.assembler import RewardBatch
    from densecode.rewards.base import ComponentOutput

TRUNCATION_MODES = get_args(TruncationMasking)
REPETITION_TESTS = get_args(RepetitionTest)
SEQUENCE_REWARDS = get_args(SequenceReward)
AGGREGATIONS = get_args(LossAggregation)


# ------------------------------------------------------------------ 1. group advantages


@dataclass
class GroupAdvantages:
    advantages: torch.Tensor  # (N,) one scalar per response
    group_mean: torch.Tensor  # (num_groups,)
    group_std: torch.Tensor  # (num_groups,)
    zero_std: torch.Tensor  # (num_groups,) bool: the group had no reward spread

    @property
    def zero_std_groups(self) -> int:
        return int(self.zero_std.sum())


def group_advantages(rewards: torch.Tensor, group_size: int, eps: float = 1e-6) -> GroupAdvantages:
    """A_i = (r_i - mean_g) / (std_g + eps); exactly 0 for groups whose rewards have no spread."""
    rewards = torch.as_tensor(rewards, dtype=torch.float32).flatten()
    if group_size < 1 or rewards.numel() % group_size != 0:
        raise ValueError(f"{rewards.numel()} rewards do not split into groups of {group_size}")
    grouped = rewards.view(-1, group_size)
    group_mean = grouped.mean(dim=1)
    group_std = grouped.std(dim=1, unbiased=False) if group_size > 1 else torch.zeros_like(group_mean)
    zero_std = group_std < eps
    advantages = (grouped - group_mean[:, None]) / (group_std[:, None] + eps)
    advantages = torch.where(zero_std[:, None], torch.zeros_like(advantages), advantages)
    return GroupAdvantages(advantages.flatten(), group_mean, group_std, zero_std)


# ------------------------------------------------------------------ 2. truncation masking


def is_repetitive(token_ids: Sequence[int], window: int = 128, test: str = "paper") -> bool:
    """True when the response ends in a loop.

    paper (MicroCoder): the last m tokens equal the m tokens before them (m =
    `window`); a response shorter than 2m is never repetitive.
    any_period: the tail of length w + p is periodic for some period p in 1..w,
    w = min(m, len // 2) — also catches loops whose period does not divide m (a
    3-token loop never matches at p = 128) and loops in short responses.
    """
    ids = list(token_ids)
    m = int(window)
    if test == "paper":
        return m >= 1 and len(ids) >= 2 * m and ids[-m:] == ids[-2 * m : -m]
    if test != "any_period":
        raise ValueError(f"repetition_test must be one of {REPETITION_TESTS}, got {test!r}")
    w = min(m, len(ids) // 2)
    if w < 1:
        return False
    tail = ids[-w:]
    for period in range(1, w + 1):
        if ids[-w - period : len(ids) - period] == tail:
            return True
    return False


def judged_incorrect(outputs: Mapping[str, ComponentOutput]) -> bool:
    """Whether any reward component found the whole response wrong: its `ComponentOutput.incorrect`.

    A failing test, a simulator/runtime error, a syntax error, a clean simulator run that failed the task's checks
    (each component says what it judges; a timeout alone is no verdict). A component that cannot judge (lint, KL)
    leaves it None: "no verdict" counts as not incorrect. On a truncated response these verdicts may be caused by
    the cut: see `judged_incorrect_despite_cut`.
    """
    return any(o.incorrect for o in outputs.values())


def cut_token_index(response: str, token_spans: Sequence[tuple[int, int]]) -> int:
    """Index of the first token of the line the cut interrupted: the token holding the response's last
    newline, or 0 when the response is one line. Tokens before it lie on lines finished before the cut."""
    last_newline = response.rfind("\n")
    if last_newline < 0:
        return 0
    for i, (_, end) in enumerate(token_spans):
        if end > last_newline:
            return i
    return len(token_spans)


def judged_incorrect_despite_cut(sample: Any, outputs: Mapping[str, ComponentOutput]) -> str | None:
    """Why a truncated response is known to be wrong whatever the cut did, or None.

    `sample` is the reward step's Sample (response text, token spans, code tokens); `outputs` are the verdict
    components' ComponentOutputs for it. Evidence, in order:
    - "finished_wrong": the code had finished before the cut (it has code tokens and none on or after the cut
      line, e.g. a closed ``` block and the cut in the prose after it): the whole-response verdicts
      (`judged_incorrect`) count as for an untruncated response;
    - "error_before_cut": an error a component located (`ComponentOutput.errors`) entirely on lines finished
      before the cut — a syntax error the syntax component found there, or a runtime/robot error a test or
      simulator run raised there (a runner's parse error is no located error: nothing ran).
    Failing tests or sim checks of a program cut inside its code are not evidence (the unfinished code fails
    because it is unfinished), nor is a timeout.
    """
    n = len(sample.token_spans)
    cut = cut_token_index(sample.response, sample.token_spans)
    code = np.asarray(sample.code_token_mask(), dtype=bool) if n else np.zeros(0, dtype=bool)
    if code.any() and not code[cut:].any() and judged_incorrect(outputs):
        return "finished_wrong"
    if any(e.tokens[1] <= cut for o in outputs.values() for e in o.errors):
        return "error_before_cut"
    return None


@dataclass
class TruncationMask:
    masked: torch.Tensor  # (N,) bool: advantage set to 0
    counts: dict[str, int]


def truncation_mask(
    truncated: torch.Tensor,
    incorrect: torch.Tensor,
    repetitive: torch.Tensor,
    uniform: torch.Tensor,
    mode: str = "conditional",
    rho: float = 0.3,
) -> TruncationMask:
    """Which responses get advantage 0 under `mode`; counts what each rule would mask.

    All inputs are (N,) tensors; `uniform` holds one U[0,1) draw per response
    (passed in so the rule itself is deterministic and testable).
    """
    if mode not in TRUNCATION_MODES:
        raise ValueError(f"truncation_masking must be one of {TRUNCATION_MODES}, got {mode!r}")
    truncated, incorrect, repetitive = (torch.as_tensor(x, dtype=torch.bool) for x in (truncated, incorrect, repetitive))
    uniform = torch.as_tensor(uniform, dtype=torch.float32)
    # The three deterministic conditions: "could have been right with more room".
    eligible = truncated & ~incorrect & ~repetitive
    conditional = eligible & (uniform < rho)
    masked = {"conditional": conditional, "all": truncated.clone(), "none": torch.zeros_like(truncated)}[mode]
    counts = {
        "truncated": int(truncated.sum()),
        "truncated_incorrect": int((truncated & incorrect).sum()),
        "truncated_repetitive": int((truncated & repetitive).sum()),
        "eligible": int(eligible.sum()),
        "masked_conditional": int(conditional.sum()),  # what each rule masks on this batch
        "masked_all": int(truncated.sum()),
        "masked": int(masked.sum()),  # what the active rule masked
    }
    return TruncationMask(masked, counts)


# ------------------------------------------------------------------ 4. dense signal inside GRPO


def dense_token_term(
    token_rewards: torch.Tensor, response_mask: torch.Tensor, group_size: int, eps: float = 1e-6
) -> torch.Tensor:
    """d_t = (c_t - mean_g(c)) / (std_g(c) + eps) over all response tokens of each group; 0 off-mask.

    `token_rewards` (N, T) is the weighted sum of the precisely attributable
    components. A group whose tokens all carry the same value gives 0 (no
    token-level contrast to learn from).
    """
    c = token_rewards.float()
    m = response_mask.float()
    n, t = c.shape
    cg, mg = c.view(-1, group_size * t), m.view(-1, group_size * t)
    count = mg.sum(dim=1).clamp(min=1.0)
    mean = (cg * mg).sum(dim=1) / count
    var = (((cg - mean[:, None]) ** 2) * mg).sum(dim=1) / count
    std = var.sqrt()
    d = (cg - mean[:, None]) / (std[:, None] + eps)
    d = torch.where((std < eps)[:, None], torch.zeros_like(d), d) * mg
    return d.view(n, t)


# ------------------------------------------------------------------ 3. loss


def aggregate(loss_tokens: torch.Tensor, mask: torch.Tensor, how: str = "token") -> torch.Tensor:
    """token (DAPO): every response token weighs the same; sequence (GRPO): every response weighs the same."""
    mask = mask.float()
    if how == "token":
        return masked_mean(loss_tokens, mask)
    if how == "sequence":
        per_seq = (loss_tokens * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)
        has_tokens = (mask.sum(dim=1) > 0).float()
        return (per_seq * has_tokens).sum() / has_tokens.sum().clamp(min=1.0)
    raise ValueError(f"loss_aggregation must be one of {AGGREGATIONS}, got {how!r}")


def k3_kl(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimator of KL(pi || pi_ref): e^x - x - 1, x = log pi_ref - log pi (>= 0)."""
    x = ref_logprobs - logprobs
    return torch.exp(x) - x - 1.0


def grpo_policy_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    clip_eps_low: float = 0.2,
    clip_eps_high: float = 0.28,
    aggregation: str = "token",
    ref_logprobs: torch.Tensor | None = None,
    kl_coef: float | torch.Tensor = 0.0,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Clipped surrogate with clip-higher; `advantages` is (N,) or (N, T). Returns (loss, stats).

    `kl_coef` is one number for every response or an (N,) tensor: each response's own weight of the k3 term
    (a multi-task run gives each sample its task's beta_k). Row i's token t adds kl_coef_i * k3_{i,t} before
    aggregation, so a row with weight 0 gets no KL gradient at all.
    """
    mask = response_mask.float()
    if advantages.dim() == 1:
        advantages = advantages[:, None].expand_as(logprobs)
    logratio = logprobs - old_logprobs
    ratio = torch.exp(logratio)
    pg_losses = -advantages * ratio
    pg_losses2 = -advantages * torch.clamp(ratio, 1.0 - clip_eps_low, 1.0 + clip_eps_high)
    pg_loss_tokens = torch.max(pg_losses, pg_losses2)
    loss_tokens = pg_loss_tokens
    kl_tokens = kl_weight = None
    per_row = torch.is_tensor(kl_coef)
    if per_row:
        kl_coef = kl_coef.to(device=logprobs.device, dtype=logprobs.dtype).flatten()
        if kl_coef.numel() != logprobs.shape[0]:
            raise ValueError(f"kl_coef has {kl_coef.numel()} values for {logprobs.shape[0]} responses")
    if (bool((kl_coef > 0).any()) if per_row else kl_coef > 0):
        if ref_logprobs is None:
            raise ValueError("kl_coef > 0 needs reference logprobs (ref_logprobs)")
        kl_tokens = k3_kl(logprobs, ref_logprobs)
        kl_weight = kl_coef[:, None] if per_row else kl_coef
        loss_tokens = loss_tokens + kl_weight * kl_tokens
    loss = aggregate(loss_tokens, mask, aggregation)
    with torch.no_grad():
        stats = {
            "pg_loss": float(aggregate(pg_loss_tokens, mask, aggregation)),
            # A token is clipped when the clipped branch is the active (larger) one.
            "clipfrac": float(masked_mean((pg_losses2 > pg_losses).float(), mask)),
            "clipfrac_low": float(masked_mean(((ratio < 1.0 - clip_eps_low) & (advantages < 0)).float(), mask)),
            "clipfrac_high": float(masked_mean(((ratio > 1.0 + clip_eps_high) & (advantages > 0)).float(), mask)),
            # http://joschu.net/blog/kl-approx.html k3 of the update (old -> new)
            "approx_kl": float(masked_mean((ratio - 1.0) - logratio, mask)),
            "ratio_mean": float(masked_mean(ratio, mask)),
        }
        if kl_tokens is not None:
            stats["kl_ref"] = float(masked_mean(kl_tokens, mask))
            # The KL part of the loss as aggregated (what the weights really added).
            stats["kl_loss"] = float(aggregate(kl_weight * kl_tokens, mask, aggregation))
        if per_row:
            stats["kl_coef_mean"] = float(kl_coef.mean())
    return loss, stats


# ------------------------------------------------------------------ reading the reward step's output

# Components whose per-token values are located by construction (the token SynCode/
# the parser rejected; the tokens under a Ruff span) vs components that spread a
# score over all code tokens and locate only some failures (the line that raised in
# the simulator/tests): for those only their diagnostics' token ranges count.
DENSE_FROM_VALUES = ("syntax", "lint")


def sample_outputs(reward_outputs: RewardBatch, n: int) -> list[dict[str, ComponentOutput]]:
    """Per sample: {component name: its ComponentOutput} from the assembler's RewardBatch."""
    return [{name: outs[i] for name, outs in reward_outputs.outputs.items()} for i in range(n)]


def attributable_token_rewards(reward_outputs: RewardBatch, names: Sequence[str], n: int, length: int) -> torch.Tensor:
    """(N, T) weighted sum of the precisely attributable parts of the components in `names`."""
    out = torch.zeros((n, length), dtype=torch.float32)
    outputs, weights = reward_outputs.outputs, reward_outputs.weights
    for name in names:
        w = float(weights.get(name, 0.0))
        if name not in outputs or w == 0.0:
            continue
        for i, comp in enumerate(outputs[name]):
            if name in DENSE_FROM_VALUES:
                vals = torch.as_tensor(comp.values, dtype=torch.float32)[:length]
                out[i, : len(vals)] += w * vals
                continue
            for d in comp.diagnostics or []:
                tokens, value = d.get("tokens"), d.get("value")
                if tokens is None or value is None:
                    continue
                a, b = int(tokens[0]), min(int(tokens[1]), length)
                if b > a:
                    out[i, a:b] += w * float(value)
    return out


def outcome_of(outputs: Mapping[str, ComponentOutput]) -> float | None:
    """The task's verifiable outcome in [0, 1]: the mean `ComponentOutput.outcome` of the components that give
    one (the tests' pass rate, a simulator's success rate, any component's own), or None if none does."""
    found = [o.outcome for o in outputs.values() if o.outcome is not None]
    return float(np.mean(found)) if found else None


def sequence_rewards(batch, how: str = "outcome",
                     outputs: Sequence[Mapping[str, ComponentOutput]] | None = None) -> torch.Tensor:
    """r_i: the verifiable outcome ("outcome"), or from the per-token totals: "sum" or "mean".

    outcome (MicroCoder's group advantage): `outcome_of` each sample's component
    outputs; a sample without one is an error (the reward has no tests/sim
    component to judge it). Dense components put a value on every code token,
    so their "sum" grows with the response length and a GRPO on it learns "write
    more"; the per-token "mean" is length-neutral but still prefers a terse
    answer when credit lands on code tokens only. A batch without per-token
    rewards uses `batch.sequence_rewards` for "sum"/"mean".
    """
    if how == "outcome":
        if outputs is None:
            outputs = sample_outputs(batch.reward_outputs, len(batch.responses))
        values = [outcome_of(o) for o in outputs]
        missing = [k for k, v in enumerate(values) if v is None]
        if missing:
            raise ValueError(
                f"algo.grpo.sequence_reward=outcome: {len(missing)} of {len(values)} responses have no verifiable "
                "outcome (no reward component gave one: ComponentOutput.outcome, e.g. the tests' pass rate or a "
                "simulator's success rate); enable the tests/sim component or use sequence_reward mean or sum")
        return torch.tensor(values, dtype=torch.float32)
    if how not in SEQUENCE_REWARDS:
        raise ValueError(f"algo.grpo.sequence_reward must be one of {SEQUENCE_REWARDS}, got {how!r}")
    if batch.rewards is None:
        return batch.sequence_rewards.float().cpu()
    mask = batch.response_mask.float()
    total = (batch.rewards.float() * mask).sum(dim=1)
    if how == "sum":
        return total.cpu()
    return (total / mask.sum(dim=1).clamp(min=1.0)).cpu()


def group_order(prompt_index: torch.Tensor, group_size: int) -> torch.Tensor:
    """A permutation putting the rows group by group (stable), checking every group has G rows."""
    prompt_index = torch.as_tensor(prompt_index).flatten().cpu()
    order = torch.sort(prompt_index, stable=True).indices
    _, counts = torch.unique(prompt_index, return_counts=True)
    if (counts != group_size).any():
        raise ValueError(f"GRPO needs {group_size} responses per prompt; got group sizes {counts.tolist()}")
    return order


# ------------------------------------------------------------------ the trainer's strategy object


@dataclass
class GRPOAlgorithm(Algorithm):
    """MicroCoder-GRPO as the trainer's `Algorithm` (densecode.rl.protocols): no value head.

    compute_advantages: sequence rewards → group advantages → truncation masking
    → (optional) dense token term; records diversity and lets the temperature
    controller choose the next step's temperature. loss: clip-higher surrogate.
    Its settings are `algo.grpo` as they are (`cfg`, densecode.config.GRPOConfig: declared once).
    """

    cfg: GRPOConfig = field(default_factory=GRPOConfig)
    temperature: float = 1.0  # generation.temperature: the fixed temperature when there is no schedule
    controller: TemperatureController | None = None  # algo.grpo.temperature_schedule (from_config builds one)
    diversity_edit_distance: bool = True  # log diversity/edit_distance too (O(G²) edit distances a group)
    seed: int = 0
    eps: float = 1e-6

    name = "grpo"
    needs_value_head = False

    def __post_init__(self) -> None:
        check_choices(self.cfg, "algo.grpo.")
        if self.cfg.group_size < 2:
            raise ValueError("algo.grpo.group_size must be >= 2 (group-relative advantages need a group)")
        if self.cfg.num_iterations < 1:
            raise ValueError("algo.grpo.num_iterations must be >= 1")
        self._generator = torch.Generator().manual_seed(int(self.seed) + 7919)

    # What the trainer reads of any algorithm (densecode.rl.protocols.Algorithm), from the config.
    @property
    def samples_per_prompt(self) -> int:
        return self.cfg.group_size

    @property
    def epochs(self) -> int:
        return self.cfg.num_iterations

    @property
    def kl_coef(self) -> float:
        return self.cfg.beta

    @property
    def allows_reward_kl(self) -> bool:
        return self.cfg.allow_reward_kl  # MicroCoder: beta = 0, no KL in the reward either

    @property
    def needs_reference(self) -> bool:
        """The trainer scores ref logprobs for the k3 loss term only when it is on (a task source's per-sample
        coefficients, `kl_loss_coefs`, turn it on through the trainer)."""
        return self.cfg.beta > 0

    @classmethod
    def from_config(cls, algo_cfg, gen_cfg, seed: int = 0) -> GRPOAlgorithm:
        g = algo_cfg.grpo
        try:
            # A one-stage schedule is a fixed temperature.
            controller = TemperatureController.from_config(dataclasses.asdict(g.temperature_schedule))
            if g.repetition_test == "paper" and 2 * g.repetition_window > gen_cfg.max_new_tokens:
                warnings.warn(
                    f"algo.grpo.repetition_window={g.repetition_window} with generation.max_new_tokens="
                    f"{gen_cfg.max_new_tokens}: the paper's repetition test compares the last {g.repetition_window} "
                    f"tokens with the {g.repetition_window} before them, so no response can be repetitive; set "
                    f"repetition_window <= {gen_cfg.max_new_tokens // 2}", UserWarning, stacklevel=2)
            return cls(g, temperature=gen_cfg.temperature, controller=controller, seed=seed)
        except (ValueError, TypeError) as exc:
            raise DensecodeError(f"GRPO settings (algo.grpo.*): {exc}") from None

    def sampling_temperature(self, step: int) -> float:
        return self.controller.temperature_for_step(step) if self.controller is not None else self.temperature

    def verdicts(self, outputs: dict[str, ComponentOutput]) -> dict[str, ComponentOutput]:
        """The outputs of the verdict components (algo.grpo.verdict_components; null = all)."""
        names = self.cfg.verdict_components
        return outputs if names is None else {k: v for k, v in outputs.items() if k in names}

    @torch.no_grad()
    def compute_advantages(self, batch) -> dict[str, float]:
        from densecode.rl.diversity import rollout_diversity

        g = self.cfg
        mask = batch.response_mask
        n, length = mask.shape
        G = g.group_size
        # Work in group-by-group order; write results back in the batch's own order.
        order = group_order(batch.prompt_index, G)
        outputs = sample_outputs(batch.reward_outputs, n)
        rewards = sequence_rewards(batch, g.sequence_reward, outputs)

        ga = group_advantages(rewards[order], G, self.eps)
        seq_adv = torch.empty(n)
        seq_adv[order] = ga.advantages

        truncated = torch.tensor(batch.truncated, dtype=torch.bool)
        reasons = self.incorrect_reasons(batch, outputs, truncated.tolist())
        incorrect = torch.tensor([r is not None for r in reasons], dtype=torch.bool)
        token_ids = [r.token_ids for r in batch.responses]
        repetitive = torch.tensor([bool(t) and is_repetitive(ids, g.repetition_window, g.repetition_test)
                                   for t, ids in zip(truncated.tolist(), token_ids)], dtype=torch.bool)
        uniform = torch.rand(n, generator=self._generator)
        tm = truncation_mask(truncated, incorrect, repetitive, uniform, g.truncation_masking, g.truncation_rho)
        for reason in ("finished_wrong", "error_before_cut", "any_verdict"):
            tm.counts[f"truncated_incorrect_{reason}"] = sum(r == reason for r in reasons)
        seq_adv = torch.where(tm.masked, torch.zeros_like(seq_adv), seq_adv)
        if g.negative_scale != 1.0:
            seq_adv = torch.where(seq_adv < 0, seq_adv * float(g.negative_scale), seq_adv)

        advantages = seq_adv[:, None].expand(n, length).clone()
        stats: dict[str, float] = {}
        if g.dense:
            c = attributable_token_rewards(batch.reward_outputs, g.dense_components, n, length)
            d = torch.empty(n, length)
            d[order] = dense_token_term(c[order], mask.cpu()[order], G, self.eps)
            # A masked (truncated, maybe right) sample gets no token signal either.
            d = d * (~tm.masked).float()[:, None]
            advantages = advantages + g.dense_scale * d
            stats["grpo/dense_term_abs_mean"] = float(masked_mean(d.abs(), mask.cpu()))
        if g.credit in FINDINGS_SPREAD:
            findings = findings_token_rewards(batch.reward_outputs, n, length, FINDINGS_SPREAD[g.credit])
            term, term_stats = credit_term(g.credit, findings, batch.prompt_index.cpu(), mask.cpu().float())
            # Into the group advantage's units: over the sd of r_i minus its group's mean (what ga divides by).
            centred = rewards[order].view(-1, G) - rewards[order].view(-1, G).mean(dim=1, keepdim=True)
            spread = float(centred.std(unbiased=False))
            term = term / (spread if spread > self.eps else 1.0)
            term = term * (~tm.masked).float()[:, None]  # a masked sample gets no token signal either
            advantages = advantages + g.dense_scale * term
            stats.update({f"grpo/{k}": v for k, v in term_stats.items()})
            stats["grpo/credit_term_abs_mean"] = float(masked_mean(term.abs(), mask.cpu()))
        batch.advantages = (advantages * mask.cpu()).to(mask.device)
        batch.returns = None

        div = rollout_diversity([token_ids[i] for i in order.tolist()], G, edit=self.diversity_edit_distance)
        # Share of outputs whose code does not parse (ComponentOutput.parsed: the temperature's step-down signal).
        parsed = [[o.parsed for o in outs.values() if o.parsed is not None] for outs in outputs]
        parsed = [float(all(p)) for p in parsed if p]
        unparsable = 1.0 - float(np.mean(parsed)) if parsed else None
        if unparsable is not None:
            stats["grpo/unparsable_frac"] = unparsable
        if self.controller is not None:
            n_changes = len(self.controller.changes)
            self.controller.update(div.get(self.controller.metric, float("nan")), unparsable=unparsable)
            stats["grpo/temperature_changes"] = float(len(self.controller.changes) - n_changes)
        group_rewards = rewards[order].view(-1, G)
        stats.update({
            "grpo/responses": float(n),
            "grpo/reward_mean": float(rewards.mean()),
            "grpo/reward_std_in_group": float(ga.group_std.mean()),
            "grpo/zero_std_groups": float(ga.zero_std_groups),
            "grpo/zero_std_frac": float(ga.zero_std_groups) / max(1, group_rewards.shape[0]),
            "grpo/advantages_abs_mean": float(masked_mean(advantages.abs(), mask.cpu())),
            "grpo/temperature": float(batch.temperature),
            **{f"grpo/{k}": float(v) for k, v in tm.counts.items()},
            **{f"diversity/{k}": float(v) for k, v in div.items()},
        })
        if self.controller is not None:
            stats["grpo/next_temperature"] = float(self.controller.temperature)
            if self.controller.history:  # empty right after a stage change
                stats["diversity/level"] = self.controller.level()
                stats["diversity/trend"] = self.controller.trend()
        return stats

    def incorrect_reasons(self, batch, outputs: list[dict[str, ComponentOutput]],
                          truncated: list[bool]) -> list[str | None]:
        """Per response: why it counts as judged incorrect for the masking rule (None = no evidence).

        Only truncated responses need a verdict (nothing else is masked).
        cut_proof: `judged_incorrect_despite_cut` on the reward step's samples;
        any_verdict: any verdict component's whole-response verdict ("any_verdict").
        """
        out: list[str | None] = [None] * len(truncated)
        samples = batch.samples or []
        for i, cut in enumerate(truncated):
            if not cut:
                continue
            verdicts = self.verdicts(outputs[i])
            if self.cfg.truncation_evidence == "any_verdict":
                out[i] = "any_verdict" if judged_incorrect(verdicts) else None
            elif i < len(samples):
                out[i] = judged_incorrect_despite_cut(samples[i], verdicts)
            else:
                raise ValueError("truncation_evidence=cut_proof needs the reward step's samples (batch.samples)")
        return out

    def loss(self, mb, out) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        loss, stats = grpo_policy_loss(
            out.logprobs, mb.logprobs, mb.advantages, mb.response_mask,
            clip_eps_low=self.cfg.clip_eps, clip_eps_high=self.cfg.clip_eps_high,
            aggregation=self.cfg.loss_aggregation, ref_logprobs=mb.ref_logprobs,
            # Per-sample weights from the task source (a multi-task run's beta_k per sample), else algo.grpo.beta.
            kl_coef=mb.kl_coefs if mb.kl_coefs is not None else self.cfg.beta,
        )
        if out.entropy is not None:
            stats["entropy"] = float(masked_mean(out.entropy.detach(), mb.response_mask))
        return loss, {f"grpo/{k}": torch.tensor(v) for k, v in stats.items()}

    def signal_rows(self, mb) -> tuple[torch.Tensor, float] | None:
        # A row whose advantages are all 0 adds 0 to the clipped surrogate and so no gradient, unless a k3 KL
        # term (beta, or a task source's per-sample coefficients) gives it one.
        if self.cfg.beta or mb.kl_coefs is not None:
            return None
        mask = mb.response_mask
        rows = ((mb.advantages * mask) != 0).any(dim=1)
        if self.cfg.loss_aggregation == "token":  # a token mean: the kept rows' share of the tokens
            share = float(mask[rows].sum() / mask.sum().clamp(min=1.0))
        else:  # a mean over the responses that have tokens: the kept rows' share of those
            has_tokens = mask.sum(dim=1) > 0
            share = float((rows & has_tokens).sum() / has_tokens.sum().clamp(min=1))
        return rows, share

    def state_dict(self) -> dict:
        # JSON-able (the trainer writes it into trainer_state.json).
        state: dict[str, Any] = {"generator": self._generator.get_state().tolist()}
        if self.controller is not None:
            state["controller"] = self.controller.state_dict()
        return state

    def load_state_dict(self, state: dict) -> None:
        if "generator" in state:
            self._generator.set_state(torch.tensor(state["generator"], dtype=torch.uint8))
        if self.controller is not None and "controller" in state:
            self.controller.load_state_dict(state["controller"])
