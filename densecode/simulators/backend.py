"""`ProgramBackend`: the `sim` reward component's simulator backend, with the one `feedback()`.

A backend runs each (program, task) pair in one or more worlds (`runs_for`,
simulator-specific) through the one runner (`runner.run_jobs`) and turns the
runs into a `SimFeedback`:

- score in [0, 1] on the code tokens, averaged over runs: 0 for a run that
  ended in an error or an unexpected timeout, 1 for a success, else
  `clean_credit + check_credit * (1 - clean_credit) * progress` (progress =
  share of checks passed, or the simulator's own score). check_credit < 1
  makes success worth more than partial progress. (The sim component turns a 0
  into its fail value, -0.1 by default.)
- line_penalties: each error's penalty on the program line that raised it:
  `error_penalty / runs`, summed over the runs that failed on that line;
  a syntax error (the same in every run) is reported once at `error_penalty`.
  Python errors at their line, robot errors at the offending call, runaway
  loops at the last call they made.
- runs that ended in `simulator_error` (the simulator or its binding failed,
  not the program) are left out of the score and the penalties: the program is
  judged on its other runs, and a program with no other run is not judged at
  all (`info["unjudged"]`: the sim reward puts 0 on its tokens).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from densecode.rewards.base import SimFeedback
from densecode.simulators.runner import RunResult, SimJob, run_jobs


def reason(err: dict) -> str:
    """One line naming what went wrong in a run (shown next to the penalised line)."""
    kind = err.get("kind")
    if kind == "robot":
        return f"robot error in {err.get('call')}: {err.get('message')}"
    if kind == "timeout":
        return f"timeout: {err.get('message')}"
    return f"{err.get('type')}: {err.get('message')}"


def run_score(run: RunResult, clean_credit: float, check_credit: float) -> float:
    if not run.clean:
        return 0.0
    if run.outcome == "success":
        return 1.0
    return clean_credit + check_credit * (1.0 - clean_credit) * run.progress


def feedback(runs: list[RunResult], clean_credit: float = 0.25, check_credit: float = 1.0,
             error_penalty: float = -1.0) -> SimFeedback:
    """The sim reward's feedback for one program from its runs (see the module docstring)."""
    bugs = sum(r.outcome == "simulator_error" for r in runs)
    runs = [r for r in runs if r.outcome != "simulator_error"]
    n = max(len(runs), 1)
    penalties: dict[tuple[int, str], float] = defaultdict(float)
    for r in runs:
        if r.error and r.error.get("line"):
            key = (int(r.error["line"]), reason(r.error))
            if r.outcome == "parse_error":  # one syntax error, reported once
                penalties[key] = error_penalty
            else:
                penalties[key] += error_penalty / n
    info = {
        "runs": len(runs),
        "clean_runs": sum(r.clean for r in runs),
        "successes": sum(r.outcome == "success" for r in runs),
        "robot_errors": sum(r.outcome == "robot_error" for r in runs),
        "python_errors": sum(r.outcome in ("python_error", "parse_error") for r in runs),
        "timeouts": sum(r.outcome == "timeout" for r in runs),
        "sim_s": sum(r.sim_s for r in runs),
    }
    if bugs:  # only when there were any: RoboSim's feedback stays exactly as recorded before plug-ins
        info["simulator_errors"] = bugs
        info["unjudged"] = not runs
    raised = info["python_errors"] > 0 or info["robot_errors"] > 0
    return SimFeedback(
        score=sum(run_score(r, clean_credit, check_credit) for r in runs) / n,
        line_penalties=[(line, value, why) for (line, why), value in sorted(penalties.items())],
        info=info,
        outcome=info["successes"] / len(runs) if runs else None,
        # A clean run that failed the task's checks is as wrong as one that raised; a timeout alone is no verdict.
        incorrect=raised or info["clean_runs"] > info["successes"],
        ran_cleanly=not raised,
        judged=not (bugs and not runs),
    )


class ProgramBackend:
    """Base of the simulator backends: subclasses say which jobs a (program, task) pair needs."""

    def __init__(self, clean_credit: float = 0.25, check_credit: float = 1.0, error_penalty: float = -1.0,
                 timeout_s: float = 1.0, max_calls: int = 200, pool: Any = None):
        self.clean_credit = clean_credit
        self.check_credit = check_credit
        self.error_penalty = error_penalty
        self.timeout_s = timeout_s
        self.max_calls = max_calls
        self.pool = pool

    def jobs_for(self, program: str, task: dict) -> list[SimJob | RunResult]:
        """The runs of one (program, task) pair: jobs to run, or results already known."""
        raise NotImplementedError

    def run(self, programs: list[str], tasks: list[dict]) -> list[list[RunResult]]:
        """Every (program, task) pair's runs, in input order."""
        out: list[list[RunResult]] = [[] for _ in programs]
        jobs, owner = [], []
        for i, (program, task) in enumerate(zip(programs, tasks)):
            for item in self.jobs_for(program, task):
                if isinstance(item, RunResult):
                    out[i].append(item)
                else:
                    jobs.append(item)
                    owner.append(i)
        for i, res in zip(owner, run_jobs(jobs, pool=self.pool, timeout_s=self.timeout_s, max_calls=self.max_calls)):
            out[i].append(res)
        return out

    def evaluate(self, programs: list[str], tasks: list[dict]) -> list[SimFeedback]:
        return [self.feedback(runs) for runs in self.run(programs, tasks)]

    def feedback(self, runs: list[RunResult]) -> SimFeedback:
        return feedback(runs, self.clean_credit, self.check_credit, self.error_penalty)
