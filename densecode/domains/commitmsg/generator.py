"""Generated commitmsg tasks: an edit operator applied to a library function, shown as a unified diff; the reference
message is one of the operator's paraphrases filled with the edit's names.

Deterministic in (split, n, seed); a task's split is fixed by a hash of its diff (80/10/10), so splits are disjoint.
"""

from __future__ import annotations

import ast
import difflib
import hashlib
import random

from densecode.domains.commitmsg.edits import MESSAGES, OPERATORS, Edit
from densecode.domains.testgen.library import TEMPLATES, render

SPLITS = ("train", "validation", "test")
PROMPT_HEADER = "# Write a one-line commit message for this change.\n"


def split_of(content: str) -> str:
    bucket = int(hashlib.sha256(content.encode()).hexdigest()[:8], 16) % 100
    return "train" if bucket < 80 else ("validation" if bucket < 90 else "test")


def unified_diff(before: str, after: str, path: str) -> str:
    lines = difflib.unified_diff(before.rstrip("\n").split("\n"), after.rstrip("\n").split("\n"),
                                 fromfile=f"a/{path}", tofile=f"b/{path}", lineterm="")
    return "\n".join(lines) + "\n"


def format_prompt(diff: str) -> str:
    return f"{PROMPT_HEADER}{diff}\nCommit message:"


def task_from_diff(diff: str, message: str, *, task_id: str, level: int = 2, op: str = "real") -> dict:
    return {"task_id": task_id, "prompt": format_prompt(diff), "diff": diff, "reference": message,
            "canonical": " " + message, "level": level, "op": op, "split": split_of(diff)}


def make_task(edit: Edit, fn_name: str, family: str, rng: random.Random) -> dict:
    level, paraphrases = MESSAGES[edit.op]
    message = rng.choice(paraphrases).format(fn=fn_name, **edit.facts)
    diff = unified_diff(edit.before, edit.after, f"{family}.py")
    digest = hashlib.sha256(diff.encode()).hexdigest()[:12]
    return task_from_diff(diff, message, task_id=f"commitmsg/{edit.op}/{digest}", level=level, op=edit.op)


def generate_tasks(split: str, n: int, seed: int, levels: tuple[int, ...] = (1, 2, 3)) -> list[dict]:
    if split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(SPLITS)}; got {split!r}")
    ops = [name for name, (lvl, _) in MESSAGES.items() if lvl in levels]
    rng = random.Random(f"commitmsg:{split}:{seed}")
    out, seen = [], set()
    attempts = 0
    while len(out) < n:
        attempts += 1
        op = ops[rng.randrange(len(ops))]
        for _ in range(40):  # an operator applies to some functions only: draw functions until one fits
            r = render(TEMPLATES[rng.randrange(len(TEMPLATES))], rng)
            edit = OPERATORS[op](r, rng)
            if edit is not None and edit.before != edit.after:
                break
        else:
            continue
        ast.parse(edit.before)
        ast.parse(edit.after)  # an operator that breaks the code is a bug: fail loudly
        task = make_task(edit, r.entry, r.template.family, rng)
        if task["split"] != split or (task["diff"] in seen and attempts < 50 * n + 1000):
            continue
        seen.add(task["diff"])
        out.append(task)
    return out
