"""Task sources: where training prompts (and their held-out eval split) come from.

A task source gives `train_batch(n, seed) -> (prompts, tasks)` (tasks are the dicts the
reward components read: `tests`, `setup`, `reference`, `entry_point`, robot task
fields, ...) and `evaluate(model, tokenizer, *, n, seed) -> {metric: value}` on
held-out tasks that never appear in training batches.

Config (`tasks:` mapping of the YAML):
- robotics: `{train_seed: 0, eval_seed: 12345, eval_split: "test"}` — the RoboSim generator.
- code: `{path: tasks.jsonl, eval_path: optional.jsonl, eval_fraction: 0.2, limit: 0, mbpp_splits: true,
  format: auto|mbpp|prompt}` — MBPP-style rows (`text`, `code`, `test_list`,
  `test_setup_code`) or any rows with `prompt` + `tests` (list of assert strings;
  optional `setup`, `reference`, `entry_point`). An MBPP file trains on MBPP's train
  split (task ids 601-974) and evaluates on its validation split (511-600) unless
  `mbpp_splits: false`; otherwise, without `eval_path`, the last `eval_fraction` of
  the rows (in file order) is held out.
Eval decoding: `tasks.eval_temperature` (default 0 = greedy), `tasks.eval_max_new_tokens`;
robotics also `tasks.eval_sampled_temperature` (a second pass at that temperature with the
generation top_p and a fixed seed, logged as `sampled_*`; RL first improves the sampling
distribution, which greedy decoding shows only once an argmax flips).
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import numpy as np

from densecode.errors import DensecodeError

TASK_KEYS = {"path", "eval_path", "eval_fraction", "limit", "format", "train_seed", "eval_seed", "eval_split",
             "eval_temperature", "eval_max_new_tokens", "simulator", "mbpp_splits", "sim", "eval_sampled_temperature"}


def _check_keys(opts: dict) -> None:
    unknown = sorted(set(opts) - TASK_KEYS)
    if unknown:
        raise DensecodeError(f"tasks: unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(TASK_KEYS))})")


def _generate_programs(model, tokenizer, prompts: list[str], gen_cfg, *, temperature: float, seed: int,
                       max_new_tokens: int | None = None) -> list[Any]:
    from densecode.generation import generate

    return generate(model, tokenizer, prompts, n=1, max_new_tokens=max_new_tokens or gen_cfg.max_new_tokens,
                    temperature=temperature, top_p=gen_cfg.top_p if temperature > 0 else 1.0, top_k=0,
                    grammar="off", stop=list(gen_cfg.stop), batch_size=max(gen_cfg.batch_size, 16), seed=seed,
                    progress=False)


# ---------------------------------------------------------------- robotics


class RoboticsTasks:
    """The RoboSim task generator: fresh training tasks every step, a fixed held-out split."""

    def __init__(self, gen_cfg, opts: dict | None = None):
        opts = dict(opts or {})
        _check_keys(opts)
        try:
            import densecode_robosim.tasks as rtasks
        except ImportError as exc:
            raise DensecodeError(f"the robotics domain needs the robosim package (pip install -e sim/robosim): {exc}") from None
        self._rtasks = rtasks
        self.gen_cfg = gen_cfg
        self.train_seed = int(opts.get("train_seed", 0))
        self.eval_seed = int(opts.get("eval_seed", 12345))
        self.eval_split = str(opts.get("eval_split", "test"))
        self.eval_temperature = float(opts.get("eval_temperature", 0.0))
        self.eval_max_new_tokens = opts.get("eval_max_new_tokens")
        sampled = opts.get("eval_sampled_temperature")
        self.eval_sampled_temperature = float(sampled) if sampled else None
        self._eval_cache: dict[int, list] = {}

    def _prompt(self, task) -> str:
        instruction = task["instruction"] if isinstance(task, dict) else task.instruction
        return self._rtasks.format_prompt(instruction)

    @staticmethod
    def _as_dict(task) -> dict:
        if isinstance(task, dict):
            return task
        if hasattr(task, "to_dict"):
            return task.to_dict()
        return dict(vars(task))

    def train_batch(self, n: int, seed: int) -> tuple[list[str], list[dict]]:
        tasks = [self._as_dict(t) for t in self._rtasks.generate_tasks("train", n, seed=seed + self.train_seed)]
        return [self._prompt(t) for t in tasks], tasks

    def eval_tasks(self, n: int) -> list[dict]:
        if n not in self._eval_cache:
            self._eval_cache[n] = [self._as_dict(t) for t in
                                   self._rtasks.generate_tasks(self.eval_split, n, seed=self.eval_seed)]
        return self._eval_cache[n]

    def evaluate(self, model, tokenizer, *, n: int, seed: int) -> dict[str, float]:
        from densecode.simulators import robosim

        tasks = self.eval_tasks(n)
        prompts = [self._prompt(t) for t in tasks]
        gens = _generate_programs(model, tokenizer, prompts, self.gen_cfg, temperature=self.eval_temperature,
                                  seed=seed, max_new_tokens=self.eval_max_new_tokens)
        programs = [p + g.completion for p, g in zip(prompts, gens)]
        out = _robot_metrics(robosim.evaluate(programs, tasks))
        if self.eval_sampled_temperature:
            # The same draws before and after training (fixed seed), so the change is the policy's.
            gens = _generate_programs(model, tokenizer, prompts, self.gen_cfg,
                                      temperature=self.eval_sampled_temperature, seed=self.eval_seed,
                                      max_new_tokens=self.eval_max_new_tokens)
            sampled = _robot_metrics(robosim.evaluate([p + g.completion for p, g in zip(prompts, gens)], tasks))
            out.update({f"sampled_{k}": v for k, v in sampled.items() if k in
                        ("success_rate", "executability", "parse_rate")})
        return out


def _robot_metrics(res: Any) -> dict[str, float]:
    """Accept robosim.evaluate's summary (a dict or an object with a summary)."""
    summary = res
    if hasattr(res, "summary"):
        summary = res.summary() if callable(res.summary) else res.summary
    if not isinstance(summary, dict):
        summary = dict(vars(summary))
    out = {}
    for k, v in summary.items():
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            out[k] = float(v)
    # Names shared with the code domain: success rate, and executability = ran with no
    # Python error and no robot-API error (robosim's cumulative `no_robot_error`).
    if "success" in out:
        out["success_rate"] = out["success"]
    if "no_robot_error" in out:
        out["executability"] = out["no_robot_error"]
    if "parses" in out:
        out["parse_rate"] = out["parses"]
    return out


