"""Offline training material for densecode-tiny.

Sources, all reproducible on any machine without a network:
- `stdlib_functions`: short, clean functions from the running interpreter's own
  standard library (general Python: indentation, idioms, names);
- `robotics_pairs`: the RoboSim generator's training split as (prompt, response)
  pairs in the exact format `densecode train --domain robotics` uses;
- `synthetic_function_pairs`: small docstring -> body tasks for the `code` domain;
- for the five-task recipe (`densecode build-model --recipe multitask`): `domain_pairs`, the train splits of the
  task domains with their canonical answers, and `mbpp_pairs`, MBPP's train split (task ids 601-974).

A narrow corpus in the target format matters far more than volume at this size
(see docs/probes.md), so the stdlib part is filtered hard and only mixed in.
"""

from __future__ import annotations

import ast
import functools
import os
import random
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
    source: str  # "robotics" | "code", or a task domain or "mbpp" in the multitask recipe


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


def robotics_pairs(split: str = "train", n: int | None = None, seed: int = 0) -> list[Pair]:
    """RoboSim generator tasks as prompt/response pairs (prompt ends with `def task_program():\\n`)."""
    try:
        from densecode_robosim.tasks import generate_tasks
    except ImportError as exc:  # pragma: no cover - robosim ships with densecode
        from densecode.errors import DensecodeError

        raise DensecodeError(
            f"cannot import the RoboSim task generator ({exc}); reinstall densecode with `pip install -e .`"
        ) from exc
    tasks = generate_tasks(split=split, n=n, seed=seed)
    return [Pair(t.prompt, t.reference, "robotics") for t in tasks]


# ---------------------------------------------------------------------------
# Synthetic small function tasks (docstring -> body) for the `code` domain.
# Each template: (docstring, parameter names, body using those names). Names of
# the function and its parameters are drawn at random so the model learns to bind
# the arguments it is given instead of memorising one spelling.

