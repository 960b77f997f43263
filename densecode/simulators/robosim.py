"""RoboSim through the one runner: its API handler, world runs, `RoboSimBackend`, and task evaluation.

`densecode_robosim` is a pure gymnasium package (worlds, checks, the generated
task suite); this module is what runs untrusted programs against it. Each
robot API call the sandboxed program makes comes back here as one
`RoboSimEnv.step`; a robot error ends the run (training-time semantics; the
RoboEval evaluator in `densecode.eval.roboeval` reproduces CodeBotler's).

    from densecode.simulators import RoboSimBackend, evaluate, summarize
    feedback = RoboSimBackend().evaluate(programs, tasks)      # the sim reward
    outcomes = evaluate(programs, tasks)                       # one RoboOutcome per (program, task) pair
    print(summarize(outcomes))                                 # parses / no python error / no robot error / success

A program passes a task when every world of the task ends in `success`; its
outcome is the most severe outcome over the task's worlds.

`RoboSimBackend` score on concrete worlds with checks: per run 0 on an error or
an unexpected timeout, 1 on success, else `clean_credit + check_credit *
(1 - clean_credit) * share of checks passed`; dynamic worlds (no checks): clean
runs / runs. Line penalties as in `backend.feedback`.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any

from densecode.errors import DensecodeError
from densecode.simulators.backend import ProgramBackend
from densecode.simulators.runner import OUTCOMES, SEVERITY, RunResult, SimJob, Verdict, run_jobs
from densecode_robosim.checks import judge
from densecode_robosim.env import END, RoboSimEnv
from densecode_robosim.tasks import PROGRAM_HEADER, RoboTask
from densecode_robosim.world import API_NAMES

_HEADER_RE = re.compile(r"^def task_program\(", re.MULTILINE)


def as_program(text: str) -> str:
    """A full program: `text` itself when it defines task_program, else header + body."""
    return text if _HEADER_RE.search(text) else PROGRAM_HEADER + text


def task_dict(task: Any) -> dict:
    return task.to_dict() if isinstance(task, RoboTask) else dict(task)


@dataclass
class WorldRun:
    """One world to run a program in: a concrete world dict or `{"dynamic": spec}`."""

    world: dict
    checks: list[dict] = field(default_factory=list)
    timeout: bool = False  # True: the program is expected to run until stopped
    seed: int = 0


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

    def trace_items(self) -> list[list]:
        return [el.to_list() for el in self.env.world.trace]

    def finish(self) -> Verdict:
        """Judge the checks on the trace so far (ends the episode)."""
        start = time.perf_counter()
        if self.env.done:
            world = self.env.world
            verdicts = judge(self.env.checks, world.trace, world, world.start)
        else:
            _, _, _, _, info = self.env.step({"name": END})
            verdicts = info["checks"]
        self.sim_s += time.perf_counter() - start
        checks = [[text, bool(ok)] for text, ok in verdicts]
        progress = sum(ok for _, ok in checks) / len(checks) if checks else 1.0
        return Verdict(success=all(ok for _, ok in checks), progress=progress, checks=checks)


def robosim_job(program: str, run: WorldRun) -> SimJob:
    return SimJob(program, list(API_NAMES), handler_factory=lambda: RoboSimHandler(run), expects_timeout=run.timeout)


def run_programs(jobs: list[tuple[str, WorldRun]], pool: Any = None, timeout_s: float = 1.0, max_calls: int = 200,
                 progress: bool = False) -> list[RunResult]:
    """Run each (program, world) pair in the sandbox; results in input order.

    `max_calls` (200) is far above what any generated task needs (< 60 calls)
    and ends "keep checking" loops early: the call budget running out counts
    as the timeout it stands for.
    """
    return run_jobs([robosim_job(p, run) for p, run in jobs], pool=pool, timeout_s=timeout_s, max_calls=max_calls,
                    progress=progress)


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


class RoboSimBackend(ProgramBackend):
    """The `sim` reward's backend for RoboSim tasks (the robotics training default)."""

    def __init__(
        self,
        mode: str = "auto",
        n_runs: int = 5,
        clean_credit: float = 0.25,
        check_credit: float = 1.0,
        error_penalty: float = -1.0,
        timeout_s: float = 1.0,
        max_calls: int = 200,
        seed: int = 0,
        pool: Any = None,
    ):
        if mode not in ("auto", "concrete", "dynamic"):
            raise DensecodeError(f"RoboSimBackend mode must be auto, concrete or dynamic; got {mode!r}")
        super().__init__(clean_credit=clean_credit, check_credit=check_credit, error_penalty=error_penalty,
                         timeout_s=timeout_s, max_calls=max_calls, pool=pool)
        self.mode = mode
        self.n_runs = n_runs
        self.seed = seed

    def runs_for(self, task: dict) -> list[WorldRun]:
        try:
            return world_runs(task, mode=self.mode, n_dynamic=self.n_runs, seed=self.seed)
        except (ValueError, KeyError, TypeError) as exc:
            raise DensecodeError(
                f"robotics task {task.get('task_id', '?')!r} cannot be simulated: {exc}; give it 'worlds' "
                "or a 'dynamic' spec like {\"rooms\": [\"kitchen\", \"lobby\"]}"
            ) from None

    def jobs_for(self, program: str, task: Any) -> list[SimJob | RunResult]:
        return [robosim_job(as_program(program), run) for run in self.runs_for(task_dict(task))]


