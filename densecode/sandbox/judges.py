"""Judges: plan the sandbox runs a job needs, then assemble its JudgeResult from what they returned.

Planning turns an AssertJob / FunctionCallJob / StdioJob into `Unit`s (payloads for the child) and
an `assemble` step; the pool runs the units; assembling decides the verdict here, in the trusted
parent, on plain data the child cannot fake (see `asserts.py`, `plain.py`).
"""

from __future__ import annotations

import collections
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass

from densecode.sandbox.asserts import bound_names, evaluate_check, split_test
from densecode.sandbox.compare import compare_stdout, outputs_match
from densecode.sandbox.jobs import AssertJob, FunctionCallJob, JudgeResult, StdioJob
from densecode.sandbox.plain import EncodeError, decode, encode
from densecode.sandbox.runs import (
    Unit,
    base_outcome,
    decode_status,
    error_fields,
    first_error,
    parse_records,
)

SEVERITY = {"passed": 0, "wrong_answer": 1, "runtime_error": 2, "memory": 3, "timeout": 3, "output_limit": 3, "sandbox_violation": 4}
REFERENCE_CACHE_SIZE = 4096  # FunctionCallJob reference outputs kept per pool (by reference, entry point, inputs)

# new_unit(payload, timeout_s, stdin=None, on_record=None) -> Unit: the pool's factory (it numbers the units).
NewUnit = Callable[..., Unit]


@dataclass
class JudgePlan:
    """The units one job needs, and how to turn their results into its JudgeResult once they have run."""

    units: list[Unit]
    assemble: Callable[[], JudgeResult]


class JudgePlanner:
    """Plans jobs for one pool; holds the pool's cache of reference-solution outputs."""

    def __init__(self, new_unit: NewUnit, default_timeout_s: Callable[[], float]):
        self.new_unit = new_unit
        self.default_timeout_s = default_timeout_s
        self.reference_cache: collections.OrderedDict = collections.OrderedDict()

    def plan(self, job) -> JudgePlan:
        if isinstance(job, AssertJob):
            return self.plan_assert(job)
        if isinstance(job, FunctionCallJob):
            return self.plan_call(job)
        if isinstance(job, StdioJob):
            return self.plan_stdio(job)
        raise TypeError(f"SandboxPool.run: unsupported job type {type(job).__name__}; use run_api for ApiJob")

    def plan_assert(self, job: AssertJob) -> JudgePlan:
        # Names the program binds (e.g. its own `sum`) are the program's in the tests, as in plain Python.
        shadowed = bound_names(job.setup, job.code)
        tests = [split_test(t, shadowed) for t in job.tests]
        probes = [t.probes if t.error is None else [] for t in tests]
        unit = self.new_unit({"mode": "assert", "setup": job.setup, "code": job.code, "probes": probes}, job.timeout_s)
        return JudgePlan([unit], lambda: assemble_assert(tests, unit.result))

    def plan_call(self, job: FunctionCallJob) -> JudgePlan:
        inputs = [encode(list(args)) for args in job.inputs]
        if '"$o"' in json.dumps(inputs):
            raise ValueError(f"FunctionCallJob({job.entry_point!r}): inputs must be plain data "
                             "(str/int/float/bool/None/bytes/complex and list/tuple/set/dict of them)")
        unit = self.new_unit({"mode": "call", "code": job.code, "entry_point": job.entry_point, "inputs": inputs},
                             job.timeout_s)
        if job.expected is not None:
            expected = [("ok", e) for e in job.expected]
            return JudgePlan([unit], lambda: assemble_call(job, expected, unit.result))
        if job.reference is None:
            raise ValueError("FunctionCallJob needs `expected` outputs or a `reference` solution")
        key = hashlib.sha256(json.dumps([job.reference, job.entry_point, inputs]).encode()).hexdigest()
        cached = self.reference_cache.get(key)
        if cached is not None:
            return JudgePlan([unit], lambda: assemble_call(job, cached, unit.result))
        # The reference runs in its own sandbox: the candidate never shares a process with expected values.
        ref_unit = self.new_unit(
            {"mode": "call", "code": job.reference, "entry_point": job.entry_point, "inputs": inputs},
            max(job.timeout_s or self.default_timeout_s(), 10.0),
        )

        def assemble() -> JudgeResult:
            outputs = call_outputs(ref_unit.result, len(inputs))
            self.reference_cache[key] = outputs
            while len(self.reference_cache) > REFERENCE_CACHE_SIZE:
                self.reference_cache.popitem(last=False)
            return assemble_call(job, outputs, unit.result)

        return JudgePlan([unit, ref_unit], assemble)

    def plan_stdio(self, job: StdioJob) -> JudgePlan:
        units = [self.new_unit({"mode": "stdio", "code": job.code}, job.timeout_s, stdin=stdin) for stdin, _ in job.cases]
        return JudgePlan(units, lambda: assemble_stdio(job, [u.result for u in units]))


def finish(outcome_hint: str | None, per_test: list[bool], err: dict | None, result: dict, details: dict,
            done: bool, violation: bool) -> JudgeResult:
    fields = error_fields(err)
    if outcome_hint is not None:
        outcome = outcome_hint
    elif violation:
        outcome = "sandbox_violation"
    elif fields["exc_type"] == "MemoryError":
        outcome = "memory"
    elif not done:
        outcome = "runtime_error"
        if fields["exc_type"] is None:
            sig, code = decode_status(result.get("status"))
            fields.update(exc_type="EarlyExit", exc_message=f"program ended before the tests finished ({sig or 'exit ' + str(code)})")
    elif per_test and all(per_test):
        outcome = "passed"
    elif err is not None:
        outcome = "runtime_error"
    else:
        outcome = "wrong_answer"
    if outcome == "passed" and not per_test:
        outcome = "wrong_answer"  # no test ran: nothing was shown to be correct
    return JudgeResult(
        outcome=outcome,
        per_test=per_test,
        n_passed=sum(per_test),
        n_tests=len(per_test),
        stdout=result.get("stdout", ""),
        stderr=result.get("stderr", ""),
        duration_s=float(result.get("duration_s", 0.0)),
        details=details,
        **fields,
    )