_TEMPLATES: list[tuple[str, tuple[str, ...], str]] = [
    ("Return the sum of {a} and {b}.", ("a", "b"), "return {a} + {b}"),
    ("Return the product of {a} and {b}.", ("a", "b"), "return {a} * {b}"),
    ("Return {a} minus {b}.", ("a", "b"), "return {a} - {b}"),
    ("Return True if {a} is even, else False.", ("a",), "return {a} % 2 == 0"),
    ("Return True if {a} is odd, else False.", ("a",), "return {a} % 2 == 1"),
    ("Return the square of {a}.", ("a",), "return {a} * {a}"),
    ("Return the larger of {a} and {b}.", ("a", "b"), "if {a} > {b}:\n    return {a}\nreturn {b}"),
    ("Return the smaller of {a} and {b}.", ("a", "b"), "if {a} < {b}:\n    return {a}\nreturn {b}"),
    ("Return the absolute value of {a}.", ("a",), "if {a} < 0:\n    return -{a}\nreturn {a}"),
    ("Return the string {a} reversed.", ("a",), "return {a}[::-1]"),
    ("Return the length of the list {a}.", ("a",), "return len({a})"),
    ("Return the sum of the numbers in the list {a}.", ("a",),
     "total = 0\nfor x in {a}:\n    total += x\nreturn total"),
    ("Return the largest number in the list {a}.", ("a",),
     "best = {a}[0]\nfor x in {a}:\n    if x > best:\n        best = x\nreturn best"),
    ("Return the smallest number in the list {a}.", ("a",),
     "best = {a}[0]\nfor x in {a}:\n    if x < best:\n        best = x\nreturn best"),
    ("Return a list of the even numbers in {a}.", ("a",), "return [x for x in {a} if x % 2 == 0]"),
    ("Return a list of the odd numbers in {a}.", ("a",), "return [x for x in {a} if x % 2 == 1]"),
    ("Return a list with every element of {a} doubled.", ("a",), "return [x * 2 for x in {a}]"),
    ("Return a list with every element of {a} squared.", ("a",), "return [x * x for x in {a}]"),
    ("Return the number of times {b} occurs in {a}.", ("a", "b"),
     "count = 0\nfor x in {a}:\n    if x == {b}:\n        count += 1\nreturn count"),
    ("Return the string {a} in upper case.", ("a",), "return {a}.upper()"),
    ("Return the string {a} in lower case.", ("a",), "return {a}.lower()"),
    ("Return True if the string {a} is a palindrome.", ("a",), "return {a} == {a}[::-1]"),
    ("Return the number of vowels in the string {a}.", ("a",),
     "count = 0\nfor ch in {a}.lower():\n    if ch in 'aeiou':\n        count += 1\nreturn count"),
    ("Return the factorial of {a}.", ("a",),
     "result = 1\nfor i in range(2, {a} + 1):\n    result *= i\nreturn result"),
    ("Return the first {b} elements of the list {a}.", ("a", "b"), "return {a}[:{b}]"),
    ("Return the last element of the list {a}.", ("a",), "return {a}[-1]"),
    ("Return the average of the numbers in the list {a}.", ("a",), "return sum({a}) / len({a})"),
    ("Return the list {a} sorted in ascending order.", ("a",), "return sorted({a})"),
    ("Return the list {a} sorted in descending order.", ("a",), "return sorted({a}, reverse=True)"),
    ("Return the list {a} without duplicates, keeping the first occurrence.", ("a",),
     "seen = []\nfor x in {a}:\n    if x not in seen:\n        seen.append(x)\nreturn seen"),
    ("Return the words of the sentence {a} as a list.", ("a",), "return {a}.split()"),
    ("Return the number of words in the sentence {a}.", ("a",), "return len({a}.split())"),
    ("Return True if {b} is in the list {a}.", ("a", "b"), "return {b} in {a}"),
    ("Return the sum of the digits of the non-negative integer {a}.", ("a",),
     "total = 0\nwhile {a} > 0:\n    total += {a} % 10\n    {a} //= 10\nreturn total"),
    ("Return the {a}-th Fibonacci number (fib(0) = 0, fib(1) = 1).", ("a",),
     "x, y = 0, 1\nfor _ in range({a}):\n    x, y = y, x + y\nreturn x"),
    ("Return True if {a} is a prime number.", ("a",),
     ("if {a} < 2:\n    return False\nfor i in range(2, int({a} ** 0.5) + 1):\n"
      "    if {a} % i == 0:\n        return False\nreturn True")),
    ("Return a dictionary mapping each character of {a} to its count.", ("a",),
     "counts = {{}}\nfor ch in {a}:\n    counts[ch] = counts.get(ch, 0) + 1\nreturn counts"),
    ("Return the list {a} with {b} appended.", ("a", "b"), "return {a} + [{b}]"),
    ("Return {a} raised to the power {b}.", ("a", "b"), "return {a} ** {b}"),
    ("Return the remainder of {a} divided by {b}.", ("a", "b"), "return {a} % {b}"),
    ("Return the integer division of {a} by {b}.", ("a", "b"), "return {a} // {b}"),
    ("Return the string {a} repeated {b} times.", ("a", "b"), "return {a} * {b}"),
    ("Return the concatenation of the strings {a} and {b}.", ("a", "b"), "return {a} + {b}"),
    ("Return True if the string {a} starts with {b}.", ("a", "b"), "return {a}.startswith({b})"),
    ("Return True if the string {a} ends with {b}.", ("a", "b"), "return {a}.endswith({b})"),
    ("Return the index of {b} in the list {a}, or -1 if it is absent.", ("a", "b"),
     "for i, x in enumerate({a}):\n    if x == {b}:\n        return i\nreturn -1"),
    ("Return the list {a} with all occurrences of {b} removed.", ("a", "b"),
     "return [x for x in {a} if x != {b}]"),
    ("Return the elements common to the lists {a} and {b}.", ("a", "b"),
     "return [x for x in {a} if x in {b}]"),
    ("Return the running totals of the list {a}.", ("a",),
     "out = []\ntotal = 0\nfor x in {a}:\n    total += x\n    out.append(total)\nreturn out"),
    ("Return the number of positive numbers in the list {a}.", ("a",),
     "return len([x for x in {a} if x > 0])"),
    ("Return the greatest common divisor of {a} and {b}.", ("a", "b"),
     "while {b}:\n    {a}, {b} = {b}, {a} % {b}\nreturn {a}"),
    ("Return the string {a} with spaces removed.", ("a",), "return {a}.replace(' ', '')"),
    ("Return the first character of the string {a}.", ("a",), "return {a}[0]"),
    ("Return {a} converted from Celsius to Fahrenheit.", ("a",), "return {a} * 9 / 5 + 32"),
    ("Return the list {a} rotated left by one position.", ("a",), "return {a}[1:] + {a}[:1]"),
    ("Return the sum of the squares of the numbers from 1 to {a}.", ("a",),
     "return sum(i * i for i in range(1, {a} + 1))"),
]

