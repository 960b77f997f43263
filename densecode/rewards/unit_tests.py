"""`tests`: unit-test feedback from the sandbox, spread where it cannot be located.

Each sample's program (`program_of`) runs in the sandbox against its task's tests:
`task["tests"]` (assert statements, with optional `task["setup"]`, which runs after
the program's definitions and before the asserts, as in `densecode eval`) as an AssertJob,
or `task["entry_point"]` + `task["inputs"]` + `task["expected"]` as a
FunctionCallJob. Then, on code tokens only (prose gets nothing):
- k of n tests pass, k > 0 → k/n on every code token;
- none pass → `fail_penalty` (reference -0.3) on every code token;
- `partial_credit=False`: all n pass → 1, anything less → `fail_penalty` (and outcome 1 or 0). MBPP-style
  prompts show one of the tests, so k/n pays an answer that returns that example's expected value: a
  policy finds it and stops solving (docs/results.md, "SmolLM2-135M-Instruct on MBPP");
- an uncaught exception located in the program (`error_line`, 1-based) → an extra
  `exception_penalty` on that line's tokens (a line inside the prompt prefix
  reaches no token; syntax errors are left to the `syntax` component);
- a response without any code → `fail_penalty` on its last token.
Tasks without tests give zeros (`info["has_tests"] = 0`) and no verdict.
Verdict: outcome = the pass rate (all-or-nothing without partial credit); incorrect unless every test passed; ran_cleanly
unless an exception was raised; errors = the exception's line.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from densecode.errors import DensecodeError
from densecode.rewards.base import (
    ComponentOutput,
    LocatedError,
    RewardComponent,
    check_spread,
    diag,
    is_parse_error,
    spread_over,
    spread_score,
)
from densecode.rewards.sample import Sample, program_of


def _job_classes() -> tuple[type, type]:
    try:
        from densecode.sandbox import AssertJob, FunctionCallJob
    except ImportError as exc:
        raise DensecodeError(f"the tests reward needs densecode.sandbox's AssertJob/FunctionCallJob ({exc})") from None
    return AssertJob, FunctionCallJob


def _make_job(sample: Sample, program: str, timeout: float | None) -> Any:
    task = sample.task
    kw = {} if timeout is None else {"timeout_s": timeout}
    if not task.get("tests") and not (task.get("entry_point") and "inputs" in task):
        return None
    assert_job, call_job = _job_classes()
    if task.get("tests"):
        tests = task["tests"]
        if isinstance(tests, str):
            tests = [tests]
        # MBPP's setup builds fixtures from the candidate's definitions: it runs after them, before the asserts.
        from densecode.sandbox.asserts import program_with_setup

        return assert_job(code=program_with_setup(program, task.get("setup", "") or ""), tests=list(tests), **kw)
    if task.get("entry_point") and "inputs" in task:
        extra = {"atol": float(task["atol"])} if task.get("atol") is not None else {}
        if task.get("expected") is None and task.get("reference"):
            extra["reference"] = task["reference"]  # expected outputs computed from the reference solution
        return call_job(code=program, entry_point=task["entry_point"], inputs=task["inputs"],
                        expected=task.get("expected"), **extra, **kw)
    return None


class TestsComponent(RewardComponent):
    name = "tests"
    __test__ = False  # not a pytest class

    def __init__(self, sandbox: Any = None, fail_penalty: float = -0.3, exception_penalty: float = -1.0,
                 timeout: float | None = None, spread: str = "each", partial_credit: bool = True) -> None:
        self.pool = sandbox
        self.spread = check_spread("tests", spread)
        self.fail_penalty = float(fail_penalty)
        self.exception_penalty = float(exception_penalty)
        self.timeout = timeout
        self.partial_credit = bool(partial_credit)

    def metrics(self, outputs: list[ComponentOutput]) -> dict[str, float]:
        rates = [o.outcome for o in outputs if o.outcome is not None]  # the samples whose task has tests
        if not rates:
            return {}
        return {"rollout/test_pass_rate": float(np.mean(rates)),
                "rollout/all_tests_passed": float(np.mean([r == 1.0 for r in rates]))}

    def _pool(self):
        if self.pool is None:
            try:
                from densecode.sandbox import get_default_pool
            except ImportError as exc:
                raise DensecodeError(f"the tests reward needs densecode.sandbox ({exc})") from None
            self.pool = get_default_pool()
        return self.pool

    def __call__(self, samples: list[Sample]) -> list[ComponentOutput]:
        outs: list[ComponentOutput | None] = [None] * len(samples)
        jobs, where, maps = [], [], []
        for i, s in enumerate(samples):
            program, pmap = program_of(s)
            job = _make_job(s, program, self.timeout)
            if job is None:
                outs[i] = ComponentOutput.zeros(s, has_tests=0.0)
                continue
            jobs.append(job)
            where.append(i)
            maps.append(pmap)
        if jobs:
            results = self._pool().run(jobs)
            if len(results) != len(jobs):
                raise DensecodeError(f"sandbox returned {len(results)} results for {len(jobs)} jobs")
            for i, pmap, res in zip(where, maps, results):
                outs[i] = self.score(samples[i], pmap, res)
        return outs  # type: ignore[return-value]

    def score(self, sample: Sample, pmap, res: Any) -> ComponentOutput:
        values = np.zeros(sample.n_tokens, dtype=np.float32)
        n_tests = int(getattr(res, "n_tests", 0) or 0)
        n_passed = int(getattr(res, "n_passed", 0) or 0)
        rate = n_passed / n_tests if n_tests else 0.0
        score = rate if self.partial_credit else float(n_tests > 0 and n_passed == n_tests)
        base = score if score > 0 else self.fail_penalty
        code = sample.code_token_mask()
        records = []
        outcome = str(getattr(res, "outcome", ""))
        if code.any():
            spread_score(values, code, base, self.spread)
        elif sample.n_tokens:
            values[-1] = self.fail_penalty
        records.append(diag("tests", None, [], f"{n_passed}/{n_tests} tests passed ({outcome})", base,
                            n_passed=n_passed, n_tests=n_tests, outcome=outcome))
        line = getattr(res, "error_line", None)
        exc_type = getattr(res, "exc_type", None)
        # Syntax errors are the syntax component's to punish (they would count twice here).
        errors = []
        if line and self.exception_penalty and exc_type not in ("SyntaxError", "IndentationError", "TabError"):
            rng = pmap.line_to_response(int(line))
            tokens = sample.tokens_in_range(*rng) if rng else []
            if tokens:
                spread_over(values, tokens, self.exception_penalty, self.spread)
                msg = f"{exc_type or 'exception'}: {getattr(res, 'exc_message', '') or ''}".strip()
                records.append(diag(exc_type or "exception", rng, tokens, msg, self.exception_penalty, line=int(line)))
                if self.exception_penalty < 0 and not is_parse_error(f"{exc_type} {msg}"):
                    errors.append(LocatedError((min(tokens), max(tokens) + 1), msg))
        info = {"pass_rate": rate, "all_passed": float(n_tests > 0 and n_passed == n_tests), "has_tests": 1.0,
                "judged_incorrect": float(n_passed < n_tests or n_tests == 0),
                "exception": float(bool(exc_type))}
        return ComponentOutput(values, records, info, outcome=score, incorrect=n_passed < n_tests or n_tests == 0,
                               errors=errors, ran_cleanly=not exc_type)
