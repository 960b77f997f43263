"""Find and load a user's RoboEval task files (from their own CodeBotler checkout).

RoboEval's licence forbids training on it, so densecode ships none of its
files. `--data` may name the checkout's root, its `benchmark/`, its
`benchmark/tasks/` (`~` expanded), or one task file; `subset` picks a
subfolder of the tasks folder (e.g. `open_world_knowledge`). Only files that
look like task files are imported: a top-level `name`, `prompts` and `tests`
assignment, read with `ast` before anything runs (pointing at the root must
not import `codebotler.py`). Every file or folder passed over is reported
with the reason (logged, and kept in `RoboEvalSuite.skipped`).

Task files star-import `benchmark.rtl`, `benchmark.simulator` and
`misc.benchmark_utils`; densecode provides modules with those names (in
`sys.modules` only while it imports the files), built for the chosen
semantics.
"""

from __future__ import annotations

import ast
import builtins
import importlib.util
import logging
import re
import sys
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from densecode.errors import DensecodeError
import densecode.eval.roboeval.rtl as rtl
from densecode.eval.roboeval.semantics import (
    Semantics,
    contain_words,
    exclude_helper,
    get_semantics,
    print_debug,
)
from densecode.eval.roboeval.world import State

log = logging.getLogger("densecode.roboeval")

SHIM_NAMES = ("benchmark", "benchmark.rtl", "benchmark.simulator", "misc", "misc.benchmark_utils")
TASK_ATTRIBUTES = ("name", "prompts", "tests")
PROMPT_PREFIX_FILE = Path("code_generation") / "prompt_prefix.py"


@dataclass
class RoboEvalTask:
    name: str
    prompts: list[str]
    tests: list[dict]  # {"state": State, "test": fn(trace_elements) -> bool, "timeout": bool}
    path: str = ""

    def key(self, prompt_index: int) -> str:
        return f"{self.name}/{prompt_index}"


@dataclass
class RoboEvalSuite:
    tasks: list[RoboEvalTask]
    tasks_dir: Path
    root: Path | None  # the checkout's root, when the layout shows it
    semantics: str
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, why)

    @property
    def prompt_prefix_path(self) -> Path | None:
        """The checkout's code-generation prompt file (CodeBotler's prompt protocol), if present."""
        if self.root is None:
            return None
        path = self.root / PROMPT_PREFIX_FILE
        return path if path.is_file() else None


def locate(path: str | Path) -> tuple[Path, Path | None]:
    """(tasks folder or one task file, checkout root or None) for what the user passed."""
    given = Path(path).expanduser()
    if not given.exists():
        raise DensecodeError(
            f"RoboEval tasks not found at {given}: pass your own CodeBotler checkout (its root, benchmark/ or "
            "benchmark/tasks), e.g. --data ~/CodeBotler"
        )
    given = given.resolve()
    if given.is_file():
        root = given.parent.parent.parent if given.parent.name == "tasks" and given.parent.parent.name == "benchmark" \
            else None
        return given, root
    if (given / "benchmark" / "tasks").is_dir():
        return given / "benchmark" / "tasks", given
    if given.name == "benchmark" and (given / "tasks").is_dir():
        return given / "tasks", given.parent
    if given.name == "tasks" and given.parent.name == "benchmark":
        return given, given.parent.parent
    return given, None


def task_file_problem(path: Path) -> str | None:
    """Why `path` is not a RoboEval task file (None when it is one), read without running it."""
    if path.name == "__init__.py":
        return "a package marker, not a task"
    try:
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"), filename=str(path))
    except SyntaxError as exc:
        return f"not valid Python (line {exc.lineno}: {exc.msg})"
    assigned = set()
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, (ast.AnnAssign, ast.AugAssign)) else []
        assigned |= {t.id for t in targets if isinstance(t, ast.Name)}
    missing = [a for a in TASK_ATTRIBUTES if a not in assigned]
    if missing:
        return f"no top-level {', '.join(missing)} (a task file defines name, prompts and tests)"
    return None


class _LabelBuiltins(dict):
    """Builtins for task modules: an undefined `label_*` name resolves to itself (labels only reach
    print_debug, and their set differs between CodeBotler versions)."""

    def __missing__(self, key):
        if key.startswith("label_"):
            return key
        raise KeyError(key)


