"""codeio tasks: generated from the codegen families' reference functions, or derived from real data (MBPP / MBPP+
reference solutions and their test inputs); the expected value of every task is computed in the sandbox.

Prompt: an instruction line, the function, and an unfinished assert; the answer is the literal that completes it:

    # Complete the assert with the value the call returns, written as a Python literal.
    def running(nums):
        ...

    assert running([3, -1, 4]) ==

Splits: generated tasks by a hash of the function's identity (all calls of one function in one split, 80/10/10, as in
codegen); MBPP rows by MBPP's numbering (train 601-974, validation 511-600, test 11-510); other rows by a hash of
their code.
"""

from __future__ import annotations

import ast
import hashlib
import random
import warnings
from pathlib import Path
from typing import Any

from densecode.domains.codegen.families import Family
from densecode.domains.codegen.generator import call_text, check_split, draw_inputs, draw_spec, expected, split_of
from densecode.domains.codeio.literal import values_equal
from densecode.domains.codeio.values import compute_values
from densecode.errors import DensecodeError
from densecode.jsonl import numbered, read_jsonl

INSTRUCTION = "# Complete the assert with the value the call returns, written as a Python literal.\n"
MAX_ANSWER_CHARS = 300  # longer values make no short-answer task
GENERATED_BATCH = 16  # generated tasks (the families' own templates) computed 16 per sandboxed program
HINT = ("MBPP rows (text, code, test_list), MBPP+ rows (prompt, entry_point, canonical_solution, base_input) or "
        "rows with 'code' and 'call' (optional 'setup'); e.g. ../shared/data/mbpp/mbpp.jsonl")


def prompt_of(code: str, call: str, setup: str = "") -> str:
    shown = "\n".join(p.rstrip("\n") for p in (setup, code) if p.strip())
    # The prompt ends at "==": the answer brings its own leading space, as " [" or " 'a" are single tokens for
    # byte-level BPE tokenizers (a prompt ending in a space would ask for a split no training text has).
    return f"{INSTRUCTION}{shown}\n\nassert {call} =="


def _task(code: str, call: str, setup: str, expected: str, **meta: Any) -> dict:
    prompt = prompt_of(code, call, setup)
    digest = hashlib.sha256(prompt.encode("utf-8")).hexdigest()[:12]
    return {"task_id": meta.pop("task_id", None) or f"codeio/{meta.get('family', 'real')}/{digest}", "prompt": prompt,
            "code": code, "call": call, "setup": setup, "expected": expected, "canonical": " " + expected, **meta}


def input_task(task: dict) -> dict | None:
    """The input-direction task of an output-direction one (inputs.py): the same function and call, the returned value
    shown, the arguments to propose; None when the call's arguments are not all literals."""
    from densecode.domains.codeio.inputs import call_arguments, input_prompt

    parts = call_arguments(task["call"])
    if parts is None:
        return None
    entry, args_text = parts
    prompt = input_prompt(task["code"], task.get("setup", ""), entry, task["expected"])
    return {**task, "task_id": task["task_id"] + "/input", "prompt": prompt, "direction": "input", "entry": entry,
            "canonical": args_text}


# ------------------------------------------------------------------------------------------------ generated


def generate_tasks(split: str, n: int, seed: int, families: list[Family], pool: Any = None) -> list[dict]:
    """`n` generated tasks of `split`, deterministic in `seed`; values computed in the sandbox."""
    check_split(split)
    fams = [f for f in families if f.kind == "function"]
    if not fams:
        raise DensecodeError("codeio needs at least one function family (class families have no single call)")
    rng = random.Random(f"codeio:{split}:{seed}")
    out: list[dict] = []
    rounds = 0
    while len(out) < n:
        rounds += 1
        if rounds > 50:
            raise DensecodeError(f"codeio: found only {len(out)} of {n} {split} tasks among the families "
                                 f"{', '.join(f.name for f in fams)}; allow more families (tasks.families)")
        drafts = []
        for _ in range(200 * (n - len(out))):
            spec = draw_spec(rng, fams)
            if split_of(spec.key) == split:
                drafts.append((spec, draw_inputs(rng, spec, 1)[0]))
                if len(drafts) == n - len(out):
                    break
        codes = [f"def {s.entry}({', '.join(s.args)}):\n{s.body()}" for s, _ in drafts]
        calls = [call_text(s, args) for s, args in drafts]
        values = compute_values([("", c, call) for c, call in zip(codes, calls)], pool, MAX_ANSWER_CHARS,
                                batch=GENERATED_BATCH)
        for (spec, args), code, call, val in zip(drafts, codes, calls, values):
            if val.ok:  # a value too long for a short answer is skipped (the draw is deterministic either way)
                oracle = expected(spec, args)
                if not values_equal(val.value, oracle):  # the family's reference text and its oracle disagree
                    raise DensecodeError(f"codeio: family {spec.family.name!r}: {call} returns {val.text} in the "
                                         f"sandbox but the family's oracle says {oracle!r} (a bug in families.py)")
                out.append(_task(code, call, "", val.text, family=spec.family.name, category=spec.family.category,
                                 level=spec.family.level, split=split, split_key=spec.key, args=repr(args)))
    return out[:n]


