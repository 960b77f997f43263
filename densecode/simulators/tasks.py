"""Task source for a plug-in simulator domain (same interface as the robotics one).

`tasks.source: "package.module:function"` names a generator `f(split, n, seed)
-> list[dict]`, or `tasks.path` a JSONL file of task dicts (then the last
`eval_fraction` of rows is held out). Both resolve from the config's folder
too (a module beside the config imports without PYTHONPATH; a relative path is
relative to the config, not to the working directory).

Each task dict needs `instruction` (or a ready `prompt`) and should have a
unique `task_id`; `seed` (int), `reset_options` (a mapping, passed to
`env.reset(options=...)`), `timeout` (bool) and `reference` (a program body
that solves it: `densecode check` and `densecode eval --canonical` run it) are
optional. Anything else is kept for the task's reward components. Every task
is checked as it is drawn: a mistake is one DensecodeError naming the task and
the field.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from densecode_robosim.tasks import format_prompt  # the one robot-program prompt format

from densecode.domains.base import DomainOptions
from densecode.errors import DensecodeError
from densecode.simulators.gym_plugin import GymProgramBackend

# A plug-in's own keys, and every domain's (DomainOptions: seeds, eval split, prompt style, ...).
PLUGIN_KEYS = {"simulator", "env_kwargs", "api", "error", "score", "end_action", "source", "path", "eval_fraction",
               "runs", "timeout_s", "max_calls", "clean_credit"} | {f.name for f in dataclasses.fields(DomainOptions)}


def check_keys(opts: dict) -> None:
    # A key set to null is unset: e.g. `sim: null` in a plug-in config whose base (robotics.yaml) sets RoboSim options.
    unknown = sorted(k for k, v in opts.items() if k not in PLUGIN_KEYS and v is not None)
    if unknown:
        raise DensecodeError(f"tasks: unknown key(s) {', '.join(unknown)} for a simulator plug-in "
                             f"(known: {', '.join(sorted(PLUGIN_KEYS))})")


def _load_function(path: str, base_dir: Path | None = None):
    from densecode.simulators.gym_plugin import import_module_near

    module_name, _, attr = path.partition(":")
    if not module_name or not attr.isidentifier():
        raise DensecodeError(f"tasks.source {path!r} must look like 'package.module:function'")
    module = import_module_near(module_name, base_dir, f"tasks.source {path!r}")
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise DensecodeError(f"tasks.source {path!r}: module {module_name!r} ({module.__file__}) has no function "
                             f"{attr!r}")
    return fn


# field -> (accepted types, what to write): checked on every task drawn.
TASK_FIELDS = {
    "task_id": ((str, int), "a string or an int"),
    "instruction": ((str,), "a string"),
    "prompt": ((str,), "a string"),
    "reference": ((str,), "a string (the program body that solves the task)"),
    "seed": ((int,), "an int"),
    "reset_options": ((dict,), "a mapping (passed to env.reset(options=...))"),
    "timeout": ((bool,), "true or false"),
}


def check_task(task: Any, index: int, origin: str) -> None:
    """One clear error for a task that is not a task dict (a string, a wrong field type, no instruction)."""
    if not isinstance(task, dict):
        raise DensecodeError(f"{origin}: task {index} is a {type(task).__name__} ({str(task)[:60]!r}), not a task dict "
                             "like {'task_id': 'a-1', 'instruction': '...', 'reset_options': {...}}")
    name = f"{origin}: task {task.get('task_id', index)!r}"
    if "instruction" not in task and "prompt" not in task:
        raise DensecodeError(f"{name} needs an 'instruction' or a 'prompt' (keys: {', '.join(sorted(map(str, task)))})")
    for key, (types, what) in TASK_FIELDS.items():
        value = task.get(key)
        if value is None:
            continue
        if not isinstance(value, types) or (key == "seed" and isinstance(value, bool)):
            raise DensecodeError(f"{name}: '{key}' must be {what}, got {type(value).__name__} {str(value)[:60]!r}")


class PluginTasks:
    """A plug-in simulator's tasks (both splits) and its backend; the held-out eval is the domain's (Domain.evaluate)."""

    def __init__(self, opts: Any, base_dir: Path | None = None, pool: Any = None):
        if dataclasses.is_dataclass(opts):  # the plug-in domain's typed options; None = not set
            opts = {k: v for k, v in vars(opts).items() if v is not None}
        opts = dict(opts or {})
        check_keys(opts)
        self.opts = opts
        self.train_seed = int(opts.get("train_seed", 0))
        self.backend = GymProgramBackend.from_config(opts, pool=pool, base_dir=base_dir)
        self._rows: list[dict] | None = None
        if opts.get("source"):
            self.origin = f"tasks.source {opts['source']!r}"
            self._generator = _load_function(str(opts["source"]), base_dir)
        elif opts.get("path"):
            self._generator = None
            folder = Path(base_dir).resolve() if base_dir is not None else Path.cwd()
            path = folder / str(opts["path"])
            self.origin = str(path)
            if not path.is_file():
                where = "the config's folder" if base_dir is not None else "the working directory"
                raise DensecodeError(f"tasks.path {opts['path']!r}: no file {path} (a relative tasks.path resolves "
                                     f"from {where}, {folder}; tasks.path must be a JSONL of task objects)")
            self._rows = self._read(path)
        else:
            raise DensecodeError("a simulator plug-in needs tasks.source ('package.module:function') or tasks.path (JSONL)")

    @staticmethod
    def _read(path: Path) -> list[dict]:
        from densecode.jsonl import numbered, read_jsonl

        rows = read_jsonl(path, what="tasks", hint="tasks.path must be a JSONL of task objects")
        for i, (where, row) in enumerate(numbered(path, rows), 1):
            check_task(row, i, where)
        return rows

    def tasks(self, split: str, n: int, seed: int) -> list[dict]:
        if self._generator is not None:
            try:
                tasks = self._generator(split, n, seed)
            except DensecodeError:
                raise
            except Exception as exc:
                raise DensecodeError(f"{self.origin} failed when called as f(split={split!r}, n={n}, seed={seed}): "
                                     f"{type(exc).__name__}: {exc} (a generator is f(split, n, seed) -> list of "
                                     "task dicts)") from exc
            if not isinstance(tasks, (list, tuple)):
                raise DensecodeError(f"{self.origin} returned a {type(tasks).__name__}, not a list of task dicts "
                                     f"(called as f(split={split!r}, n={n}, seed={seed}))")
            tasks = list(tasks)
            for i, t in enumerate(tasks):
                check_task(t, i, self.origin)
        else:
            rows = self._rows or []
            k = max(1, int(len(rows) * float(self.opts.get("eval_fraction", 0.2))))
            pool = rows[:-k] if split == "train" else rows[-k:]
            tasks = [pool[(seed * 7919 + i) % len(pool)] for i in range(n)] if pool else []
        for t in tasks:
            t.setdefault("prompt", format_prompt(t.get("instruction", "")))
        return tasks

    def train_batch(self, n: int, seed: int) -> tuple[list[str], list[dict]]:
        tasks = self.tasks("train", n, seed + self.train_seed)
        return [t["prompt"] for t in tasks], tasks

    def evaluate_programs(self, programs: list[str], tasks: list[dict]) -> dict[str, float]:
        outcomes = self.backend.outcomes(programs, tasks)
        n = max(len(outcomes), 1)
        count = lambda *names: sum(o in names for o in outcomes) / n
        return {
            "n": float(len(outcomes)),
            "parses": 1.0 - count("parse_error"),
            "no_python_error": 1.0 - count("parse_error", "python_error"),
            "no_robot_error": 1.0 - count("parse_error", "python_error", "robot_error"),
            "success": count("success"),
        }
