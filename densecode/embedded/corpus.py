"""Offline training material for densecode-tiny.

Sources, all on this machine (no network):
- `stdlib_functions`: short, clean functions from the running interpreter's own
  standard library (general Python: indentation, idioms, names);
- `domain_pairs`: the train splits of the five task domains (robotics, codegen, codeio, testgen,
  commitmsg) with their canonical answers, in the prompt format training and eval use;
- `mbpp_pairs`: MBPP's train split (task ids 601-974), when its file is given.

A narrow corpus in the target format matters far more than volume at this size
(see docs/probes.md), so the stdlib part is filtered hard and only mixed in.
"""

from __future__ import annotations

import ast
import os
import sysconfig
import textwrap
from dataclasses import dataclass
from pathlib import Path

# Parts of the stdlib that are tests, GUIs, generated tables or Python-2 era code:
# noisy material for a tiny model.
_SKIP_DIRS = {
    "test", "tests", "idlelib", "lib2to3", "tkinter", "turtledemo", "ensurepip", "site-packages",
    "dist-packages", "__pycache__", "pydoc_data", "encodings", "config-3.11", "venv", "msilib",
}
_SKIP_FILES = {"_pydecimal.py", "pydoc.py", "turtle.py", "_pyio.py", "this.py", "antigravity.py"}


@dataclass(frozen=True)
class Pair:
    """One supervised example: loss is taken on `response` (+ EOS) only."""

    prompt: str
    response: str
    source: str  # the domain it comes from, or "mbpp"


def stdlib_root() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def _iter_stdlib_files(root: Path):
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS and not d.startswith("."))
        for name in sorted(filenames):
            if name.endswith(".py") and name not in _SKIP_FILES and not name.startswith("test_"):
                yield Path(dirpath) / name


def _clean(src: str, min_lines: int, max_lines: int, max_chars: int) -> bool:
    lines = src.splitlines()
    if not (min_lines <= len(lines) <= max_lines) or len(src) > max_chars:
        return False
    if "\t" in src or "\r" in src or not src.isascii():
        return False
    if any(len(line) > 100 for line in lines):
        return False
    try:
        ast.parse(src)
    except SyntaxError:
        return False
    return True


def stdlib_functions(root: Path | None = None, *, min_lines: int = 3, max_lines: int = 30,
                     max_chars: int = 1200) -> list[str]:
    """Functions (and methods, dedented) from the stdlib, filtered to short clean ones.

    Deterministic for a given interpreter: files and functions are visited in sorted
    order and duplicates are dropped.
    """
    root = stdlib_root() if root is None else Path(root)
    seen: set[str] = set()
    out: list[str] = []
    for path in _iter_stdlib_files(root):
        try:
            text = path.read_text(encoding="utf-8")
            tree = ast.parse(text)
        except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
            continue
        lines = text.splitlines(keepends=True)
        for node in ast.walk(tree):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or node.decorator_list:
                continue
            seg = "".join(lines[node.lineno - 1: node.end_lineno])
            src = textwrap.dedent(seg)
            if not src.endswith("\n"):
                src += "\n"
            if src in seen or not _clean(src, min_lines, max_lines, max_chars):
                continue
            seen.add(src)
            out.append(src)
    return out


# ---------------------------------------------------------------------------
# The five task domains' training material, in the exact prompt format training and eval use.

TASK_DOMAINS = ("robotics", "codegen", "codeio", "testgen", "commitmsg")
HELD_OUT_GUARD = 1000  # the first tasks of each held-out split whose prompts never enter the training material


def domain_pairs(name: str, split: str, n: int, seed: int = 0) -> list[Pair]:
    """`n` distinct tasks of domain `name`'s `split` as (prompt, canonical answer) pairs.

    A domain's train split may be drawn with replacement, so this draws (up to 8 times) until `n` distinct prompts are in hand (or the
    pool runs dry); a held-out split gives its first `n`. The canonical answer is the one the domain's own judge
    accepts (tests check 100% of them pass), so nothing unjudged is trained on.
    """
    from densecode.domains.base import DomainOptions
    from densecode.domains.registry import get_domain_class

    domain = get_domain_class(name)()
    pairs: list[Pair] = []
    seen: set[str] = set()
    if split == "train":
        # RoboSim splits by program text, so a held-out instruction can also occur in train with a paraphrased
        # program (13 of the first 300 test tasks): keep every held-out prompt out of the training material.
        # Held-out draws depend on the seed in RoboSim: guard quality's (0) and the trainer's eval draw (eval_seed).
        seeds = (0, int(DomainOptions().eval_seed))
        seen = {t["prompt"] for s in ("validation", "test") for seed_ in seeds
                for t in domain.tasks(s, HELD_OUT_GUARD, seed_)}
    draw = 0
    while len(pairs) < n and draw < 8:
        tasks = domain.tasks(split, n, seed + 7919 * draw)
        for task in tasks:
            answer = domain.canonical_response(task)
            if answer is None and name == "robotics":
                answer = task.get("reference")
            if answer is None or task["prompt"] in seen:
                continue
            seen.add(task["prompt"])
            pairs.append(Pair(task["prompt"], answer, name))
            if len(pairs) == n:
                break
        if split != "train":
            break
        draw += 1
    return pairs


def mbpp_pairs(path: str | Path, split: str = "train") -> list[Pair]:
    """MBPP tasks of one split (train = task ids 601-974) as (docstring problem, reference program) pairs, in the
    prompt format of `densecode eval --benchmark mbpp --few-shot 0` and of the codegen domain's MBPP loader."""
    from densecode.eval.mbpp import load_tasks

    tasks = load_tasks("mbpp", path, split=split)
    # MBPP's references mix CRLF and trailing spaces; the model should learn the code, not the line endings.
    return [Pair(t.problem, "\n".join(line.rstrip() for line in t.canonical.replace("\r\n", "\n").split("\n")).strip("\n")
                 + "\n", "mbpp") for t in tasks]
