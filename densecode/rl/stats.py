"""Per-step diagnostics of a rollout batch, logged by the trainer (rollout/*, objective/kl*, reward/kl_share)."""

from __future__ import annotations

import time
from contextlib import contextmanager

import numpy as np
import torch

from densecode.rl.tensors import masked_mean
from densecode.rl.rollout import RolloutBatch


def rollout_stats(batch: RolloutBatch) -> dict[str, float]:
    """The batch's rollout diagnostics: lengths, truncation, KL to the reference, grammar, outcome, per-reward."""
    mask = batch.response_mask
    lengths = mask.sum(-1)
    stats = {
        "rollout/response_length": float(lengths.mean()),
        "rollout/truncated_frac": float(np.mean(batch.truncated)),
        "rollout/eos_frac": float(np.mean([r.finish_reason == "eos" for r in batch.responses])),
        "rollout/temperature": batch.temperature,
    }
    if batch.ref_logprobs is not None:
        kl_tok = (batch.logprobs - batch.ref_logprobs) * mask
        stats["objective/kl"] = float(kl_tok.sum(-1).mean())  # k1 sequence KL
        stats["objective/kl_token_mean"] = float(masked_mean(kl_tok, mask))
    if batch.grammar_verdicts is not None:
        checked = (batch.grammar_verdicts != 0).float() * mask
        rejected = (batch.grammar_verdicts < 0).float() * mask
        stats["rollout/grammar_violation_rate"] = float(rejected.sum() / checked.sum().clamp(min=1))
        stats["rollout/grammar_violating_samples"] = float((rejected.sum(-1) > 0).float().mean())
    rb = batch.reward_outputs
    stats.update(outcome_stats(batch))
    comps = {k: v.sum(-1).abs() for k, v in (batch.components or {}).items()}
    if "kl" in comps:
        # How much of the batch's reward the KL penalty is (1 = the task has no say any more).
        total = sum(v.sum() for v in comps.values())
        stats["reward/kl_share"] = float(comps["kl"].sum() / total) if float(total) > 0 else 0.0
    stats.update(rb.component_metrics)  # each component's own (RewardComponent.metrics)
    return stats


def per_token_algo_arrays(batch: RolloutBatch) -> dict[str, list[np.ndarray]]:
    """The optimiser's per-token view of each sample (for credit diagnostics, densecode.eval.credit): the value
    predictions at rollout time, the GAE returns, and the advantages the loss used (PPO: whitened over the batch
    when algo.ppo.whiten_advantages; raw advantages = returns - values). Only what this algorithm computed."""
    lengths = batch.response_mask.sum(-1).long().tolist()
    out: dict[str, list[np.ndarray]] = {}
    for name, t in (("values", batch.values), ("returns", batch.returns), ("advantages", batch.advantages)):
        if isinstance(t, torch.Tensor) and t.dim() == 2:
            rows = t.detach().float().cpu().numpy()
            out[name] = [rows[i, :n] for i, n in enumerate(lengths)]
    return out


def outcome_stats(batch: RolloutBatch) -> dict[str, float]:
    """The rollouts' task success (the verifiable outcome), executability (no runtime/robot error) and, with
    several responses per prompt, the share of prompts that carry no group signal (all pass / all fail); from
    the components' typed verdicts (ComponentOutput.outcome / ran_cleanly)."""
    from densecode.rl.credit import no_signal_share
    from densecode.rl.grpo import outcome_of, sample_outputs

    n = len(batch.responses)
    outputs = sample_outputs(batch.reward_outputs, n)
    outcomes = [outcome_of(o) for o in outputs]
    stats: dict[str, float] = {}
    if n and all(o is not None for o in outcomes):
        t = torch.tensor(outcomes, dtype=torch.float32)
        stats["rollout/task_success"] = float((t >= 1.0).float().mean())
        stats["rollout/outcome_mean"] = float(t.mean())
        if len(set(batch.prompt_index.tolist())) < n:
            all_pass, all_fail = no_signal_share(t, batch.prompt_index.cpu())
            stats["rollout/all_pass_prompts"] = all_pass
            stats["rollout/all_fail_prompts"] = all_fail
            stats["rollout/no_signal_prompts"] = all_pass + all_fail
    ran = [[o.ran_cleanly for o in outs.values() if o.ran_cleanly is not None] for outs in outputs]
    if n and all(ran):  # every sample ran somewhere (tests, a simulator)
        stats["rollout/executability"] = float(np.mean([all(r) for r in ran]))
    return stats


def reward_stats(batch: RolloutBatch) -> dict[str, float]:
    """The reward function's own scalars, and each sequence's summed reward (total and per component)."""
    stats = {k: float(v) for k, v in batch.reward_outputs.stats.items() if isinstance(v, (int, float))}
    stats["reward/sequence_mean"] = float(batch.sequence_rewards.mean())
    stats["reward/sequence_std"] = float(batch.sequence_rewards.std()) if batch.size > 1 else 0.0
    for name, vals in batch.components.items():
        stats[f"reward/{name}/sequence_mean"] = float(vals.sum(-1).mean())
    return stats


class RunningMeans:
    """Means of the update's scalars over the micro-batches / minibatches that reported them."""

    def __init__(self):
        self.sums: dict[str, float] = {}
        self.counts: dict[str, int] = {}

    def add(self, key: str, value) -> None:
        self.sums[key] = self.sums.get(key, 0.0) + float(value)
        self.counts[key] = self.counts.get(key, 0) + 1

    def means(self) -> dict[str, float]:
        return {k: self.sums[k] / max(self.counts[k], 1) for k in self.sums}


def mean_over_processes(accelerator, stats: dict[str, float]) -> dict[str, float]:
    """Mean of every scalar over processes (same keys on every process, sorted)."""
    if accelerator.num_processes == 1:
        return stats
    keys = sorted(stats)
    t = torch.tensor([float(stats[k]) for k in keys], dtype=torch.float64, device=accelerator.device)
    t = accelerator.reduce(t, reduction="mean")
    return dict(zip(keys, t.tolist()))


@contextmanager
def phase_timer(stats: dict, name: str):
    """time/<name>_s (wall) and time/<name>_cpu_s (this process's CPU time, all its threads; not the sandbox's
    processes) of the block: on a shared machine the CPU-time split moves far less with the load."""
    t0, c0 = time.perf_counter(), time.process_time()
    yield
    stats[f"time/{name}_s"] = time.perf_counter() - t0
    stats[f"time/{name}_cpu_s"] = time.process_time() - c0