_VERBS = ["get", "compute", "find", "calc", "make", "count", "check", "do", "solve", "apply"]
_NOUNS = ["value", "result", "total", "answer", "item", "output", "number", "data", "thing", "stuff"]
_PARAMS = ["x", "y", "n", "m", "a", "b", "s", "t", "k", "nums", "items", "values", "text", "word",
           "lst", "arr", "num", "val", "first", "second", "left", "right", "p", "q", "seq", "data"]


def synthetic_function_pairs(n: int, seed: int = 0) -> list[Pair]:
    """`n` docstring -> body tasks: prompt = signature + docstring, response = the indented body."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        doc, params, body = rng.choice(_TEMPLATES)
        names = rng.sample(_PARAMS, len(params))
        mapping = dict(zip(params, names))
        fname = f"{rng.choice(_VERBS)}_{rng.choice(_NOUNS)}" if rng.random() < 0.5 else \
            "_".join(w.lower() for w in doc.split()[1:3] if w.isalpha()) or "func"
        prompt = (f"def {fname}({', '.join(names)}):\n"
                  f'    """{doc.format(**mapping)}"""\n')
        response = textwrap.indent(body.format(**mapping), "    ") + "\n"
        out.append(Pair(prompt, response, "code"))
    return out


# ---------------------------------------------------------------------------
# The five task domains' training material, in the exact prompt format training and eval use.

TASK_DOMAINS = ("robotics", "codegen", "codeio", "testgen", "commitmsg")
HELD_OUT_GUARD = 1000  # the first tasks of each held-out split whose prompts never enter the training material


@functools.cache
def held_out_prompts(name: str) -> frozenset[str]:
    """Prompts of the first HELD_OUT_GUARD validation and test tasks of domain `name`, never to be trained on.

    RoboSim splits by program text, so a held-out instruction can also occur in train with a paraphrased program
    (13 of the first 300 test tasks). Its held-out draws depend on the seed: this guards quality's (0) and the
    trainer's eval draw (`eval_seed`). Cached: the generators are deterministic.
    """
    from densecode.domains.base import DomainOptions
    from densecode.domains.registry import get_domain_class

    domain = get_domain_class(name)()
    seeds = (0, int(DomainOptions().eval_seed))
    return frozenset(t["prompt"] for split in ("validation", "test") for seed in seeds
                     for t in domain.tasks(split, HELD_OUT_GUARD, seed))


def domain_pairs(name: str, split: str, n: int, seed: int = 0, simple_answers: bool = True) -> list[Pair]:
    """`n` distinct tasks of domain `name`'s `split` as (prompt, canonical answer) pairs.

    A domain's train split may be drawn with replacement, so this draws (up to 8 times) until `n` distinct prompts are in hand (or the
    pool runs dry); a held-out split gives its first `n`. The canonical answer is the one the domain's own judge
    accepts (tests check 100% of them pass), so nothing unjudged is trained on. With `simple_answers`, a task that
    carries a `simple_canonical` answer (testgen's generated tasks: the shortest asserts reaching the canonical
    coverage) gives that one instead.
    """
    from densecode.domains.registry import get_domain_class

    domain = get_domain_class(name)()
    pairs: list[Pair] = []
    seen: set[str] = set()
    if split == "train":
        seen = set(held_out_prompts(name))
    draw = 0
    while len(pairs) < n and draw < 8:
        tasks = domain.tasks(split, n, seed + 7919 * draw)
        for task in tasks:
            # testgen's generated tasks carry the shortest asserts that reach the canonical coverage: a small model
            # can compute the expected values of short inputs, and they are judged like the canonical ones.
            answer = (simple_answers and task.get("simple_canonical")) or domain.canonical_response(task)
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