def assemble_assert(tests: list, result: dict) -> JudgeResult:
    records, violation = parse_records(result)
    hint, details = base_outcome(result)
    values: dict[tuple, object] = {}
    errors: dict[int, dict] = {}
    for rec in records:
        i, j = rec.get("i"), rec.get("j")
        if rec["t"] == "probe" and (i, j) not in values and (i, j) not in errors:
            try:
                values[(i, j)] = decode(rec.get("v"))
            except (EncodeError, TypeError, ValueError, RecursionError, KeyError, IndexError):
                violation = True
        elif rec["t"] == "probe_error" and isinstance(i, int):
            errors.setdefault(i, rec)
    per_test = []
    test_errors = {}
    for i, test in enumerate(tests):
        if test.error is not None or i in errors:
            per_test.append(False)
            if test.error is not None:
                test_errors[i] = test.error
            continue
        if isinstance(test.probes, str):
            per_test.append((i, 0) in values)
            continue
        if any((i, j) not in values for j in range(len(test.probes))):
            per_test.append(False)
            continue
        try:
            per_test.append(evaluate_check(test, [values[(i, j)] for j in range(len(test.probes))]))
        except Exception as exc:  # noqa: BLE001 - e.g. comparing a non-plain value: the test failed
            per_test.append(False)
            test_errors[i] = f"{type(exc).__name__}: {exc}"[:300]
    if test_errors:
        details["test_errors"] = test_errors
    code_err = first_error(records, ("code_error",))
    if code_err is not None:
        per_test = [False] * len(per_test)  # the program crashed on load: no test ran
    err = code_err or (errors[min(errors)] if errors else None)
    done = any(r["t"] == "done" for r in records)
    setup_err = first_error(records, ("setup_error",))
    if setup_err:
        details["setup_error"] = f"{setup_err.get('exc_type')}: {setup_err.get('exc_message')}"
    return finish(hint, per_test, err, result, details, done, violation)


def call_outputs(result: dict, n: int) -> list[tuple[str, object]]:
    """Worker result of a 'call' run -> per input ("ok", value) or ("error", text)."""
    records, _ = parse_records(result)
    outs: list[tuple[str, object]] = [("error", "no output")] * n
    for rec in records:
        i = rec.get("i")
        if not isinstance(i, int) or not 0 <= i < n or outs[i][0] == "ok":
            continue
        if rec["t"] == "out":
            try:
                outs[i] = ("ok", decode(rec.get("v")))
            except (EncodeError, TypeError, ValueError, RecursionError):
                outs[i] = ("error", "malformed output")
        elif rec["t"] == "out_error":
            outs[i] = ("error", f"{rec.get('exc_type')}: {rec.get('exc_message')}")
    return outs


def assemble_call(job: FunctionCallJob, expected: list, result: dict) -> JudgeResult:
    records, violation = parse_records(result)
    hint, details = base_outcome(result)
    outs = call_outputs(result, len(job.inputs))
    per_test = []
    ref_errors = []
    for i, ((ok_o, out), (ok_e, exp)) in enumerate(zip(outs, expected)):
        if ok_e != "ok":
            ref_errors.append(i)
            per_test.append(False)
        else:
            per_test.append(ok_o == "ok" and outputs_match(out, exp, job.atol))
    if ref_errors:
        details["reference_errors"] = ref_errors
    err = first_error(records, ("code_error",)) or first_error(records, ("out_error",))
    done = any(r["t"] == "done" for r in records)
    return finish(hint, per_test, err, result, details, done, violation)


def assemble_stdio(job: StdioJob, results: list[dict]) -> JudgeResult:
    per_test, methods, fallthrough = [], [], {}
    worst: JudgeResult | None = None
    for i, ((_, expected), result) in enumerate(zip(job.cases, results)):
        records, violation = parse_records(result)
        hint, details = base_outcome(result)
        err = first_error(records, ("code_error",))
        done = any(r["t"] == "done" for r in records)
        ok, method, errors = (False, None, {})
        if hint is None and err is None and done and not violation:
            ok, method, errors = compare_stdout(result.get("stdout", ""), expected, job.rtol, job.atol)
        if errors:
            fallthrough[i] = errors
        per_test.append(ok)
        methods.append(method)
        case = finish(hint, [ok], err, result, details, done, violation)
        if worst is None or SEVERITY[case.outcome] > SEVERITY[worst.outcome]:
            worst = case
    if worst is None:
        return JudgeResult("wrong_answer", [], 0, 0, details={"methods": []})
    details = dict(worst.details)
    details["methods"] = methods
    if fallthrough:
        details["comparator_errors"] = fallthrough
    worst.details = details
    worst.per_test = per_test
    worst.n_passed = sum(per_test)
    worst.n_tests = len(per_test)
    worst.duration_s = sum(float(r.get("duration_s", 0.0)) for r in results)
    if worst.outcome == "passed" and not all(per_test):
        worst.outcome = "wrong_answer"
    return worst
