"""Run programs in the sandbox against a simulator and classify each run.

The one runner for every simulator (RoboSim, any gymnasium plug-in): the
untrusted program runs in densecode's sandbox with the simulator's API names
bound there as plain functions; each call comes back to this (trusted)
process, where a handler (`SimHandler`) turns it into one simulator step and
returns the result. The program text is never rewritten.

Outcome of one (program, world) run, most severe first:
`simulator_error` (the simulator itself failed: its constructor, `reset` or
`step` raised, or the binding does not fit its real outputs; never the
program's fault, so never charged to it), `parse_error`, `python_error` (type, message, line), `robot_error` (call, why,
line), `timeout` (unexpected: the world does not expect the program to run
forever), `check_failure`, `success`. A world that expects a program that never
ends ("keep checking until ...") treats a timeout or the call budget running
out as normal, and the partial run is judged.
"""

from __future__ import annotations

import ast
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Protocol

OUTCOMES = ("simulator_error", "parse_error", "python_error", "robot_error", "timeout", "check_failure", "success")
SEVERITY = {name: i for i, name in enumerate(OUTCOMES)}  # lower = worse


@dataclass
class Verdict:
    """What a handler judges once the program has returned (or was stopped as expected)."""

    success: bool
    progress: float = 1.0  # share of the task done, in [0, 1] (partial credit for the sim reward)
    checks: list[list] = field(default_factory=list)  # [description, passed] when the simulator has named checks


class SimHandler(Protocol):
    """The trusted side of the API bridge for one run."""

    error: dict | None  # {"kind": "robot", "call", "message", "line"} of the call that failed, if any
    # Optional: {"kind": "simulator", "where", "type", "message", "traceback"} when the simulator failed (a bug in
    # it or in its binding); the run is then a `simulator_error` whatever the program did.
    # simulator_error: dict | None
    last_line: int | None  # program line of the latest call (points into a runaway loop)
    sim_s: float  # seconds spent in the simulator

    def handle(self, name: str, args: list, kwargs: dict, line: int | None) -> Any: ...

    def finish(self) -> Verdict: ...

    def trace_items(self) -> list[list]: ...


@dataclass
class RunResult:
    outcome: str
    error: dict | None = None  # {"kind": python|robot|timeout|parse, "type"|"call", "message", "line"}
    trace: list[list] = field(default_factory=list)  # one entry per traced call (simulator-specific shape)
    trace_lines: list[int | None] = field(default_factory=list)  # program line of each trace entry, when known
    checks: list[list] = field(default_factory=list)  # [description, passed]
    progress: float = 0.0  # the verdict's share of the task done (0 unless judged)
    n_calls: int = 0
    duration_s: float = 0.0  # wall time of the sandboxed run
    sim_s: float = 0.0  # of which spent in the simulator (handler)
    stdout: str = ""

    @property
    def clean(self) -> bool:
        """Ran without an error or an unexpected timeout."""
        return self.outcome in ("success", "check_failure")

    @property
    def check_fraction(self) -> float:
        return sum(ok for _, ok in self.checks) / len(self.checks) if self.checks else 1.0

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class SimJob:
    """One program to run against one fresh simulator instance."""

    program: str
    api_names: list[str]
    handler_factory: Callable[[], SimHandler]
    expects_timeout: bool = False  # True: the program is expected to run until stopped
    call: str = "task_program()"
    meta: Any = None  # anything a custom `classify` needs (e.g. the state's test)


def parse_error(program: str) -> dict | None:
    """The program's syntax error as an error dict, or None (parsing only, nothing runs)."""
    try:
        ast.parse(program)
    except SyntaxError as exc:
        return {"kind": "parse", "type": "SyntaxError", "message": exc.msg or str(exc), "line": exc.lineno}
    except (ValueError, RecursionError, MemoryError) as exc:
        return {"kind": "parse", "type": type(exc).__name__, "message": str(exc), "line": None}
    return None


_CRASHES = {"memory": "MemoryError", "output_limit": "OutputLimitExceeded", "sandbox_violation": "SandboxViolation"}


def classify_run(result: Any, job: SimJob) -> RunResult:
    """The default verdict: the runner's outcome classes, the handler's `finish()` on a clean run."""
    return classify(result, job.expects_timeout, result.handler)


