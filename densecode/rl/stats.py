"""Per-step diagnostics of a rollout batch, logged by the trainer (rollout/*, objective/kl*, reward/kl_share)."""

from __future__ import annotations

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
