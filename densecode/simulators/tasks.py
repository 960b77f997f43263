"""Task source for a plug-in simulator domain (same interface as the robotics one).

`tasks.source: "package.module:function"` names a generator `f(split, n, seed)
-> list[dict]`, or `tasks.path` a JSONL file of task dicts (then the last
`eval_fraction` of rows is held out). Each task needs `task_id` and
`instruction` (or a ready `prompt`); `reset_options`, `seed` and `timeout` are
passed to the backend.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
from pathlib import Path
from typing import Any

from densecode.errors import DensecodeError
from densecode.simulators.gym_plugin import GymProgramBackend
from densecode_robosim.tasks import format_prompt  # the one robot-program prompt format

PLUGIN_KEYS = {"simulator", "env_kwargs", "api", "error", "score", "end_action", "source", "path", "eval_fraction",
               "runs", "timeout_s", "max_calls", "clean_credit", "train_seed", "eval_seed", "eval_split",
               "eval_temperature", "eval_max_new_tokens", "eval_sampled_temperature"}


def check_keys(opts: dict) -> None:
    # A key set to null is unset: e.g. `sim: null` in a plug-in config whose base (robotics.yaml) sets RoboSim options.
    unknown = sorted(k for k, v in opts.items() if k not in PLUGIN_KEYS and v is not None)
    if unknown:
        raise DensecodeError(f"tasks: unknown key(s) {', '.join(unknown)} for a simulator plug-in "
                             f"(known: {', '.join(sorted(PLUGIN_KEYS))})")


def _load_function(path: str):
    module_name, _, attr = path.partition(":")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError, ValueError) as exc:
        raise DensecodeError(f"tasks.source {path!r} cannot be imported ({exc}); use 'package.module:function'") from None


class PluginTasks:
    """Training prompts and a held-out eval split for a plug-in simulator."""

    def __init__(self, gen_cfg: Any, opts: Any, base_dir: Path | None = None, pool: Any = None):
        if dataclasses.is_dataclass(opts):  # the plug-in domain's typed options; None = not set
            opts = {k: v for k, v in vars(opts).items() if v is not None}
        opts = dict(opts or {})
        check_keys(opts)
        self.gen_cfg = gen_cfg
        self.opts = opts
        self.train_seed = int(opts.get("train_seed", 0))
        self.eval_seed = int(opts.get("eval_seed", 12345))
        self.eval_split = str(opts.get("eval_split", "test"))
        self.eval_temperature = float(opts.get("eval_temperature", 0.0))
        self.eval_max_new_tokens = opts.get("eval_max_new_tokens")
        self.eval_sampled_temperature = float(opts.get("eval_sampled_temperature") or 0.0) or None
        self.backend = GymProgramBackend.from_config(opts, pool=pool)
        self._rows: list[dict] | None = None
        if opts.get("source"):
            self._generator = _load_function(str(opts["source"]))
        elif opts.get("path"):
            self._generator = None
            self._rows = self._read(Path(base_dir or ".") / str(opts["path"]))
        else:
            raise DensecodeError("a simulator plug-in needs tasks.source ('package.module:function') or tasks.path (JSONL)")

    @staticmethod
    def _read(path: Path) -> list[dict]:
        if not path.is_file():
            raise DensecodeError(f"tasks file not found: {path} (tasks.path must be a JSONL of task objects)")
        rows = []
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise DensecodeError(f"{path}:{i}: not valid JSON ({exc.msg})") from None
        if not rows:
            raise DensecodeError(f"{path}: no tasks in the file")
        return rows

    def tasks(self, split: str, n: int, seed: int) -> list[dict]:
        if self._generator is not None:
            tasks = list(self._generator(split, n, seed))
        else:
            rows = self._rows or []
            k = max(1, int(len(rows) * float(self.opts.get("eval_fraction", 0.2))))
            pool = rows[:-k] if split == "train" else rows[-k:]
            tasks = [pool[(seed * 7919 + i) % len(pool)] for i in range(n)] if pool else []
        for t in tasks:
            if "instruction" not in t and "prompt" not in t:
                raise DensecodeError(f"plug-in task {t.get('task_id', '?')!r} needs an 'instruction' or a 'prompt'")
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

    def evaluate(self, model, tokenizer, *, n: int, seed: int) -> dict[str, float]:
        from densecode.generation import generate

        tasks = self.tasks(self.eval_split, n, self.eval_seed)
        prompts = [t["prompt"] for t in tasks]
        def run(temperature: float, sample_seed: int) -> dict[str, float]:
            gens = generate(model, tokenizer, prompts, n=1,
                            max_new_tokens=self.eval_max_new_tokens or self.gen_cfg.max_new_tokens,
                            temperature=temperature, top_p=self.gen_cfg.top_p if temperature > 0 else 1.0, top_k=0,
                            grammar="off", stop=list(self.gen_cfg.stop), batch_size=max(self.gen_cfg.batch_size, 16),
                            seed=sample_seed, progress=False)
            return self.evaluate_programs([p + g.completion for p, g in zip(prompts, gens)], tasks)

        out = run(self.eval_temperature, seed)
        if self.eval_sampled_temperature:
            sampled = run(self.eval_sampled_temperature, self.eval_seed)
            out.update({"sampled_success": sampled["success"], "sampled_no_robot_error": sampled["no_robot_error"]})
        return out