# ------------------------------------------------------------------------------------------------ real data


def _mbpp_split(number: int | None, key: str) -> str | None:
    from densecode.eval.mbpp import MBPP_SPLITS

    if number is None:
        return split_of(key)
    for name in ("train", "validation", "test"):
        if number in MBPP_SPLITS[name]:
            return name
    return None if number in MBPP_SPLITS["prompt"] else split_of(key)


def calls_from_asserts(tests: list[str]) -> list[tuple[str, str | None]]:
    """(call, expected literal text or None) from `assert CALL == EXPECTED` lines; other shapes are skipped."""
    out = []
    for test in tests:
        try:
            node = ast.parse(test.strip()).body[0]
        except (SyntaxError, IndexError):
            continue
        if not (isinstance(node, ast.Assert) and isinstance(node.test, ast.Compare) and len(node.test.ops) == 1
                and isinstance(node.test.ops[0], ast.Eq) and isinstance(node.test.left, ast.Call)):
            continue
        right = node.test.comparators[0]
        try:
            ast.literal_eval(right)
            expected = ast.unparse(right)
        except (ValueError, SyntaxError, TypeError, RecursionError):
            expected = None
        out.append((ast.unparse(node.test.left), expected))
    return out


def _row_items(row: dict, where: str, max_calls: int) -> tuple[list[tuple[str, str, str, str | None]], int | None, str]:
    """(setup, code, call, literal the row expects or None) items of one row, its MBPP number, its id."""
    if "canonical_solution" in row and "base_input" in row:
        from densecode.eval.mbpp import evalplus_inputs, mbppplus_task_from_record

        t = mbppplus_task_from_record(row, where)
        if not all(isinstance(args, list) for args in t.base_input):
            raise DensecodeError(f"{where}: base_input must be a list of argument lists")
        code = t.canonical.replace("\r\n", "\n")
        inputs, n_base = evalplus_inputs(t)  # EvalPlus's argument types (JSON turned tuples into lists)
        calls = [f"{t.entry_point}({', '.join(repr(a) for a in args)})" for args in inputs[:min(n_base, max_calls)]]
        return [("", code, c, None) for c in calls], t.number, t.task_id
    if "code" in row and "call" in row:
        if not isinstance(row["code"], str) or not isinstance(row["call"], str):
            raise DensecodeError(f"{where}: 'code' and 'call' must be strings")
        return [(str(row.get("setup", "")), row["code"], row["call"], row.get("expected"))], None, \
            str(row.get("task_id", where))
    if "code" in row and "test_list" in row:
        from densecode.eval.mbpp import mbpp_task_from_record

        t = mbpp_task_from_record(row, where)
        code = t.canonical.replace("\r\n", "\n")
        setup = (t.setup or "").replace("\r\n", "\n")
        return [(setup, code, c, e) for c, e in calls_from_asserts(t.tests)[:max_calls]], t.number, t.task_id
    raise DensecodeError(f"{where}: a codeio row needs 'code' and 'call', MBPP fields 'code' and 'test_list', or "
                         f"MBPP+ fields 'canonical_solution' and 'base_input'; got keys {sorted(row)}")


def load_tasks(path: str | Path, *, strict: bool = False, pool: Any = None, max_calls: int = 3) -> list[dict]:
    """Tasks from a real-data file, values computed in the sandbox. A call whose value cannot be computed (an error,
    no literal value, too long) or that differs from the value the row's own assert states is rejected (one warning,
    or an error with strict)."""
    path = Path(path)
    rows = read_jsonl(path, what="tasks", hint=HINT)
    items, meta = [], []
    for where, row in numbered(path, rows):
        row_items, number, task_id = _row_items(row, where, max_calls)
        split = _mbpp_split(number, row_items[0][1] if row_items else where)
        if split is None:
            continue
        for k, item in enumerate(row_items):
            items.append(item)
            meta.append((where, f"{task_id}/{k}", split))
    values = compute_values([(s, c, call) for s, c, call, _ in items], pool, MAX_ANSWER_CHARS)
    tasks, rejected = [], []
    for (setup, code, call, stated), (where, task_id, split), val in zip(items, meta, values):
        why = None if val.ok else val.text
        if why is None and stated is not None:
            try:
                if not values_equal(ast.literal_eval(stated), val.value):
                    why = f"the reference returns {val.text[:60]} but the row's assert expects {stated[:60]}"
            except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError):
                pass
        if why is not None:
            line = f"{where}: task {task_id} ({call[:60]}) rejected: {why}"
            if strict:
                raise DensecodeError(line + "; fix or drop the row (or set tasks.strict: false to skip it)")
            rejected.append(line)
            continue
        tasks.append(_task(code, call, setup, val.text, task_id=f"codeio/{task_id}", family="real",
                           category="real", level=2, split=split))
    if rejected:
        warnings.warn(f"{len(rejected)} of {len(items)} codeio tasks rejected at load:\n" + "\n".join(rejected),
                      stacklevel=2)
    if not tasks:
        raise DensecodeError(f"{path}: no codeio task left after computing the values ({HINT})")
    return tasks