def shim_modules(semantics: Semantics) -> dict[str, types.ModuleType]:
    benchmark = types.ModuleType("benchmark")
    benchmark.__path__ = []  # a package
    rtl_mod = types.ModuleType("benchmark.rtl")
    for name in rtl.NAMES:
        setattr(rtl_mod, name, getattr(rtl, name))
    rtl_mod.Union, rtl_mod.List, rtl_mod.Optional = typing.Union, typing.List, typing.Optional  # noqa: UP006
    rtl_mod.__all__ = [*rtl.NAMES, "Union", "List", "Optional"]
    sim_mod = types.ModuleType("benchmark.simulator")
    sim_mod.State = State
    sim_mod.__all__ = ["State"]
    misc = types.ModuleType("misc")
    misc.__path__ = []
    utils = types.ModuleType("misc.benchmark_utils")
    utils.contain_words = contain_words
    utils.contain_words_and_exlude_words = exclude_helper(semantics)
    utils.print_debug = print_debug
    labels = {f"label_{c}": f"label_{c}" for c in ("AL", "OWK", "M", "EO", "IT", "L", "ES", "A", "S", "CE")}
    for label, value in labels.items():
        setattr(utils, label, value)
    utils.labels = list(labels.values())
    utils.__all__ = ["contain_words", "contain_words_and_exlude_words", "print_debug", "labels", *labels]
    benchmark.rtl, benchmark.simulator, misc.benchmark_utils = rtl_mod, sim_mod, utils
    return {"benchmark": benchmark, "benchmark.rtl": rtl_mod, "benchmark.simulator": sim_mod,
            "misc": misc, "misc.benchmark_utils": utils}


def _import_task_file(path: Path) -> types.ModuleType:
    module_name = f"_densecode_roboeval_{re.sub(r'[^0-9A-Za-z_]', '_', path.stem)}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise DensecodeError(f"cannot import RoboEval task file {path}")
    module = importlib.util.module_from_spec(spec)
    module.__builtins__ = _LabelBuiltins(vars(builtins))
    spec.loader.exec_module(module)
    return module


def _check_test(file: Path, i: int, test: Any) -> dict:
    if not isinstance(test, dict) or not isinstance(test.get("state"), State) or not callable(test.get("test")):
        raise DensecodeError(f"{file}: tests[{i}] must be a dict with a State 'state' and a callable 'test'")
    return {"state": test["state"], "test": test["test"], "timeout": bool(test.get("timeout", False))}


def _skip(skipped: list, path: Path, why: str) -> None:
    skipped.append((str(path), why))
    log.warning("RoboEval: skipped %s: %s", path, why)


def load_roboeval(path: str | Path, semantics: str | Semantics = "codebotler", subset: str | None = None) -> RoboEvalSuite:
    """Every task file in the tasks folder (or `subset` below it, or one file), sorted by name."""
    sem = get_semantics(semantics)
    target, root = locate(path)
    skipped: list[tuple[str, str]] = []
    if subset:
        if target.is_file():
            raise DensecodeError(f"--roboeval-subset {subset}: --data names one file; pass the tasks folder instead")
        sub = (target / subset).resolve()
        if not sub.is_dir() or target.resolve() not in sub.parents:
            found = sorted(p.name for p in target.iterdir() if p.is_dir() and not p.name.startswith(("_", ".")))
            raise DensecodeError(f"--roboeval-subset {subset}: no such folder in {target} "
                                 f"(subfolders: {', '.join(found) or 'none'})")
        target = sub
    tasks_dir = target.parent if target.is_file() else target
    if target.is_file():
        candidates = [target]
    else:
        candidates = sorted(target.glob("*.py"))
        for other in sorted(p for p in target.iterdir() if not p.name.startswith(".")):
            if other.is_dir() and other.name != "__pycache__":
                n = len(list(other.glob("*.py")))
                _skip(skipped, other, f"a subfolder ({n} .py file(s)); evaluate it with --roboeval-subset "
                      f"{other.relative_to(tasks_dir)}")
            elif other.is_file() and other.suffix != ".py":
                _skip(skipped, other, "not a .py file")
    files = []
    for file in candidates:
        why = task_file_problem(file)
        if why is None:
            files.append(file)
        elif target.is_file():
            raise DensecodeError(f"{file} is not a RoboEval task file: {why}")
        else:
            _skip(skipped, file, why)
    if not files:
        raise DensecodeError(f"no RoboEval task files in {target}: expected the benchmark/tasks folder of a "
                             "CodeBotler checkout (files defining name, prompts and tests)")
    saved = {name: sys.modules.get(name) for name in SHIM_NAMES}
    saved_path = list(sys.path)
    tasks = []
    try:
        sys.modules.update(shim_modules(sem))
        for file in files:
            try:
                module = _import_task_file(file)
            except DensecodeError:
                raise
            except Exception as exc:  # noqa: BLE001 - report which file is broken
                raise DensecodeError(f"RoboEval task file {file} failed to import: {type(exc).__name__}: {exc}") from None
            tests = [_check_test(file, i, t) for i, t in enumerate(module.tests)]
            tasks.append(RoboEvalTask(str(module.name), [str(p) for p in module.prompts], tests, str(file)))
    finally:
        for name, mod in saved.items():
            if mod is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = mod
        sys.path[:] = saved_path
    return RoboEvalSuite(sorted(tasks, key=lambda t: t.name), tasks_dir, root, sem.name, skipped)
