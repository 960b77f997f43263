"""Programmatic robotics evaluation: programs × generated tasks → outcome classes and metrics.

    from densecode_robosim import evaluate, summarize, generate_tasks
    tasks = generate_tasks("test")
    outcomes = evaluate(programs, tasks)        # one RoboOutcome per (program, task) pair
    print(summarize(outcomes))                  # parses / no python error / no robot error / success

A program passes a task when every world of the task ends in `success`; its
outcome is the most severe outcome over the task's worlds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from densecode.errors import DensecodeError
from densecode_robosim.runner import OUTCOMES, SEVERITY, RunResult, run_programs, world_runs
from densecode_robosim.tasks import PROGRAM_HEADER, RoboTask

_HEADER_RE = re.compile(r"^def task_program\(", re.MULTILINE)


def as_program(text: str) -> str:
    """A full program: `text` itself when it defines task_program, else header + body."""
    return text if _HEADER_RE.search(text) else PROGRAM_HEADER + text


def task_dict(task: Any) -> dict:
    return task.to_dict() if isinstance(task, RoboTask) else dict(task)


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
