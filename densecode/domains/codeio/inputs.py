"""codeio's second direction: given a function and the value a call returned, propose the call's argument(s).

Prompt: the instruction, the function, and an assert whose call is left open after the target value:

    # Complete the call with argument(s), written as Python literals, for which it returns the value on the left.
    def running(nums):
        ...

    assert [3, 2, 6] == running(

The answer (the response up to its first newline) is the argument list and the closing parenthesis: `[3, -1, 4])`.
Parsing (`parse_arguments`): `ENTRY(` + answer must parse as one call of the task's function whose arguments are all
literals (each read with `ast.literal_eval`; positional or `name=literal`, no `*`/`**`), with nothing after it.
Judge (`judge_answers`): the function runs on those arguments in densecode's sandbox -- one program per distinct call,
built from the values' own reprs, never from the answer's text -- and the returned value must equal the target under
`values_equal`, the forward direction's equality. Any input that gives the target is correct, not only the original.

Where a malformed answer first goes wrong (`parse_arguments(...).departure`): the start of the first argument that is not a literal,
the first character after the call's closing parenthesis, else where Python's parser reports the error; an answer
that stops before the call is closed departs at its end.
"""

from __future__ import annotations

import ast
import hashlib
from dataclasses import dataclass, field
from typing import Any

from densecode.domains.codeio.literal import (
    MAX_ANSWER_CHARS,
    NotALiteral,
    parse_answer,
    values_equal,
)

INPUT_INSTRUCTION = ("# Complete the call with argument(s), written as Python literals, for which it returns the value "
                     "on the left.\n")
JUDGE_MAX_CHARS = 10_000  # a returned value longer than this (as a repr) is not compared: it is a wrong answer


@dataclass
class ParsedArguments:
    ok: bool
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    departure: int | None = None  # first offending character of the answer (not ok)
    why: str = ""


def input_prompt(code: str, setup: str, entry: str, target: str) -> str:
    shown = "\n".join(p.rstrip("\n") for p in (setup, code) if p.strip())
    return f"{INPUT_INSTRUCTION}{shown}\n\nassert {target} == {entry}("


def call_arguments(call: str) -> tuple[str, str] | None:
    """(function name, the call's argument text with its closing parenthesis) when `call` is `name(literal, ...)`;
    None for any other call (a method, a nested call, a non-literal argument): such a task has no input direction."""
    try:
        node = ast.parse(call.strip(), mode="eval").body
    except SyntaxError:
        return None
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
        return None
    for arg in [*node.args, *(k.value for k in node.keywords)]:
        if isinstance(arg, ast.Starred):
            return None
        try:
            ast.literal_eval(arg)
        except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError):
            return None
    if any(k.arg is None for k in node.keywords):
        return None
    text = call.strip()
    head = node.func.id + "("
    if not text.startswith(head):
        return None
    return node.func.id, text[len(head):]


def _top_call(node: ast.AST, entry: str) -> ast.Call | None:
    """The call `entry(...)` the source starts with, however the parser nested it (`f(1) + 2`, `f(1)(2)`, `f(1).x`)."""
    while True:
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Name) and node.func.id == entry and node.func.col_offset == 0:
                return node
            node = node.func
        elif isinstance(node, (ast.BinOp, ast.Compare)):
            node = node.left
        elif isinstance(node, ast.BoolOp):
            node = node.values[0]
        elif isinstance(node, (ast.Attribute, ast.Subscript)):
            node = node.value
        else:
            return None


def parse_arguments(answer: str, entry: str) -> ParsedArguments:
    """The literal arguments of an input-direction answer, or where it first goes wrong (rules in the module doc)."""
    text = answer.rstrip()
    if len(text) > MAX_ANSWER_CHARS:
        return ParsedArguments(False, departure=MAX_ANSWER_CHARS, why=f"answer longer than {MAX_ANSWER_CHARS} characters")
    head = entry + "("
    source = head + text
    try:
        node = ast.parse(source, mode="eval").body
    except SyntaxError as exc:
        return ParsedArguments(False, departure=scan_departure(text, head),
                               why=f"not a call with literal arguments ({exc.msg})")
    except (ValueError, RecursionError, MemoryError):
        return ParsedArguments(False, departure=0, why="not a call with literal arguments")
    call = _top_call(node, entry)
    if call is None:  # cannot happen for source starting with `entry(` that parses; kept for safety
        return ParsedArguments(False, departure=0, why="not a call of the function")
    end = _offset(source, call.end_lineno, call.end_col_offset)
    if call is not node or end != len(source):
        return ParsedArguments(False, departure=max(0, end - len(head)), why="text after the call's closing parenthesis")
    args, kwargs = [], {}
    for arg in call.args:
        value = _literal(arg)
        if value is _NOT:
            return _not_literal(arg, source, text, head)
        args.append(value)
    for kw in call.keywords:
        value = _literal(kw.value) if kw.arg is not None else _NOT
        if value is _NOT:
            return _not_literal(kw, source, text, head)
        kwargs[kw.arg] = value
    return ParsedArguments(True, tuple(args), kwargs)


def _not_literal(node: ast.AST, source: str, text: str, head: str) -> ParsedArguments:
    """The departure inside a non-literal argument: its first name (`[1, x]` -> `x`), else its first character."""
    start = _offset(source, node.lineno, node.col_offset) - len(head)
    stop = _offset(source, node.end_lineno, node.end_col_offset) - len(head)
    scanned = start if isinstance(node, ast.Starred) else scan_departure(text, head)
    return ParsedArguments(False, departure=scanned if start <= scanned < stop else start,
                           why="an argument that is not a literal")


_NOT = object()


def _literal(node: ast.AST) -> Any:
    if isinstance(node, ast.Starred):
        return _NOT
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError):
        return _NOT


