"""Real commitmsg tasks from any jsonl of `{before, after, message}` or `{diff, message}` rows.

`before`/`after` become a unified diff (the `path` field names the file, default `file.py`); a `diff` is used as is.
The reference is the message's first line. A malformed row is a `file:line: ...` error; a row whose canonical answer
fails its own judge (a message with no word, or an empty diff) is rejected with its reason and not trained on.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

from densecode.domains.commitmsg.generator import task_from_diff, unified_diff
from densecode.domains.commitmsg.metrics import first_line, words
from densecode.errors import DensecodeError
from densecode.jsonl import numbered, read_jsonl


def task_from_row(row: dict, where: str) -> dict:
    message = row.get("message")
    if not isinstance(message, str):
        raise DensecodeError(f"{where}: a commitmsg row needs 'message' and either 'diff' or 'before' + 'after'; "
                             f"got keys {sorted(row)}")
    if isinstance(row.get("diff"), str):
        diff = row["diff"] if row["diff"].endswith("\n") else row["diff"] + "\n"
    elif isinstance(row.get("before"), str) and isinstance(row.get("after"), str):
        diff = unified_diff(row["before"], row["after"], str(row.get("path") or "file.py"))
    else:
        raise DensecodeError(f"{where}: a commitmsg row needs 'diff' (a string) or 'before' and 'after' (strings)")
    level = row.get("level", 2)
    if level not in (1, 2, 3):
        raise DensecodeError(f"{where}: 'level' must be 1, 2 or 3; got {level!r}")
    digest = hashlib.sha256(diff.encode()).hexdigest()[:12]
    task = task_from_diff(diff, first_line(message), task_id=str(row.get("task_id", f"commitmsg/real/{digest}")),
                          level=int(level))
    task["where"] = where
    return task


def load_tasks(path: str | Path, *, limit: int = 0, log=sys.stderr) -> tuple[list[dict], list[str]]:
    path = Path(path)
    rows = read_jsonl(path, what="commitmsg tasks", hint="rows of {before, after, message} or {diff, message}")
    tasks = [task_from_row(row, where) for where, row in numbered(path, rows)]
    if limit:
        tasks = tasks[:limit]
    accepted, rejected = [], []
    for t in tasks:
        changed = any(ln.startswith(("+", "-")) and not ln.startswith(("+++", "---")) for ln in t["diff"].split("\n"))
        if not words(t["reference"]):
            rejected.append(f"{t['where']}: rejected: the message has no word to score against")
        elif not changed:
            rejected.append(f"{t['where']}: rejected: the diff changes no line")
        else:
            accepted.append(t)
    if rejected and log is not None:
        print(f"commitmsg: {len(rejected)} of {len(tasks)} rows in {path} rejected:", file=log)
        for line in rejected[:20]:
            print("  " + line, file=log)
    if not accepted:
        raise DensecodeError(f"{path}: no usable task (first problem: {rejected[0] if rejected else 'no rows'})")
    return accepted, rejected
