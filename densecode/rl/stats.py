"""Per-step diagnostics of a rollout batch, logged by the trainer (rollout/*, objective/kl*, reward/kl_share)."""

from __future__ import annotations

import time
from contextlib import contextmanager

import numpy as np
import torch

from densecode.rl.ppo import masked_mean
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
    outputs = getattr(rb, "outputs", None) or {}
    stats.update(outcome_stats(batch, outputs))
    comps = {k: v.sum(-1).abs() for k, v in (batch.components or {}).items()}
    if "kl" in comps:
        # How much of the batch's reward the KL penalty is (1 = the task has no say any more).
        total = sum(v.sum() for v in comps.values())
        stats["reward/kl_share"] = float(comps["kl"].sum() / total) if float(total) > 0 else 0.0
    if "lint" in outputs:
        stats["rollout/lint_violations_per_sample"] = float(np.mean([len(o.diagnostics) for o in outputs["lint"]]))
    if "tests" in outputs:
        infos = [o.info for o in outputs["tests"] if o.info.get("has_tests", 1.0)]
        if infos:
            stats["rollout/test_pass_rate"] = float(np.mean([i.get("pass_rate", 0.0) for i in infos]))
            stats["rollout/all_tests_passed"] = float(np.mean([i.get("all_passed", 0.0) for i in infos]))
    if "sim" in outputs:
        infos = [o.info for o in outputs["sim"]]
        stats["rollout/sim_score"] = float(np.mean([i.get("sim_score", 0.0) for i in infos]))
        if all("runs" in i and "successes" in i for i in infos):
            stats["rollout/sim_success"] = float(np.mean([i["successes"] / max(i["runs"], 1) for i in infos]))
    if "syntax" in outputs:
        stats["rollout/syntax_error_frac"] = float(
            np.mean([float(np.any(np.asarray(o.values) < 0)) for o in outputs["syntax"]]))
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


def outcome_stats(batch: RolloutBatch, outputs: dict) -> dict[str, float]:
    """The rollouts' task success (the verifiable outcome), executability (no runtime/robot error) and, with
    several responses per prompt, the share of prompts that carry no group signal (all pass / all fail)."""
    from densecode.rl.credit import no_signal_share
    from densecode.rl.grpo import outcome_of, sample_infos

    n = len(batch.responses)
    infos = sample_infos(batch.reward_outputs, n)
    outcomes = [outcome_of(i) for i in infos]
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
    judged = [i for i in infos if any(k in c for c in i.values() for k in ("python_errors", "exception"))]
    if n and len(judged) == n:
        def ran_cleanly(info: dict) -> bool:
            return not any((c.get("python_errors") or 0) > 0 or (c.get("robot_errors") or 0) > 0
                           or (c.get("exception") or 0) > 0 for c in info.values())

        stats["rollout/executability"] = float(np.mean([ran_cleanly(i) for i in judged]))
    return stats


def reward_stats(batch: RolloutBatch) -> dict[str, float]:
    """The reward function's own scalars, and each sequence's summed reward (total and per component)."""
    stats = {k: float(v) for k, v in (batch.reward_outputs.stats or {}).items() if isinstance(v, (int, float))}
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
