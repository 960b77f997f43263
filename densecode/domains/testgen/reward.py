"""`testgen`: the token reward of a test-writing response, put on the assert that earned or lost it.

For each statement of the response (in order; see judge.py):
- an assert that fails (or raises) on the reference, or is outside the test language -> `fail_penalty` on its tokens;
- a holding assert -> `coverage_weight` x its coverage gain (the share of the reference's coverable lines and
  branch arcs it is the first to cover) + `kill_weight` x its kill gain (the share of live mutants it is the first
  to kill), on its tokens;
- statements that are not asserts, and asserts past `max_asserts`, get nothing;
- a response with no assert at all -> `fail_penalty` on its last token.
With `spread: split` (the default) an assert's value is divided over its tokens, so the response's sum is
coverage_weight x coverage + kill_weight x mutation score + fail_penalty x (failing asserts); `each` puts it on
every token; `last` is `split` here (every value is located on an assert). Syntax errors are left to the `syntax`
component (a line that parses nowhere is skipped here).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from densecode.domains.testgen.judge import JudgeOptions, judge
from densecode.rewards.base import ComponentOutput, RewardComponent, check_spread, diag, spread_over
from densecode.rewards.sample import Sample


def response_code(sample: Sample) -> tuple[str, int]:
    """(the code the response wrote, its offset in the response): the first code region, or the whole response."""
    if sample.region_mode == "fenced" and sample.code_regions:
        start, end = sample.code_regions[0]
        return sample.response[start:end], start
    return sample.response, 0


class TestgenComponent(RewardComponent):
    name = "testgen"
    __test__ = False  # not a pytest class

    def __init__(self, sandbox: Any = None, fail_penalty: float = -0.5, coverage_weight: float = 1.0,
                 kill_weight: float = 0.5, spread: str = "split", max_asserts: int = 12, max_mutants: int = 10,
                 step_budget: int = 100000, timeout: float = 10.0) -> None:
        self.pool = sandbox
        self.spread = check_spread("testgen", spread)
        self.fail_penalty = float(fail_penalty)
        self.coverage_weight = float(coverage_weight)
        self.kill_weight = float(kill_weight)
        self.opts = JudgeOptions(max_asserts=int(max_asserts), max_mutants=int(max_mutants),
                                 step_budget=int(step_budget), timeout_s=float(timeout))

    def __call__(self, samples: list[Sample]) -> list[ComponentOutput]:
        outs: list[ComponentOutput | None] = [None] * len(samples)
        idx, tasks, texts, offsets = [], [], [], []
        for i, s in enumerate(samples):
            if not s.task.get("reference") or not s.task.get("entry_point"):
                outs[i] = ComponentOutput.zeros(s, has_task=0.0)
                continue
            text, offset = response_code(s)
            idx.append(i)
            tasks.append(s.task)
            texts.append(text)
            offsets.append(offset)
        if idx:
            reports = judge(tasks, texts, self.pool, self.opts)
            for i, offset, report in zip(idx, offsets, reports):
                outs[i] = self.score(samples[i], report, offset)
        return outs  # type: ignore[return-value]

    def score(self, sample: Sample, report, offset: int = 0) -> ComponentOutput:
        values = np.zeros(sample.n_tokens, dtype=np.float32)
        records = []
        n_tests = 0
        for v in report.asserts:
            span = (v.span[0] + offset, v.span[1] + offset)
            tokens = sample.tokens_in_range(*span)
            if v.status in ("fails", "rejected", "unjudged"):
                n_tests += 1
                value = self.fail_penalty
            elif v.status == "holds":
                n_tests += 1
                value = self.coverage_weight * v.coverage_gain + self.kill_weight * v.kill_gain
            else:
                records.append(diag(f"testgen_{v.status}", span, tokens, v.message, 0.0))
                continue
            if tokens and value:
                spread_over(values, tokens, value, self.spread)
            records.append(diag(f"testgen_{v.status}", span, tokens, v.message, value,
                                coverage_gain=round(v.coverage_gain, 4), kill_gain=round(v.kill_gain, 4)))
        if n_tests == 0 and sample.n_tokens:
            values[-1] += self.fail_penalty
            records.append(diag("testgen_no_asserts", None, [sample.n_tokens - 1],
                                report.error or "no assert statement in the response", self.fail_penalty))
        cov = report.coverage
        target = float(sample.task.get("target_coverage", 1.0))
        info = {"coverage": cov.total if cov else 0.0, "line_coverage": cov.line if cov else 0.0,
                "branch_coverage": cov.branch if cov else 0.0, "mutation_score": report.mutation_score,
                "n_asserts": float(n_tests), "hold_rate": report.n_holding / n_tests if n_tests else 0.0,
                "success": float(report.outcome(target) == "success"), "judge_error": float(bool(report.error)),
                "has_task": 1.0,
                # The task's verifiable outcome (GRPO's `sequence_reward: outcome`): the coverage its holding asserts
                # reach, the domain's score.
                "outcome": cov.total if cov else 0.0}
        return ComponentOutput(values, records, info, outcome=info["outcome"])
