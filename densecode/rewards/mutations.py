"""Realistic reward workloads from MBPP: reference solutions and broken variants.

Used by `benchmarks/speed/reward_throughput.py` and `benchmarks/figures/explain_screenshot.py`:
each MBPP task gives a chat-style or completion-style sample whose code is the
reference solution or a mutation of it with a known kind of fault:
- `syntax`: the colon of the first block opener removed;
- `lint`: an unused import, a star-less `eval` and an ambiguous name added;
- `wrong`: the last `return` returns None instead (wrong answers);
- `exception`: `1 / 0` inserted as the body's first line (a located runtime error).

`position_probe` is the syntax locator's ground truth: ` $` appended to a middle
line, so the first character no continuation can accept (`$`) is known exactly;
`insertion_probes` puts a `$` or `?` right before randomly chosen tokens instead.
"""

from __future__ import annotations

import ast
import io
import random
import re
import tokenize
import warnings
from pathlib import Path

KINDS = ("reference", "syntax", "lint", "wrong", "exception")


def load_mbpp(path: str | Path) -> list[dict]:
    from densecode.jsonl import read_jsonl

    return read_jsonl(path, what="MBPP records")


def _body_indent(lines: list[str], def_index: int) -> str:
    for line in lines[def_index + 1:]:
        if line.strip():
            return line[: len(line) - len(line.lstrip())]
    return "    "


def mutate(code: str, kind: str) -> str:
    code = code.replace("\r\n", "\n")
    lines = code.split("\n")
    def_index = next((i for i, ln in enumerate(lines) if ln.lstrip().startswith("def ")), 0)
    if kind == "reference":
        return code
    if kind == "syntax":
        for i, ln in enumerate(lines):
            if ln.rstrip().endswith(":"):
                lines[i] = ln.rstrip()[:-1]
                return "\n".join(lines)
        return code + "\n)"
    if kind == "lint":
        indent = _body_indent(lines, def_index)
        lines.insert(def_index + 1, f"{indent}l = eval('0')")
        return "import os\n" + "\n".join(lines)
    if kind == "wrong":
        for i in range(len(lines) - 1, def_index, -1):
            m = re.match(r"^(\s*)return\b", lines[i])
            if m:
                lines[i] = f"{m.group(1)}return None"
                return "\n".join(lines)
        return "\n".join(lines + ["    return None"])
    if kind == "exception":
        indent = _body_indent(lines, def_index)
        lines.insert(def_index + 1, f"{indent}ratio = 1 / 0")
        return "\n".join(lines)
    raise ValueError(f"unknown mutation kind {kind!r}")


def mbpp_workload(rows: list[dict], n: int, seed: int = 0, kinds: tuple[str, ...] = KINDS) -> list[dict]:
    """n items {prompt, response, task, kind}: half chat-style (fenced), half completion-style."""
    rng = random.Random(seed)
    items = []
    for k in range(n):
        row = rows[k % len(rows)]
        kind = kinds[k % len(kinds)]
        code = mutate(row["code"], kind)
        task = {"task_id": row["task_id"], "tests": list(row["test_list"]), "setup": row.get("test_setup_code", ""),
                "reference": row["code"].replace("\r\n", "\n")}
        if rng.random() < 0.5:
            prompt = f"{row['text']}\nYour code should pass this test:\n{row['test_list'][0]}\n"
            response = f"Here is a solution:\n```python\n{code}\n```\nIt returns the required value."
        else:
            prompt = f'"""{row["text"]}"""\n```python\n'
            response = f"{code}\n```"
        items.append({"prompt": prompt, "response": response, "task": task, "kind": kind})
    return items


def position_probe(code: str) -> tuple[str, int] | None:
    """(program, index of its first invalid character): ` $` appended to a middle code line.

    The line is the one nearest the middle whose end is code: not inside a string,
    not after a comment or a line-continuation backslash (where `$` would be valid
    or the space already wrong). Everything before the `$` is a prefix of the valid
    original (plus a trailing space), and `$` is invalid wherever code may stand, so
    it is the exact first invalid character. None when `code` does not parse.
    """
    code = code.replace("\r\n", "\n")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escapes in some references
            ast.parse(code)
        tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
    except (SyntaxError, ValueError, tokenize.TokenError):
        return None
    ends_in_code = {t.start[0] for t in tokens if t.type in (tokenize.NEWLINE, tokenize.NL) and t.start[1] > 0}
    ends_in_code -= {t.start[0] for t in tokens if t.type == tokenize.COMMENT}
    lines = code.split("\n")
    rows = [n for n in sorted(ends_in_code) if lines[n - 1].strip() and not lines[n - 1].rstrip().endswith("\\")]
    if not rows:
        return None
    middle = len(lines) // 2
    row = min(rows, key=lambda n: (abs(n - 1 - middle), n))
    lines[row - 1] += " $"
    program = "\n".join(lines)
    return program, sum(len(ln) + 1 for ln in lines[:row]) - 2


_LAYOUT_TOKENS = {tokenize.NEWLINE, tokenize.NL, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER}


def insertion_probes(code: str, rng: random.Random, n: int = 3, chars: str = "$?") -> list[tuple[str, int]]:
    """[(program, index of its first invalid character)]: a `$` or `?` inserted before `n` random tokens.

    Everything before a token's start is a prefix of the valid original, and neither
    character can stand anywhere in code, so the inserted one is the first invalid
    character. [] when `code` does not parse.
    """
    code = code.replace("\r\n", "\n")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(code)
        tokens = [t for t in tokenize.generate_tokens(io.StringIO(code).readline) if t.type not in _LAYOUT_TOKENS]
    except (SyntaxError, ValueError, tokenize.TokenError):
        return []
    line_starts = [0]
    for line in code.split("\n"):
        line_starts.append(line_starts[-1] + len(line) + 1)
    out = []
    for t in rng.sample(tokens, min(n, len(tokens))):
        pos = line_starts[t.start[0] - 1] + t.start[1]
        out.append((code[:pos] + rng.choice(chars) + code[pos:], pos))
    return out
