"""Run robot programs in the sandbox against RoboSim worlds and classify the runs.

The untrusted program runs in densecode's sandbox; its eight robot API names
are bound there as plain functions whose calls come back to this (trusted)
process, where `RoboSimHandler` forwards each one as one `RoboSimEnv.step`. The
program text is never rewritten.

Outcome of one (program, world) run, most severe first:
`parse_error`, `python_error` (type, message, line), `robot_error` (call, why,
line), `timeout` (unexpected: the world does not expect the program to run
forever), `check_failure`, `success`. A world marked `timeout: True` expects a
program that never ends ("keep checking until ..."): there a timeout or the
call budget running out is normal and the partial trace is judged.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

from densecode.simulators.backend import (
    parse_error,  # shared with the generic gym plug-in backend
)
from densecode_robosim.env import END, RoboSimEnv
from densecode_robosim.world import API_NAMES

OUTCOMES = ("parse_error", "python_error", "robot_error", "timeout", "check_failure", "success")
SEVERITY = {name: i for i, name in enumerate(OUTCOMES)}  # lower = worse


@dataclass
class WorldRun:
    """One world to run a program in: a concrete world dict or `{"dynamic": spec}`."""

    world: dict
    checks: list[dict] = field(default_factory=list)
    timeout: bool = False  # True: the program is expected to run until stopped
    seed: int = 0


@dataclass
class RunResult:
    outcome: str
    error: dict | None = None  # {"kind": python|robot|timeout|parse, "type"|"call", "message", "line"}
    trace: list[list] = field(default_factory=list)  # [name, value1, value2] per traced call
    trace_lines: list[int | None] = field(default_factory=list)  # program line of each traced call
    checks: list[list] = field(default_factory=list)  # [description, passed]
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


class RoboSimHandler:
    """The trusted side of the API bridge: one robot API call = one env.step."""

    def __init__(self, run: WorldRun, env: RoboSimEnv | None = None):
        self.env = env or RoboSimEnv()
        self.env.reset(seed=run.seed, options={"world": run.world, "checks": run.checks})
        self.trace_lines: list[int | None] = []
        self.error: dict | None = None
        self.sim_s = 0.0
        self.n_calls = 0
        self.last_line: int | None = None  # line of the latest call (points into a runaway loop)

    def handle(self, name: str, args: list, kwargs: dict, line: int | None) -> Any:
        from densecode.sandbox import ApiError

        start = time.perf_counter()
        self.n_calls += 1
        if line is not None:
            self.last_line = line
        world = self.env.world
        before = len(world.trace)
        _, _, _, _, info = self.env.step({"name": name, "args": args, "kwargs": kwargs})
        result = self.env.last_result
        self.trace_lines += [line] * (len(world.trace) - before)
        self.sim_s += time.perf_counter() - start
        if info["error"]:
            self.error = {"kind": "robot", "call": info["error"]["call"], "message": info["error"]["message"], "line": line}
            raise ApiError(f"{info['error']['call']}: {info['error']['message']}")
        return result

    def finish(self) -> list[list]:
        """Judge the checks on the trace so far (ends the episode)."""
        start = time.perf_counter()
        if self.env.done:
            from densecode_robosim.checks import judge

            world = self.env.world
            verdicts = judge(self.env.checks, world.trace, world, world.start)
        else:
            _, _, _, _, info = self.env.step({"name": END})
            verdicts = info["checks"]
        self.sim_s += time.perf_counter() - start
        return [[text, bool(ok)] for text, ok in verdicts]


_CRASHES = {"memory": "MemoryError", "output_limit": "OutputLimitExceeded", "sandbox_violation": "SandboxViolation"}


def classify(result: Any, run: WorldRun, handler: RoboSimHandler | None) -> RunResult:
    """A RunResult from the sandbox's ApiRunResult and the handler that served it."""
    trace = [el.to_list() for el in handler.env.world.trace] if handler else []
    out = RunResult(
        outcome="success",
        trace=trace,
        trace_lines=list(handler.trace_lines) if handler else [],
        n_calls=result.n_calls,
        duration_s=result.duration_s,
        sim_s=handler.sim_s if handler else 0.0,
        stdout=(result.stdout or "")[-2000:],
    )
    kind = result.outcome
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
    if kind in ("timeout", "call_limit") and not run.timeout:
        last_line = handler.last_line if handler else None
        why = "ran past its time limit" if kind == "timeout" else "made too many robot calls"
        out.outcome = "timeout"
        out.error = {"kind": "timeout", "type": kind, "message": why, "line": last_line}
        return out
    if kind not in ("ok", "timeout", "call_limit"):
        out.outcome = "python_error"
        out.error = {"kind": "python", "type": kind, "message": result.exc_message or kind, "line": result.error_line}
        return out
    out.checks = handler.finish() if handler else []
    out.outcome = "success" if all(ok for _, ok in out.checks) else "check_failure"
    return out


