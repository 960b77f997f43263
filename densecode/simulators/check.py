"""`densecode check`: does a domain's config hold together before any training? One line per problem.

For any domain: the task source gives task dicts for every split (a generator returning strings, a wrong field
type, a task id in two splits are problems), and every task's `reference` runs through the domain's own judge
(the sandbox and, for a simulator, the simulator) and must succeed.

For a simulator plug-in, also: the env passes gymnasium's env checker; every parameter a binding declares is used
by its action template; the binding's `result` and `error` paths resolve on the env's real step outputs (observed
while the references run); a reference run that made the simulator raise is a simulator bug, reported with the
task id and where in the env's code it raised. Config mistakes found on loading (a misspelt placeholder, an
unimportable module) are errors before this runs.
"""

from __future__ import annotations

import warnings
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from densecode.errors import DensecodeError
from densecode.simulators.binding import (
    MISSING,
    describe_missing,
    extract,
    unused_params,
)
from densecode.simulators.gym_plugin import GymProgramBackend

SPLITS = ("train", "validation", "test")


@dataclass
class CheckReport:
    domain: str
    problems: list[str] = field(default_factory=list)  # each one line; any problem = exit code 2
    notes: list[str] = field(default_factory=list)  # what was checked, warnings that are not failures
    outcomes: dict[str, int] = field(default_factory=dict)  # reference outcomes over every checked task
    n_tasks: int = 0
    tasks: list[dict] = field(default_factory=list)  # the tasks checked (with their prompts)

    @property
    def ok(self) -> bool:
        return not self.problems


class StepRecorder:
    """Watches every real env step of the reference runs: do the binding's paths resolve there?"""

    def __init__(self, backend: GymProgramBackend):
        self.binding = backend.binding
        self.calls: dict[str, int] = defaultdict(int)
        self.missing_result: dict[str, str] = {}  # function -> why its result path did not resolve (first step)
        self.error_resolved = 0
        self.error_missing: str | None = None
        self.steps = 0

    def __call__(self, name: str, step: dict) -> None:
        self.steps += 1
        self.calls[name] += 1
        fn = self.binding.functions[name]
        if fn.result and extract(fn.result, step, missing=MISSING) is MISSING:
            self.missing_result.setdefault(name, describe_missing(fn.result, step))
        if self.binding.error:
            if extract(self.binding.error, step, missing=MISSING) is MISSING:
                self.error_missing = self.error_missing or describe_missing(self.binding.error, step)
            else:
                self.error_resolved += 1


def _draw_tasks(domain: Any, splits: tuple[str, ...], n: int, seed: int, report: CheckReport) -> list[dict]:
    tasks, where_id = [], {}
    for split in splits:
        try:
            drawn = domain.tasks(split, n, seed)
        except DensecodeError as exc:
            report.problems.append(f"tasks ({split}): {exc}")
            continue
        if not drawn:
            report.problems.append(f"tasks ({split}): the task source gave no tasks for split {split!r} (n={n})")
            continue
        seen_here = set()
        for t in drawn:
            tid = str(t.get("task_id"))
            key = tid if t.get("task_id") is not None else id(t)  # JSONL rows are drawn as the same objects
            if key in seen_here:  # a JSONL split smaller than n is drawn with repeats: check each task once
                continue
            seen_here.add(key)
            if t.get("task_id") is not None and tid in where_id and where_id[tid] != split:
                report.problems.append(f"tasks: task id {tid!r} is in both {where_id[tid]!r} and {split!r} "
                                       "(splits must be disjoint; task ids unique)")
            where_id.setdefault(tid, split)
            tasks.append(t)
        report.notes.append(f"tasks ({split}): {len(seen_here)} drawn")
    return tasks