def classify(result: Any, expects_timeout: bool, handler: SimHandler | None) -> RunResult:
    """A RunResult from the sandbox's ApiRunResult and the handler that served it."""
    out = RunResult(
        outcome="success",
        trace=handler.trace_items() if handler else [],
        trace_lines=list(getattr(handler, "trace_lines", []) or []) if handler else [],
        n_calls=result.n_calls,
        duration_s=result.duration_s,
        sim_s=handler.sim_s if handler else 0.0,
        stdout=(result.stdout or "")[-2000:],
    )
    kind = result.outcome
    sim_error = getattr(handler, "simulator_error", None) if handler is not None else None
    if sim_error is not None:
        out.outcome = "simulator_error"
        out.error = dict(sim_error, line=None)  # no program line is to blame
        return out
    if kind == "api_error":
        if handler is not None and handler.error is not None:
            out.error = handler.error
        else:  # the bridge refused the call itself (e.g. arguments that are not plain data)
            api = result.api_error or {}
            out.error = {"kind": "robot", "call": api.get("name"), "message": api.get("message"), "line": api.get("line")}
        out.outcome = "robot_error"
        return out
    if kind == "python_error" or kind in _CRASHES:
        out.outcome = "python_error"
        out.error = {
            "kind": "python",
            "type": result.exc_type or _CRASHES.get(kind, "Error"),
            "message": result.exc_message or kind,
            "line": result.error_line,
        }
        return out
    if kind in ("timeout", "call_limit") and not expects_timeout:
        why = "ran past its time limit" if kind == "timeout" else "made too many robot calls"
        out.outcome = "timeout"
        out.error = {"kind": "timeout", "type": kind, "message": why, "line": handler.last_line if handler else None}
        return out
    if kind not in ("ok", "timeout", "call_limit"):
        out.outcome = "python_error"
        out.error = {"kind": "python", "type": kind, "message": result.exc_message or kind, "line": result.error_line}
        return out
    if handler is None:
        out.outcome = "check_failure"
        return out
    verdict = handler.finish()
    out.sim_s = handler.sim_s
    sim_error = getattr(handler, "simulator_error", None)
    if sim_error is not None:  # the simulator failed while judging (e.g. its end action raised)
        out.outcome = "simulator_error"
        out.error = dict(sim_error, line=None)
        return out
    out.checks = [list(c) for c in verdict.checks]
    out.progress = float(verdict.progress)
    out.outcome = "success" if verdict.success else "check_failure"
    return out


def run_jobs(jobs: list[SimJob], pool: Any = None, timeout_s: float = 1.0, max_calls: int = 200,
             progress: bool = False, classify: Callable[[Any, SimJob], RunResult] | None = None) -> list[RunResult]:
    """Run each job in the sandbox; results in input order.

    `pool` is a densecode sandbox pool (`run_api(list[ApiJob])`); None uses the
    shared default pool. Programs that do not parse never reach the sandbox.
    `classify(api_run_result, job)` replaces the default verdict (`classify_run`).
    """
    from densecode.sandbox import ApiJob

    results: list[RunResult | None] = [None] * len(jobs)
    api_jobs, index = [], []
    parse_cache: dict[str, dict | None] = {}
    for i, job in enumerate(jobs):
        if job.program not in parse_cache:
            parse_cache[job.program] = parse_error(job.program)
        err = parse_cache[job.program]
        if err is not None:
            results[i] = RunResult(outcome="parse_error", error=dict(err))
            continue
        api_jobs.append(ApiJob(code=job.program, api_names=list(job.api_names), handler_factory=job.handler_factory,
                               call=job.call, timeout_s=timeout_s, max_calls=max_calls))
        index.append(i)
    if api_jobs:
        pool = pool if pool is not None else default_pool()
        verdict = classify or classify_run
        for i, res in zip(index, pool.run_api(api_jobs, progress=progress)):
            results[i] = verdict(res, jobs[i])
    return results  # type: ignore[return-value]


def default_pool():
    """The sandbox's shared process-wide pool."""
    from densecode.sandbox import get_default_pool

    return get_default_pool()
