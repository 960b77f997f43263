"""Judge programs on RoboEval tasks the way CodeBotler's evaluator does (or with its accidents fixed).

Every program runs in densecode's sandbox once per state of its task (1 s by
default), with a robot object whose world lives in this trusted process
(`world.RoboEvalWorld`). Outcome per (program, state), most severe first:

- `parse_error` / `python_error`: the program (after the semantics' rewrite)
  does not parse, or raised an exception that is not the robot's;
- `robot_error`: an uncaught robot exception (CodeBotler's `Robot...Error`
  messages, whichever exception type carries them);
- `timeout`: ran past the time limit in a state not marked `timeout`
  (CodeBotler: "program should not timeout", an execution error);
- `check_failure` / `success`: the task's test on the trace. A state marked
  `timeout: True` expects a program that runs until stopped: its partial trace
  is judged. The test gets the trace as CodeBotler builds it: in `codebotler`
  semantics parsed back from the program's stdout (a line that is not a trace
  line ends it; of a killed program, only what the harness had read), in
  `fixed` semantics recorded by the simulator.

The report follows the paper: per-prompt pass@1 over n samples, successes out
of the number of prompts, and the breakdown Python error / robot-execution
error / task failure / success.
"""

from __future__ import annotations

import ast
import re
from typing import Any, Callable

from densecode.errors import DensecodeError
from densecode.eval.roboeval.loader import RoboEvalSuite, RoboEvalTask
from densecode.eval.roboeval.rtl import SPECIAL_DELIM, TraceElement
from densecode.eval.roboeval.semantics import BRIDGE, Semantics, candidate_code, get_semantics, visible_stdout_bytes
from densecode.eval.roboeval.world import RoboEvalHandler
from densecode.simulators.robosim import as_program
from densecode.simulators.runner import SEVERITY, RunResult, SimJob, run_jobs

TABLE = ("python_error", "robot_error", "task_failure", "success")
ROBOT_ERROR_RE = re.compile(r"Robot\w*Error")
MAX_VALUE2_CHARS = 100_000  # a trace line's options field longer than this is not read back


def table_class(outcome: str, timeout_class: str = "robot_error") -> str:
    """The paper's 4 columns: parse errors count as Python errors; an unexpected timeout is an execution error
    in CodeBotler (densecode's own robotics suite passes timeout_class="task_failure")."""
    return {"parse_error": "python_error", "python_error": "python_error", "robot_error": "robot_error",
            "timeout": timeout_class, "check_failure": "task_failure"}.get(outcome, "success")


def trace_from_stdout(stdout: str) -> list[TraceElement]:
    """CodeBotler's reading of a run's stdout: one element per `name /$@!/ value1 /$@!/ value2` line, up to the
    first line that is not one (a program's own print() usually is not). value2 is read as a Python literal."""
    lines = stdout.strip().split("\n")
    out: list[TraceElement] = []
    if not lines[0]:
        return out
    for line in lines:
        fields = line.split(SPECIAL_DELIM)
        if len(fields) != 3:
            break
        raw = fields[2].strip()
        if len(raw) > MAX_VALUE2_CHARS:
            break
        try:
            value2 = ast.literal_eval(raw)  # CodeBotler eval()s it; only literals are read back here
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            break
        out.append(TraceElement(fields[0].strip(), fields[1].strip(), value2))
    return out


def run_test(test: Callable, elements: list[TraceElement]) -> tuple[bool, str]:
    """The task's verdict on a trace, CodeBotler's way: anything but a bool True fails."""
    try:
        verdict = test(elements)
    except Exception as exc:  # noqa: BLE001 - a test that crashes on an odd trace fails the state
        return False, f"test raised {type(exc).__name__}: {exc}"
    if not isinstance(verdict, bool):
        return False, f"test returned {type(verdict).__name__}, not bool"
    return verdict, "task test"


class RoboEvalJudge:
    """Classifies one sandboxed run (the runner's hook) under the chosen semantics."""

    def __init__(self, semantics: Semantics, timeout_s: float, line_offset: int):
        self.semantics = semantics
        self.timeout_s = timeout_s
        self.line_offset = line_offset

    def _line(self, line: int | None) -> int | None:
        return line - self.line_offset if isinstance(line, int) and line > self.line_offset else None

    def __call__(self, result: Any, job: SimJob) -> RunResult:
        handler: RoboEvalHandler | None = result.handler
        out = RunResult(outcome="success", n_calls=result.n_calls, duration_s=result.duration_s,
                        sim_s=handler.sim_s if handler else 0.0, stdout=(result.stdout or "")[-2000:])
        kind = result.outcome
        if kind == "python_error" and result.exc_type == "SystemExit" and (result.exc_message or "") in ("", "0", "None"):
            kind = "ok"  # exit() / sys.exit(0): the process ends with status 0, which CodeBotler judges as a finished run
        if kind in ("python_error", "api_error", "memory", "output_limit", "sandbox_violation"):
            message = f"{result.exc_type or kind}: {result.exc_message or ''}"
            robot = kind == "api_error" or bool(ROBOT_ERROR_RE.search(message))
            out.outcome = "robot_error" if robot else "python_error"
            out.error = {"kind": "robot" if robot else "python", "type": result.exc_type or kind,
                         "message": result.exc_message or kind, "line": self._line(result.error_line)}
            return out
        timed_out = kind in ("timeout", "call_limit")
        if timed_out and not job.expects_timeout:
            out.outcome = "timeout"
            out.error = {"kind": "timeout", "type": kind, "message": "program should not timeout",
                         "line": self._line(handler.last_line if handler else None)}
            return out
        if kind not in ("ok", "timeout", "call_limit"):
            out.outcome = "python_error"
            out.error = {"kind": "python", "type": kind, "message": result.exc_message or kind,
                         "line": self._line(result.error_line)}
            return out
        if self.semantics.prints_end_trace:
            stdout = result.stdout or ""
            if timed_out:  # the harness killed it: it had read only this much
                stdout = stdout.encode("utf-8", "replace")[: visible_stdout_bytes(self.timeout_s)].decode(
                    "utf-8", "ignore")
            elements = trace_from_stdout(stdout)
        else:
            elements = [TraceElement(*item) for item in (handler.trace_items() if handler else [])]
        out.trace = [el.to_list() for el in elements]
        ok, what = run_test(job.meta, elements)
        out.checks = [[what, ok]]
        out.progress = 1.0 if ok else 0.0
        out.outcome = "success" if ok else "check_failure"
        return out