# ------------------------------------------------------------------ evaluation on generated tasks


@dataclass
class RoboOutcome:
    task_id: str
    outcome: str  # one of OUTCOMES: the most severe over the task's worlds
    error: dict | None = None  # the error of the most severe run
    runs: list[RunResult] = field(default_factory=list)

    @property
    def success(self) -> bool:
        return self.outcome == "success"

    def to_dict(self) -> dict:
        return {"task_id": self.task_id, "outcome": self.outcome, "error": self.error,
                "runs": [r.to_dict() for r in self.runs]}


class RoboOutcomes(list):
    """A list of RoboOutcome with `.summary()` (the aggregate metrics)."""

    def summary(self) -> dict:
        return summarize(self)


def combine(task_id: str, runs: list[RunResult]) -> RoboOutcome:
    worst = min(runs, key=lambda r: SEVERITY[r.outcome]) if runs else None
    if worst is None:
        return RoboOutcome(task_id, "check_failure", None, [])
    return RoboOutcome(task_id, worst.outcome, worst.error, runs)


def evaluate(
    programs: list[str],
    tasks: list[Any],
    mode: str = "auto",
    n_dynamic: int = 5,
    pool: Any = None,
    timeout_s: float = 1.0,
    max_calls: int = 200,
    seed: int = 0,
) -> RoboOutcomes:
    """Judge programs[i] on tasks[i] (full programs or bodies) in the sandbox."""
    if len(programs) != len(tasks):
        raise ValueError(f"{len(programs)} programs for {len(tasks)} tasks; pass one program per task")
    jobs, owner = [], []
    for i, (program, task) in enumerate(zip(programs, tasks)):
        try:
            runs = world_runs(task_dict(task), mode=mode, n_dynamic=n_dynamic, seed=seed)
        except ValueError as exc:
            raise DensecodeError(f"cannot evaluate on this robotics task: {exc}") from None
        for run in runs:
            jobs.append((as_program(program), run))
            owner.append(i)
    results = run_programs(jobs, pool=pool, timeout_s=timeout_s, max_calls=max_calls)
    per_task: list[list[RunResult]] = [[] for _ in programs]
    for i, res in zip(owner, results):
        per_task[i].append(res)
    return RoboOutcomes(
        combine(str(task_dict(t).get("task_id", i)), runs) for i, (t, runs) in enumerate(zip(tasks, per_task))
    )


def summarize(outcomes: list[RoboOutcome]) -> dict:
    """Cumulative rates (each implies the one before) and the outcome breakdown."""
    n = len(outcomes)
    counts = {name: sum(o.outcome == name for o in outcomes) for name in OUTCOMES}
    parses = n - counts["parse_error"]
    no_python = parses - counts["python_error"]
    no_robot = no_python - counts["robot_error"]
    rate = (lambda k: k / n) if n else (lambda k: 0.0)
    return {
        "n": n,
        "parses": rate(parses),
        "no_python_error": rate(no_python),
        "no_robot_error": rate(no_robot),
        "success": rate(counts["success"]),
        "breakdown": counts,
    }