def _env_checker(backend: GymProgramBackend, report: CheckReport) -> None:
    from gymnasium.utils.env_checker import check_env

    try:
        env = backend.env_factory()
    except Exception as exc:  # noqa: BLE001 - the env's own bug
        report.problems.append(f"tasks.simulator {backend.simulator!r}: the constructor raised "
                               f"{type(exc).__name__}: {exc}")
        return
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            # The checker samples actions: seed the spaces so the same env gets the same verdict in every run.
            for space in (getattr(env, "action_space", None), getattr(env, "observation_space", None)):
                if space is not None:
                    space.seed(0)
            check_env(getattr(env, "unwrapped", env), skip_render_check=True)
        except Exception as exc:  # noqa: BLE001 - any failure of the checker is the env's
            report.problems.append(f"tasks.simulator {backend.simulator!r} fails gymnasium's env checker: "
                                   f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
            return
    seen = sorted({str(w.message).splitlines()[0] for w in caught})
    report.notes += [f"env checker warning: {m}" for m in seen]
    report.notes.append("env checker: passed" + (f" with {len(seen)} warning(s)" if seen else ""))


def _binding_problems(backend: GymProgramBackend, rec: StepRecorder, report: CheckReport) -> None:
    b = backend.binding
    for name, fn in b.functions.items():
        for p in unused_params(fn):
            report.problems.append(f"tasks.api.{name}.params: {p!r} is never used in its action template "
                                   f"(write '${p}' where the env expects it, or drop the parameter)")
        if name in rec.missing_result:
            report.problems.append(f"tasks.api.{name}.result {fn.result!r} never resolves on a real step: "
                                   f"{rec.missing_result[name]}")
    if b.error and rec.steps and not rec.error_resolved:
        report.problems.append(f"tasks.error {b.error!r} resolved on none of {rec.steps} real steps: "
                               f"{rec.error_missing} (the env must always set it, None when the call succeeded)")
    never = [n for n in b.functions if not rec.calls.get(n)]
    if never and rec.steps:
        report.notes.append(f"not called by any reference (binding untested on a real step): {', '.join(never)}")


def _failure_line(task_ids: list[str], outcome: str, error: dict | None, progress: float | None) -> str:
    who = f"task {task_ids[0]}" + (f" (and {len(task_ids) - 1} more)" if len(task_ids) > 1 else "")
    if outcome == "simulator_error":
        return f"simulator bug on {who}: {(error or {}).get('message')} (not charged to the program)"
    what = f"reference of {who} ended in {outcome}"
    if error:
        line = f" at reference line {error['line']}" if error.get("line") else ""
        call = f"{error.get('call')}: " if error.get("call") else ""
        what += f"{line}: {call}{error.get('message') or error.get('type')}"
    elif progress is not None:
        what += f" (score {progress:.2f}: the task was not done; is tasks.score right?)"
    return what


def _run_references(domain: Any, tasks: list[dict], report: CheckReport) -> None:
    from tqdm import tqdm

    with_ref = [t for t in tasks if domain.canonical_response(t) is not None]
    if len(with_ref) < len(tasks):
        ids = [str(t.get("task_id")) for t in tasks if domain.canonical_response(t) is None]
        report.problems.append(f"{len(ids)} of {len(tasks)} tasks have no 'reference' (e.g. {ids[0]}): check and "
                               "`densecode eval --canonical` run each task's reference program")
    if not with_ref:
        return
    backend = domain.simulator()
    groups: dict[tuple, list[str]] = defaultdict(list)
    details: dict[tuple, tuple] = {}
    batch = 32
    bar = tqdm(total=len(with_ref), desc="references", unit="task", leave=False)
    for start in range(0, len(with_ref), batch):
        chunk = with_ref[start:start + batch]
        responses = [domain.canonical_response(t) for t in chunk]
        if isinstance(backend, GymProgramBackend):
            runs = backend.run([t["prompt"] + r for t, r in zip(chunk, responses)], chunk)
            for t, task_runs in zip(chunk, runs):
                for r in task_runs:
                    report.outcomes[r.outcome] = report.outcomes.get(r.outcome, 0) + 1
                    err = dict(r.error or {})
                    if r.outcome == "success" or str(err.get("where", "")).startswith("binding of"):
                        continue  # a binding path that does not resolve is reported once, by the path check
                    if err.get("line"):  # a line of the reference, not of prompt + reference
                        err["line"] = int(err["line"]) - t["prompt"].count("\n")
                    key = (r.outcome, err.get("message"), err.get("line"), err.get("call"))
                    groups[key].append(str(t.get("task_id")))
                    details[key] = (r.outcome, err or None, r.progress if r.outcome == "check_failure" else None)
        else:
            for t, rec in zip(chunk, domain.score(chunk, responses)):
                outcome = str(rec.get("outcome"))
                report.outcomes[outcome] = report.outcomes.get(outcome, 0) + 1
                if outcome != "success":
                    err = rec.get("error") if isinstance(rec.get("error"), dict) else (
                        {"message": rec["error"]} if rec.get("error") else None)
                    key = (outcome, str(err))
                    groups[key].append(str(t.get("task_id")))
                    details[key] = (outcome, err, None)
        bar.update(len(chunk))
    bar.close()
    for key, ids in groups.items():
        report.problems.append(_failure_line(ids, *details[key]))


def check_domain(cfg: Any, n: int = 20, seed: int = 0, splits: tuple[str, ...] = SPLITS) -> CheckReport:
    """Check a loaded config's domain (see the module docstring); config errors raise DensecodeError."""
    from densecode.domains import build_domain

    domain = build_domain(cfg)
    report = CheckReport(domain=domain.name)
    try:
        domain.prepare()  # draws a few tasks: a bad task source is one problem, not one per split
    except DensecodeError as exc:
        report.problems.append(str(exc))
        return report
    tasks = _draw_tasks(domain, splits, n, seed, report)
    report.n_tasks, report.tasks = len(tasks), tasks
    backend = domain.simulator()
    recorder = None
    if isinstance(backend, GymProgramBackend):
        _env_checker(backend, report)
        recorder = StepRecorder(backend)
        backend.observe = recorder
    try:
        _run_references(domain, tasks, report)
    finally:
        if recorder is not None:
            backend.observe = None
    if recorder is not None:
        _binding_problems(backend, recorder, report)
    return report