def run_programs(
    jobs: list[tuple[str, WorldRun]],
    pool: Any = None,
    timeout_s: float = 1.0,
    max_calls: int = 200,
    progress: bool = False,
) -> list[RunResult]:
    """Run each (program, world) pair in the sandbox; results in input order.

    `pool` is a densecode sandbox pool (`run_api(list[ApiJob])`); None uses the
    shared default pool. `max_calls` (200) is far above what any generated task
    needs (< 60 calls) and ends "keep checking" loops early: the call budget
    running out counts as the timeout it stands for.
    """
    from densecode.sandbox import ApiJob

    results: list[RunResult | None] = [None] * len(jobs)
    api_jobs, index = [], []
    parse_cache: dict[str, dict | None] = {}
    for i, (program, run) in enumerate(jobs):
        if program not in parse_cache:
            parse_cache[program] = parse_error(program)
        err = parse_cache[program]
        if err is not None:
            results[i] = RunResult(outcome="parse_error", error=err)
            continue
        api_jobs.append(
            ApiJob(
                code=program,
                api_names=list(API_NAMES),
                handler_factory=lambda run=run: RoboSimHandler(run),
                call="task_program()",
                timeout_s=timeout_s,
                max_calls=max_calls,
            )
        )
        index.append(i)
    if api_jobs:
        pool = pool if pool is not None else default_pool()
        for i, res in zip(index, pool.run_api(api_jobs, progress=progress)):
            results[i] = classify(res, jobs[i][1], res.handler)
    return results  # type: ignore[return-value]


def default_pool():
    """The sandbox's shared process-wide pool."""
    from densecode.sandbox import get_default_pool

    return get_default_pool()


def world_runs(task: dict, mode: str = "auto", n_dynamic: int = 5, seed: int = 0) -> list[WorldRun]:
    """The runs a task asks for. mode: "concrete" (its worlds), "dynamic" (n_dynamic
    seeded angelic worlds), or "auto" (concrete when the task has worlds)."""
    worlds = task.get("worlds") or []
    common = task.get("checks") or []
    if mode == "concrete" or (mode == "auto" and worlds):
        if not worlds:
            raise ValueError(f"task {task.get('task_id')!r} has no concrete worlds")
        return [
            WorldRun(world=w["state"], checks=common + list(w.get("checks", [])), timeout=bool(w.get("timeout")), seed=seed)
            for w in worlds
        ]
    spec = task.get("dynamic")
    if not spec:
        if not worlds:
            raise ValueError(f"task {task.get('task_id')!r} has neither worlds nor a dynamic-world spec")
        spec = {"rooms": worlds[0]["state"]["rooms"], "robot": worlds[0]["state"].get("robot")}
    expects_timeout = bool(spec.get("expects_timeout"))
    return [WorldRun(world={"dynamic": spec}, checks=[], timeout=expects_timeout, seed=seed + k) for k in range(n_dynamic)]
