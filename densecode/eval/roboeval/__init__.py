"""Load a user's copy of the RoboEval task files and evaluate programs on them.

RoboEval's licence forbids training on it, so densecode ships none of its
files: point it at your own checkout's `benchmark/tasks/` directory.

    tasks = load_roboeval("path/to/CodeBotler/benchmark/tasks")
    prompts = roboeval_prompts(tasks)              # [{"key", "task", "prompt_index", "instruction", "prompt"}]
    report = evaluate_roboeval(tasks, {p["key"]: [program, ...] for p in prompts})

Each task file star-imports `benchmark.rtl`, `benchmark.simulator` and
`misc.benchmark_utils`; densecode provides shim modules with those names, in
`sys.modules` only while it imports the files. Every program runs in the
sandbox against every state of its task (1 s per state by default); a state
marked `timeout: True` expects a program that runs until stopped, and then the
partial trace is judged. The report follows the paper: per-prompt pass@1 over
n samples, successes out of the number of prompts (80 for RoboEval), and the
breakdown Python error / robot-execution error / task failure / success.
"""

from __future__ import annotations

import builtins
import importlib.util
import re
import sys
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from densecode.errors import DensecodeError
from densecode_robosim import trace as rtl
from densecode.simulators.robosim import WorldRun, as_program, run_programs
from densecode.simulators.runner import SEVERITY, RunResult
from densecode_robosim.tasks import format_prompt
from densecode_robosim.trace import TraceElement

SHIM_NAMES = ("benchmark", "benchmark.rtl", "benchmark.simulator", "misc", "misc.benchmark_utils")
TABLE = ("python_error", "robot_error", "task_failure", "success")


class State:
    """RoboEval's world builder (methods return self for chaining)."""

    def __init__(self):
        self.locations: list[str] = []
        self.objects: list[list[str]] = []
        self.agents: list[list] = []
        self.robot_location: str | None = None

    def addLocation(self, name: str) -> State:  # noqa: N802 - RoboEval's names
        self.locations.append(name)
        return self

    def addObject(self, label: str, location: str) -> State:  # noqa: N802
        self.objects.append([label, location])
        return self

    def addAgent(self, name: str, location: str, answers: list[str]) -> State:  # noqa: N802
        self.agents.append([name, location, list(answers)])
        return self

    def addRobotLocation(self, location: str) -> State:  # noqa: N802
        self.robot_location = location
        return self

    def to_world(self) -> dict:
        """A fresh concrete-world dict (each run rebuilds the world: runs consume answers)."""
        return {
            "rooms": list(self.locations),
            "objects": [list(o) for o in self.objects],
            "people": [[n, loc, list(a)] for n, loc, a in self.agents],
            "robot": self.robot_location or "start_loc",
        }


def contain_words(words: list[str]) -> str:
    """Regex: every word appears (as a word), in any order."""
    return "".join(rf"(?=.*\b{w}\b)" for w in words) + ".*"


def contain_words_and_exlude_words(include: list[str], exclude: list[str]) -> str:  # sic: RoboEval's name
    return "".join(rf"(?!.*\b{w}\b)" for w in exclude) + contain_words(include)


def print_debug(name: str, value: Any, labels: Any = None) -> None:
    print(f"{name}: {value} {labels if labels is not None else ''}")


_LABEL_PREFIX = "label_"


class _LabelBuiltins(dict):
    """Builtins for task modules: any undefined `label_*` name resolves to itself
    (labels are only passed to print_debug, and their set differs between versions)."""

    def __missing__(self, key):
        if key.startswith(_LABEL_PREFIX):
            return key
        raise KeyError(key)


