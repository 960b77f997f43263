"""Real codegen tasks from a JSONL file: MBPP rows, MBPP+ rows, or any prompt+tests rows (as the `code` domain reads
them), each checked at load: its canonical answer runs in the sandbox against its own tests, and a task whose canonical
answer fails is rejected (named `FILE:LINE` in one warning, or an error with `tasks.strict: true`), never trained on.

Splits: MBPP task numbers follow MBPP's convention (train 601-974, validation 511-600, test 11-510; the few-shot
prompts 1-10 are in no split); rows without an MBPP number are split by a hash of their prompt (80/10/10).
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

from densecode.domains.code import code_task_from_row
from densecode.domains.codegen.generator import split_of
from densecode.errors import DensecodeError
from densecode.jsonl import numbered, read_jsonl

HINT = ("MBPP rows (text, code, test_list), MBPP+ rows (prompt, entry_point, canonical_solution, base_input, "
        "plus_input) or prompt+tests rows with a 'reference' solution; e.g. ../shared/data/mbpp/mbpp.jsonl")


def _mbpp_number(task_id) -> int | None:
    match = re.search(r"(\d+)$", str(task_id))
    return int(match.group(1)) if match else None


def _split(number: int | None, prompt: str) -> str | None:
    from densecode.eval.mbpp import MBPP_SPLITS

    if number is not None:
        for name in ("train", "validation", "test"):
            if number in MBPP_SPLITS[name]:
                return name
        return None if number in MBPP_SPLITS["prompt"] else split_of(prompt)
    return split_of(prompt)


def task_from_row(row: dict, where: str, fmt: str = "auto", max_inputs: int = 16) -> dict:
    """One task dict (prompt, tests or inputs, canonical response, split) from one row; errors name `where`."""
    if fmt in ("auto", "mbppplus") and "canonical_solution" in row and "base_input" in row:
        from densecode.eval.mbpp import evalplus_inputs, mbppplus_task_from_record

        t = mbppplus_task_from_record(row, where)
        if not all(isinstance(args, list) for args in list(t.base_input) + list(t.plus_input)):
            raise DensecodeError(f"{where}: base_input/plus_input must be lists of argument lists")
        inputs, _ = evalplus_inputs(t)  # EvalPlus's argument types (JSON turned tuples into lists)
        inputs = inputs[:max_inputs] if max_inputs else inputs
        task = {"task_id": t.task_id, "prompt": t.problem, "entry_point": t.entry_point, "inputs": inputs,
                "reference": t.canonical, "canonical": t.canonical, "mbpp_number": t.number}
        if t.atol:
            task["atol"] = t.atol
    else:
        prompt, task = code_task_from_row(row, where, "auto" if fmt == "mbppplus" else fmt)
        task = {**task, "prompt": prompt}
        # MBPP's reference is a whole function under the docstring prompt; a prompt+tests row may give its
        # own `canonical` response or a `reference` program.
        task["canonical"] = row.get("canonical") or task.get("reference")
        task["mbpp_number"] = _mbpp_number(task.get("task_id")) if "text" in row else None
        if not task["canonical"]:
            raise DensecodeError(f"{where}: no canonical answer: give 'code' (MBPP), 'reference' or 'canonical' "
                                 "so the task can be checked before training on it")
    task["task_id"] = str(task.get("task_id", where))
    task["split"] = _split(task.pop("mbpp_number"), task["prompt"])
    task["level"] = int(row.get("level", 2))
    task["family"] = str(row.get("family", "real"))
    task["category"] = str(row.get("category", "real"))
    return task


def check_canonical(tasks: list[dict], pool=None) -> list[tuple[dict, str | None]]:
    """(task, None) when its canonical answer passes its tests in the sandbox, else (task, why it failed)."""
    from densecode.domains.code import text_sample
    from densecode.rewards.unit_tests import TestsComponent

    comp = TestsComponent(sandbox=pool)
    samples = [text_sample(t["prompt"], t["canonical"], t, code_regions="completion") for t in tasks]
    out = []
    for t, o in zip(tasks, comp(samples) if samples else []):
        if o.outcome == 1.0:  # every test passed
            out.append((t, None))
        else:
            judged = o.diagnostics[0]["message"] if o.diagnostics else "not judged"
            extra = next((d["message"] for d in o.diagnostics[1:]), "")
            out.append((t, f"{judged}{'; ' + extra if extra else ''}"))
    return out


def load_tasks(path: str | Path, fmt: str = "auto", *, check: bool = True, strict: bool = False, pool=None,
               max_inputs: int = 16) -> list[dict]:
    """The file's tasks with their `split`; those whose canonical answer fails are dropped (or raise, if strict)."""
    path = Path(path)
    rows = read_jsonl(path, what="tasks", hint=HINT)
    tasks, wheres = [], []
    for where, row in numbered(path, rows):
        task = task_from_row(row, where, fmt, max_inputs)
        if task["split"] is not None:
            tasks.append(task)
            wheres.append(where)
    if not check:
        return tasks
    kept, rejected = [], []
    for where, (task, why) in zip(wheres, check_canonical(tasks, pool)):
        if why is None:
            kept.append(task)
        else:
            line = f"{where}: task {task['task_id']} rejected: its canonical answer fails its own tests ({why})"
            if strict:
                raise DensecodeError(line + "; fix or drop the row (or set tasks.strict: false to skip it)")
            rejected.append(line)
    if rejected:
        warnings.warn(f"{len(rejected)} of {len(tasks)} tasks rejected at load:\n" + "\n".join(rejected), stacklevel=2)
    if not kept:
        raise DensecodeError(f"{path}: no task left after checking the canonical answers ({HINT})")
    return kept