# ---------------------------------------------------------------- code (jsonl)


def _read_jsonl(path: Path) -> list[dict]:
    if not path.is_file():
        raise DensecodeError(f"tasks file not found: {path} (set tasks.path to a .jsonl of prompt+tests rows, "
                             "e.g. --set tasks.path=../shared/data/mbpp/mbpp.jsonl)")
    rows = []
    for i, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise DensecodeError(f"{path}:{i}: not valid JSON ({exc.msg}); every line must be one JSON object") from None
        if not isinstance(rows[-1], dict):
            raise DensecodeError(f"{path}:{i}: expected a JSON object per line")
    if not rows:
        raise DensecodeError(f"{path}: no tasks in the file")
    return rows


def code_task_from_row(row: dict, where: str, fmt: str = "auto") -> tuple[str, dict]:
    """(prompt, task dict for the reward components) from an MBPP-style or prompt+tests row."""
    if fmt == "mbpp" or (fmt == "auto" and "text" in row and "test_list" in row):
        from densecode.eval.mbpp import completion_prompt, mbpp_task_from_record

        t = mbpp_task_from_record(row, where)
        task = {"task_id": t.task_id, "tests": list(t.tests), "setup": t.setup, "reference": t.canonical,
                "entry_point": t.entry_point}
        return completion_prompt(t, []), task
    if "prompt" not in row or not ("tests" in row or "test_list" in row):
        raise DensecodeError(f"{where}: a task row needs 'prompt' and 'tests' (a list of assert statements), "
                             f"or MBPP fields 'text', 'code', 'test_list'; got keys {sorted(row)}")
    tests = row.get("tests", row.get("test_list"))
    if isinstance(tests, str):
        tests = [tests]
    if not isinstance(tests, list) or not all(isinstance(t, str) for t in tests):
        raise DensecodeError(f"{where}: 'tests' must be a list of assert statements (strings)")
    task = {k: row[k] for k in ("task_id", "setup", "reference", "entry_point", "inputs", "expected", "atol")
            if k in row}
    task["tests"] = tests
    return str(row["prompt"]), task


def _mbpp_number(row: dict) -> int | None:
    if "text" not in row or "test_list" not in row:
        return None
    try:
        return int(str(row.get("task_id")).rsplit("/", 1)[-1])
    except ValueError:
        return None