def state_jobs(program: str, task: RoboEvalTask, semantics: Semantics, timeout_s: float) -> tuple[list[SimJob], int]:
    code, call, offset = candidate_code(as_program(program), semantics, timeout_s)
    jobs = []
    for test in task.tests:
        jobs.append(SimJob(code, [BRIDGE], handler_factory=lambda state=test["state"]: RoboEvalHandler(state),
                           expects_timeout=test["timeout"], call=call, meta=test["test"]))
    return jobs, offset


def evaluate_roboeval(
    suite: RoboEvalSuite | list[RoboEvalTask],
    completions: dict[str, list[str]],
    semantics: str | Semantics | None = None,
    pool: Any = None,
    timeout_s: float = 1.0,
    max_calls: int = 100000,
    progress: bool = False,
) -> dict:
    """Judge `completions[key]` (n programs or bodies per prompt key, see `roboeval_prompts`) on every
    state of their task. `semantics` defaults to the suite's (the one its files were loaded with)."""
    tasks = suite.tasks if isinstance(suite, RoboEvalSuite) else list(suite)
    sem = get_semantics(semantics or (suite.semantics if isinstance(suite, RoboEvalSuite) else "codebotler"))
    by_key = {t.key(i): (t, i) for t in tasks for i in range(len(t.prompts))}
    unknown = sorted(set(completions) - set(by_key))
    if unknown:
        raise DensecodeError(f"completions for unknown RoboEval prompts {unknown[:5]}; keys look like 'TaskName/0'")
    jobs, owner, offset = [], [], 1
    for key, programs in completions.items():
        task, _ = by_key[key]
        for s, program in enumerate(programs):
            state_list, offset = state_jobs(program, task, sem, timeout_s)
            jobs += state_list
            owner += [(key, s)] * len(state_list)
    judge = RoboEvalJudge(sem, timeout_s, offset)
    results = run_jobs(jobs, pool=pool, timeout_s=timeout_s, max_calls=max_calls, progress=progress, classify=judge)
    samples: dict[tuple[str, int], list[RunResult]] = {}
    for (key, s), res in zip(owner, results):
        if res.outcome == "parse_error" and res.error and res.error.get("line"):
            res.error["line"] = judge._line(res.error["line"])
        samples.setdefault((key, s), []).append(res)
    per_prompt = []
    for key, programs in completions.items():
        task, index = by_key[key]
        outcomes = []
        for s in range(len(programs)):
            runs = samples.get((key, s), [])
            worst = min(runs, key=lambda r: SEVERITY[r.outcome]) if runs else None
            outcomes.append({"outcome": worst.outcome if worst else "success", "error": worst.error if worst else None,
                             "states": [r.outcome for r in runs]})
        n = len(outcomes)
        successes = sum(o["outcome"] == "success" for o in outcomes)
        per_prompt.append({
            "key": key, "task": task.name, "prompt_index": index, "n": n,
            "pass@1": successes / n if n else 0.0,
            "breakdown": {c: sum(table_class(o["outcome"]) == c for o in outcomes) for c in TABLE},
            "samples": outcomes,
        })
    n_prompts = len(per_prompt)
    table = {c: sum(p["breakdown"][c] / p["n"] for p in per_prompt if p["n"]) for c in TABLE}
    return {
        "semantics": sem.name,
        "n_prompts": n_prompts,
        "n_tasks": len({p["task"] for p in per_prompt}),
        "samples_per_prompt": max((p["n"] for p in per_prompt), default=0),
        "pass@1": sum(p["pass@1"] for p in per_prompt) / n_prompts if n_prompts else 0.0,
        "successes": table["success"],  # out of n_prompts (expected count when n > 1)
        "breakdown": table,  # python_error / robot_error / task_failure / success, summing to n_prompts
        "outcomes": {o: sum(s["outcome"] == o for p in per_prompt for s in p["samples"]) for o in SEVERITY},
        "per_prompt": per_prompt,
    }


def format_report(report: dict) -> str:
    """The paper-style table as text."""
    b = report["breakdown"]
    lines = [
        f"RoboEval ({report.get('semantics', 'codebotler')} semantics): {report['n_tasks']} tasks, "
        f"{report['n_prompts']} prompts, {report['samples_per_prompt']} sample(s) each",
        f"pass@1 {report['pass@1']:.3f}; successes {b['success']:.1f} / {report['n_prompts']}",
        "| Python error | robot-execution error | task failure | success |",
        "|---|---|---|---|",
        f"| {b['python_error']:.1f} | {b['robot_error']:.1f} | {b['task_failure']:.1f} | {b['success']:.1f} |",
    ]
    return "\n".join(lines)