def _shim_modules() -> dict[str, types.ModuleType]:
    benchmark = types.ModuleType("benchmark")
    benchmark.__path__ = []  # a package
    rtl_mod = types.ModuleType("benchmark.rtl")
    for name in ("Trace", "TraceElement", "GoTo", "Say", "Ask", "CheckEntity", "Pick", "Place"):
        setattr(rtl_mod, name, getattr(rtl, name))
    rtl_mod.Union = typing.Union
    rtl_mod.List = typing.List
    rtl_mod.__all__ = ["Trace", "TraceElement", "GoTo", "Say", "Ask", "CheckEntity", "Pick", "Place", "Union"]
    sim_mod = types.ModuleType("benchmark.simulator")
    sim_mod.State = State
    sim_mod.__all__ = ["State"]
    misc = types.ModuleType("misc")
    misc.__path__ = []
    utils = types.ModuleType("misc.benchmark_utils")
    utils.contain_words = contain_words
    utils.contain_words_and_exlude_words = contain_words_and_exlude_words
    utils.print_debug = print_debug
    labels = [f"label_{c}" for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ"]
    for label in labels:
        setattr(utils, label, label)
    utils.__all__ = ["contain_words", "contain_words_and_exlude_words", "print_debug"] + labels
    benchmark.rtl, benchmark.simulator, misc.benchmark_utils = rtl_mod, sim_mod, utils
    return {"benchmark": benchmark, "benchmark.rtl": rtl_mod, "benchmark.simulator": sim_mod,
            "misc": misc, "misc.benchmark_utils": utils}


@dataclass
class RoboEvalTask:
    name: str
    prompts: list[str]
    tests: list[dict]  # {"state": State, "test": fn(trace_elements, VERBOSE=False) -> bool, "timeout": bool}
    path: str = ""

    def key(self, prompt_index: int) -> str:
        return f"{self.name}/{prompt_index}"


def _import_task_file(path: Path) -> types.ModuleType:
    module_name = f"_densecode_roboeval_{re.sub(r'[^0-9A-Za-z_]', '_', path.stem)}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise DensecodeError(f"cannot import RoboEval task file {path}")
    module = importlib.util.module_from_spec(spec)
    module.__builtins__ = _LabelBuiltins(vars(builtins))
    spec.loader.exec_module(module)
    return module


def load_roboeval(path: str | Path) -> list[RoboEvalTask]:
    """Every `<Task>.py` in `path` (RoboEval's `benchmark/tasks/` or one file), sorted by name."""
    root = Path(path)
    if not root.exists():
        raise DensecodeError(
            f"RoboEval tasks not found at {root}: pass the benchmark/tasks directory of your own "
            "RoboEval (CodeBotler) checkout, e.g. --data ~/CodeBotler/benchmark/tasks"
        )
    files = [root] if root.is_file() else sorted(p for p in root.glob("*.py") if p.name != "__init__.py")
    if not files:
        raise DensecodeError(f"no RoboEval task files (*.py) in {root}; expected benchmark/tasks of a RoboEval checkout")
    saved = {name: sys.modules.get(name) for name in SHIM_NAMES}
    saved_path = list(sys.path)
    tasks = []
    try:
        sys.modules.update(_shim_modules())
        for file in files:
            try:
                module = _import_task_file(file)
            except DensecodeError:
                raise
            except Exception as exc:  # noqa: BLE001 - report which file is broken
                raise DensecodeError(f"RoboEval task file {file} failed to import: {type(exc).__name__}: {exc}") from None
            if not all(hasattr(module, a) for a in ("name", "prompts", "tests")):
                if root.is_file():
                    raise DensecodeError(f"{file} is not a RoboEval task file (needs name, prompts and tests)")
                continue  # a helper module beside the tasks
            tests = [_check_test(file, i, t) for i, t in enumerate(module.tests)]
            tasks.append(RoboEvalTask(str(module.name), [str(p) for p in module.prompts], tests, str(file)))
    finally:
        for name, mod in saved.items():
            if mod is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = mod
        sys.path[:] = saved_path
    if not tasks:
        raise DensecodeError(f"no RoboEval tasks (modules with name, prompts, tests) found in {root}")
    return sorted(tasks, key=lambda t: t.name)


def _check_test(file: Path, i: int, test: Any) -> dict:
    if not isinstance(test, dict) or not isinstance(test.get("state"), State) or not callable(test.get("test")):
        raise DensecodeError(f"{file}: tests[{i}] must be a dict with a State 'state' and a callable 'test'")
    return {"state": test["state"], "test": test["test"], "timeout": bool(test.get("timeout", False))}


def roboeval_prompts(tasks: list[RoboEvalTask]) -> list[dict]:
    """One entry per (task, phrasing), with the densecode prompt for it."""
    return [
        {"key": t.key(i), "task": t.name, "prompt_index": i, "instruction": text, "prompt": format_prompt(text)}
        for t in tasks
        for i, text in enumerate(t.prompts)
    ]


def _judge(test: Callable, result: RunResult) -> RunResult:
    if result.outcome != "success":  # errors and unexpected timeouts stand as they are
        return result
    elements = [TraceElement.from_list(item) for item in result.trace]
    try:
        ok = bool(test(elements, False))
    except Exception as exc:  # noqa: BLE001 - a check that crashes on odd traces fails the run
        ok = False
        result.checks = [[f"test raised {type(exc).__name__}: {exc}", False]]
    else:
        result.checks = [["task test", ok]]
    result.outcome = "success" if ok else "check_failure"
    return result


def table_class(outcome: str) -> str:
    """The paper's 4 columns: parse errors count as Python errors, unexpected timeouts as task failures."""
    return {"parse_error": "python_error", "python_error": "python_error", "robot_error": "robot_error",
            "timeout": "task_failure", "check_failure": "task_failure"}.get(outcome, "success")


def evaluate_roboeval(
    tasks: list[RoboEvalTask],
    completions: dict[str, list[str]],
    pool: Any = None,
    timeout_s: float = 1.0,
    max_calls: int = 100000,
) -> dict:
    """Judge `completions[key]` (n programs or bodies per prompt key, see
    `roboeval_prompts`) on every state of their task. Returns the report dict."""
    jobs, owner = [], []
    by_key = {t.key(i): (t, i) for t in tasks for i in range(len(t.prompts))}
    unknown = sorted(set(completions) - set(by_key))
    if unknown:
        raise DensecodeError(f"completions for unknown RoboEval prompts {unknown[:5]}; keys look like 'TaskName/0'")
    for key, programs in completions.items():
        task, _ = by_key[key]
        for s, program in enumerate(programs):
            for k, test in enumerate(task.tests):
                run = WorldRun(world=test["state"].to_world(), checks=[], timeout=test["timeout"])
                jobs.append((as_program(program), run))
                owner.append((key, s, k))
    results = run_programs(jobs, pool=pool, timeout_s=timeout_s, max_calls=max_calls)
    samples: dict[tuple[str, int], list[RunResult]] = {}
    for (key, s, k), res in zip(owner, results):
        task, _ = by_key[key]
        samples.setdefault((key, s), []).append(_judge(task.tests[k]["test"], res))
    per_prompt = []
    for key, programs in completions.items():
        task, index = by_key[key]
        outcomes = []
        for s in range(len(programs)):
            runs = samples.get((key, s), [])
            worst = min(runs, key=lambda r: SEVERITY[r.outcome]) if runs else None
            outcomes.append({
                "outcome": worst.outcome if worst else "success",
                "error": worst.error if worst else None,
                "states": [r.outcome for r in runs],
            })
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
        f"RoboEval: {report['n_tasks']} tasks, {report['n_prompts']} prompts, {report['samples_per_prompt']} sample(s) each",
        f"pass@1 {report['pass@1']:.3f}; successes {b['success']:.1f} / {report['n_prompts']}",
        "| Python error | robot-execution error | task failure | success |",
        "|---|---|---|---|",
        f"| {b['python_error']:.1f} | {b['robot_error']:.1f} | {b['task_failure']:.1f} | {b['success']:.1f} |",
    ]
    return "\n".join(lines)


__all__ = [
    "RoboEvalTask", "State", "contain_words", "contain_words_and_exlude_words", "evaluate_roboeval",
    "format_report", "load_roboeval", "roboeval_prompts",
]
