"""The one JSONL reader: every task, rollout and sample file goes through `read_jsonl`.

Errors have one format, `FILE:LINE: what is wrong (how to fix it)`, raised as DensecodeError (exit code 2):
a missing file, bytes that are not UTF-8, a line that is not JSON, a line that is not an object, an empty file.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from densecode.errors import DensecodeError


def read_jsonl(path: str | Path, *, what: str = "records", hint: str = "",
               check: Callable[[Any, str], None] | None = None, allow_empty: bool = False,
               strings: bool = False) -> list[Any]:
    """The objects of a JSON-lines file, blank lines skipped.

    `what` names the rows in messages ("tasks", "rollouts"); `hint` says how to get a right file; `check(row, where)`
    validates one row and raises DensecodeError with `where` = "FILE:LINE"; `strings` also accepts a JSON string
    per line (a prompts file).
    """
    path = Path(path).expanduser()
    fix = f" ({hint})" if hint else ""
    if path.is_dir():
        raise DensecodeError(f"{path}: is a directory; expected a JSONL file of {what}{fix}")
    if not path.is_file():
        raise DensecodeError(f"{path}: file not found; expected a JSONL file of {what}{fix}")
    rows: list[dict] = []
    with path.open("rb") as fh:
        for number, raw in enumerate(fh, 1):
            where = f"{path}:{number}"
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise DensecodeError(f"{where}: not UTF-8 text (byte {exc.start}); save the file as UTF-8") from None
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DensecodeError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno}); "
                                     f"each line must be one JSON object") from None
            if not (isinstance(row, dict) or (strings and isinstance(row, str))):
                wanted = "a JSON object or string" if strings else "a JSON object"
                raise DensecodeError(f"{where}: expected {wanted}, got {type(row).__name__}")
            if check is not None:
                check(row, where)
            rows.append(row)
    if not rows and not allow_empty:
        raise DensecodeError(f"{path}: no {what} in the file{fix}")
    return rows


def numbered(path: str | Path, rows: list[Any]) -> list[tuple[str, Any]]:
    """(FILE:LINE, row) pairs for rows read by read_jsonl, for messages about one row (blank lines not counted)."""
    lines = []
    with Path(path).expanduser().open("rb") as fh:
        lines = [i for i, raw in enumerate(fh, 1) if raw.strip()]
    return [(f"{path}:{n}", r) for n, r in zip(lines, rows)]