class JsonlCodeTasks:
    def __init__(self, gen_cfg, opts: dict | None = None, base_dir: Path | None = None):
        opts = dict(opts or {})
        _check_keys(opts)
        if not opts.get("path"):
            raise DensecodeError("the code domain needs a tasks file: set tasks.path (YAML) or "
                                 "--set tasks.path=FILE.jsonl (MBPP-style or prompt+tests rows)")
        self.gen_cfg = gen_cfg
        fmt = str(opts.get("format", "auto"))
        if fmt not in ("auto", "mbpp", "prompt"):
            raise DensecodeError(f"tasks.format must be auto, mbpp or prompt; got {fmt!r}")
        path = Path(opts["path"])
        rows = _read_jsonl(path)
        items = [code_task_from_row(r, f"{path}:{i + 1}", fmt) for i, r in enumerate(rows)]
        mbpp_ids = [_mbpp_number(r) for r in rows]
        if opts.get("mbpp_splits", True) and not opts.get("eval_path") and all(n is not None for n in mbpp_ids):
            # MBPP's conventional splits: train on 601-974, hold out validation 511-600 (never the test split).
            from densecode.eval.mbpp import MBPP_SPLITS

            self.train_items = [it for it, n in zip(items, mbpp_ids) if n in MBPP_SPLITS["train"]]
            self.eval_items = [it for it, n in zip(items, mbpp_ids) if n in MBPP_SPLITS["validation"]]
        elif opts.get("eval_path"):
            ep = Path(opts["eval_path"])
            eval_rows = _read_jsonl(ep)
            self.eval_items = [code_task_from_row(r, f"{ep}:{i + 1}", fmt) for i, r in enumerate(eval_rows)]
            self.train_items = items
        else:
            frac = float(opts.get("eval_fraction", 0.2))
            k = max(1, round(len(items) * frac)) if len(items) > 1 else 0
            self.train_items, self.eval_items = items[: len(items) - k], items[len(items) - k:]
        limit = int(opts.get("limit", 0) or 0)
        if limit:
            self.train_items = self.train_items[:limit]
        if not self.train_items:
            raise DensecodeError(f"{path}: no training tasks left after holding out the eval split")
        self.eval_temperature = float(opts.get("eval_temperature", 0.0))
        self.eval_max_new_tokens = opts.get("eval_max_new_tokens")

    def train_batch(self, n: int, seed: int) -> tuple[list[str], list[dict]]:
        rng = random.Random(seed)
        picks = [self.train_items[rng.randrange(len(self.train_items))] for _ in range(n)]
        return [p for p, _ in picks], [dict(t) for _, t in picks]

    def evaluate(self, model, tokenizer, *, n: int, seed: int) -> dict[str, float]:
        from densecode.rewards import make_sample
        from densecode.rewards.unit_tests import TestsComponent

        items = self.eval_items[:n] if n > 0 else self.eval_items
        prompts = [p for p, _ in items]
        gens = _generate_programs(model, tokenizer, prompts, self.gen_cfg, temperature=self.eval_temperature,
                                  seed=seed, max_new_tokens=self.eval_max_new_tokens)
        samples = [make_sample(p, g.token_ids, tokenizer, t) for (p, t), g in zip(items, gens)]
        outs = TestsComponent()(samples)
        return {
            "pass_rate": float(np.mean([o.info.get("all_passed", 0.0) for o in outs])),
            "test_pass_fraction": float(np.mean([o.info.get("pass_rate", 0.0) for o in outs])),
            "executability": float(np.mean([1.0 - o.info.get("exception", 0.0) for o in outs])),
            "n_tasks": float(len(items)),
        }


def build_task_source(cfg, base_dir: Path | None = None):
    from densecode.simulators import PluginTasks, is_plugin

    domain = cfg.domain
    if is_plugin(cfg.tasks):
        # A custom gymnasium simulator: any domain name; its plug-in checks its own `tasks:` keys.
        return PluginTasks(cfg.generation, cfg.tasks, base_dir)
    if domain == "robotics":
        return RoboticsTasks(cfg.generation, cfg.tasks)
    if domain == "code":
        return JsonlCodeTasks(cfg.generation, cfg.tasks, base_dir)
    raise DensecodeError(f"unknown domain {domain!r}: choose robotics or code (--domain robotics|code)")