def _offset(source: str, lineno: int, col: int) -> int:
    """Character offset in `source` of (1-based line, 0-based UTF-8 byte column) as the ast module reports them."""
    lines = source.splitlines(keepends=True)
    before = sum(len(x) for x in lines[:lineno - 1])
    line = lines[lineno - 1] if lineno - 1 < len(lines) else ""
    return before + len(line.encode("utf-8")[:col].decode("utf-8", errors="ignore"))


_OPENERS = {"(": ")", "[": "]", "{": "}"}
_LITERAL_NAMES = {"True", "False", "None"}


def scan_departure(text: str, head: str) -> int:
    """First offending character of an answer that does not parse: token by token, the first token that is a name
    other than True/False/None (or a keyword argument's name), that closes the wrong bracket, that follows the call's
    closing parenthesis, or after which `head + text` cannot be completed by closing the open brackets; the answer's
    end when every token passes (an unclosed call or literal: it stops too early)."""
    import io
    import tokenize

    tokens = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            tokens.append(tok)  # noqa: PERF402 - one by one: the tokens before an error are kept
    except (tokenize.TokenError, SyntaxError):
        pass  # an unterminated string or bracket: the tokens before it are judged, then the end
    skip = (tokenize.NEWLINE, tokenize.NL, tokenize.ENDMARKER, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT)
    tokens = [t for t in tokens if t.type not in skip and t.start[0] == 1]
    stack = ["("]  # the call's own parenthesis, opened by the prompt
    for k, tok in enumerate(tokens):
        start = tok.start[1]
        if not stack:
            return start  # text after the call's closing parenthesis
        if tok.type == tokenize.NAME and tok.string not in _LITERAL_NAMES:
            keyword = len(stack) == 1 and k + 1 < len(tokens) and tokens[k + 1].string == "="
            if not (keyword or (tok.string == "set" and text[tok.end[1]:tok.end[1] + 2] == "()")):
                return start
        if tok.type == tokenize.OP and tok.string in _OPENERS:
            stack.append(tok.string)
        elif tok.type == tokenize.OP and tok.string in (")", "]", "}"):
            if _OPENERS[stack[-1]] != tok.string:
                return start
            stack.pop()
        if tok.type == tokenize.ERRORTOKEN and tok.string[:1] in ("'", '"'):
            return len(text)  # an unterminated string: the answer stops inside a literal
        if not _viable(head + text[:tok.end[1]], "".join(_OPENERS[b] for b in reversed(stack))):
            return start
    return len(text)


# What may follow a viable prefix before its brackets close: nothing, a value, or a dict entry's value or whole entry.
_FILLS = ("", "0", " 0", ": 0", " 0: 0")


def _viable(prefix: str, closing: str) -> bool:
    """Can the prefix be completed into a valid expression (tried: a short fill, then the open brackets closed)?"""
    for fill in _FILLS:
        try:
            compile(prefix + fill + closing, "<answer>", "eval")
            return True
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
    return False


def call_source(entry: str, parsed: ParsedArguments) -> str:
    """The call the sandbox runs, written from the argument values (never from the answer's own text)."""
    parts = [repr(a) for a in parsed.args] + [f"{k}={v!r}" for k, v in parsed.kwargs.items()]
    return f"{entry}({', '.join(parts)})"


@dataclass
class InputVerdict:
    correct: bool
    outcome: str  # success | not_a_call | empty | wrong_value | runtime_error | timeout
    parsed: ParsedArguments
    message: str = ""


def judge_answers(tasks: list[dict], answers: list[str], pool: Any = None) -> list[InputVerdict]:
    """Each input-direction answer judged: its literal arguments run through the task's function in the sandbox."""
    from densecode.domains.codeio.values import compute_values

    verdicts: list[InputVerdict | None] = [None] * len(tasks)
    runs: list[tuple[int, tuple[str, str, str]]] = []
    for i, (task, answer) in enumerate(zip(tasks, answers)):
        if not answer.strip():
            verdicts[i] = InputVerdict(False, "empty", ParsedArguments(False, departure=0, why="empty answer"))
            continue
        parsed = parse_arguments(answer, task["entry"])
        if not parsed.ok:
            verdicts[i] = InputVerdict(False, "not_a_call", parsed, parsed.why)
            continue
        verdicts[i] = InputVerdict(False, "wrong_value", parsed)
        runs.append((i, (task.get("setup", ""), task["code"], call_source(task["entry"], parsed))))
    if runs:
        computed = compute_values([item for _, item in runs], pool, JUDGE_MAX_CHARS)
        for (i, (_, _, call)), value in zip(runs, computed):
            verdict = verdicts[i]
            target = _target(tasks[i])
            if value.ok and values_equal(value.value, target):
                verdict.correct, verdict.outcome, verdict.message = True, "success", f"{call} returns the target"
            elif value.ok:
                verdict.message = f"{call} returns {value.text[:80]}, not the target"
            else:
                kind = value.text.split(":", 1)[0]
                verdict.outcome = kind if kind in ("runtime_error", "timeout") else "wrong_value"
                verdict.message = f"{call}: {value.text[:120]}"
    return verdicts  # type: ignore[return-value]


_TARGETS: dict[str, Any] = {}


def _target(task: dict) -> Any:
    text = task["expected"]
    key = hashlib.sha256(text.encode()).hexdigest()
    if key not in _TARGETS:
        if len(_TARGETS) > 100_000:
            _TARGETS.clear()
        try:
            _TARGETS[key] = parse_answer(text)
        except NotALiteral:
            raise ValueError(f"codeio task {task.get('task_id')}: its target {text[:60]!r} is not a literal") from None
    return _TARGETS[key]
