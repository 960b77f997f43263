"""`RoboSimBackend`: the `sim` reward component's simulator (densecode.rewards).

For each (program, task) it runs the program in the task's worlds in the
sandbox and returns a `SimFeedback`:

- score in [0, 1] on the code tokens. Dynamic worlds (the reference's
  behaviour): clean runs / runs. Concrete worlds with checks: per run 0 on an
  error or unexpected timeout, 1 on success, else `clean_credit +
  check_credit * (1 - clean_credit) * share of checks passed`; averaged over
  runs (check_credit < 1 makes success worth more than partial progress). (The sim component turns a 0
  into its fail value, -0.1 by default.)
- line_penalties: each error's penalty (`error_penalty` / runs, summed over
  runs that failed on that line) on the program line that raised it: Python
  errors at their line, robot errors at the offending call, syntax errors at
  their line, runaway loops at the last call they made.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from densecode.errors import DensecodeError
from densecode.rewards.base import SimFeedback
from densecode_robosim.evaluation import as_program, task_dict
from densecode_robosim.runner import RunResult, run_programs, world_runs


def _reason(err: dict) -> str:
    kind = err.get("kind")
    if kind == "robot":
        return f"robot error in {err.get('call')}: {err.get('message')}"
    if kind == "timeout":
        return f"timeout: {err.get('message')}"
    return f"{err.get('type')}: {err.get('message')}"


class RoboSimBackend:
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
        self.mode = mode
        self.n_runs = n_runs
        self.clean_credit = clean_credit
        self.check_credit = check_credit
        self.error_penalty = error_penalty
        self.timeout_s = timeout_s
        self.max_calls = max_calls
        self.seed = seed
        self.pool = pool

    def runs_for(self, task: dict):
        try:
            return world_runs(task, mode=self.mode, n_dynamic=self.n_runs, seed=self.seed)
        except (ValueError, KeyError, TypeError) as exc:
            raise DensecodeError(
                f"robotics task {task.get('task_id', '?')!r} cannot be simulated: {exc}; give it 'worlds' "
                "or a 'dynamic' spec like {\"rooms\": [\"kitchen\", \"lobby\"]}"
            ) from None

    def evaluate(self, programs: list[str], tasks: list[dict]) -> list[SimFeedback]:
        jobs, owner = [], []
        for i, (program, task) in enumerate(zip(programs, tasks)):
            for run in self.runs_for(task_dict(task)):
                jobs.append((as_program(program), run))
                owner.append(i)
        results = run_programs(jobs, pool=self.pool, timeout_s=self.timeout_s, max_calls=self.max_calls)
        grouped: list[list[RunResult]] = [[] for _ in programs]
        for i, res in zip(owner, results):
            grouped[i].append(res)
        return [self.feedback(runs) for runs in grouped]

    def feedback(self, runs: list[RunResult]) -> SimFeedback:
        n = max(len(runs), 1)
        scores = []
        for r in runs:
            if not r.clean:
                scores.append(0.0)
            elif r.checks and r.outcome == "success":
                scores.append(1.0)
            elif r.checks:
                scores.append(self.clean_credit + self.check_credit * (1.0 - self.clean_credit) * r.check_fraction)
            else:
                scores.append(1.0)
        penalties: dict[tuple[int, str], float] = defaultdict(float)
        for r in runs:
            if r.error and r.error.get("line"):
                weight = 1.0 if r.outcome == "parse_error" else 1.0 / n
                penalties[(int(r.error["line"]), _reason(r.error))] += self.error_penalty * weight
        if any(r.outcome == "parse_error" for r in runs):  # one syntax error, reported once
            penalties = {k: max(v, self.error_penalty) for k, v in penalties.items()}
        info = {
            "runs": len(runs),
            "clean_runs": sum(r.clean for r in runs),
            "successes": sum(r.outcome == "success" for r in runs),
            "robot_errors": sum(r.outcome == "robot_error" for r in runs),
            "python_errors": sum(r.outcome in ("python_error", "parse_error") for r in runs),
            "timeouts": sum(r.outcome == "timeout" for r in runs),
            "sim_s": sum(r.sim_s for r in runs),
        }
        return SimFeedback(
            score=sum(scores) / n,
            line_penalties=[(line, value, reason) for (line, reason), value in sorted(penalties.items())],
            info=info,
        )
