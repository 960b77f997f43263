"""A testgen response -> its assert statements (with their character spans), each checked against the test language.

The test language: an `assert` whose expressions use only literals, the names the reference defines at top level
(its functions, classes and constants), a few pure builtins (`SAFE_BUILTINS`), operators, subscripts, and calls of
those names or of non-underscore methods. No other names, no `_`-prefixed attributes (so no `__globals__`, no
`__class__`), no lambdas, comprehensions, f-strings, walrus or `str.format`. This keeps an assert from reaching the
harness it runs beside (it could otherwise forge its own coverage); a rejected assert is judged as failing.

A response that does not parse as a whole is read line by line (a continuation joined while the statement is
open), so the asserts before a cut-off last line still count; the lines that parse nowhere are the `syntax`
component's to penalise.
"""

from __future__ import annotations

import ast
import warnings
from dataclasses import dataclass

SAFE_BUILTINS = frozenset({
    "abs", "all", "any", "bool", "dict", "divmod", "float", "frozenset", "int", "len", "list", "max", "min", "range",
    "reversed", "round", "set", "sorted", "str", "sum", "tuple", "zip", "enumerate", "isinstance", "ord", "chr",
})
BANNED_METHODS = frozenset({"format", "format_map", "mro"})
_ALLOWED_NODES = (
    ast.Expression, ast.Constant, ast.Name, ast.Load, ast.Call, ast.keyword, ast.Attribute, ast.Compare, ast.BoolOp,
    ast.UnaryOp, ast.BinOp, ast.List, ast.Tuple, ast.Set, ast.Dict, ast.Subscript, ast.Slice, ast.IfExp, ast.Starred,
    ast.cmpop, ast.boolop, ast.unaryop, ast.operator, ast.expr_context,
)
MAX_SOURCE_CHARS = 2000  # one assert longer than this is not a unit test


@dataclass
class ParsedAssert:
    source: str  # the statement's text as written
    span: tuple[int, int]  # characters of the response
    problem: str | None = None  # why it is rejected (not run), None when it is a valid test

    @property
    def valid(self) -> bool:
        return self.problem is None


def quiet_parse(source: str) -> ast.Module:
    """ast.parse without the source's own warnings (e.g. MBPP's invalid escape sequences in regex strings)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ast.parse(source)


def top_level_names(reference: str) -> set[str]:
    """Names the reference binds at module level (what its tests may call)."""
    names: set[str] = set()
    for node in quiet_parse(reference).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                names |= {n.id for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def check_assert(node: ast.Assert, allowed: set[str]) -> str | None:
    """Why `node` is outside the test language (None: it is inside)."""
    for expr in (node.test, node.msg):
        if expr is None:
            continue
        for sub in ast.walk(expr):
            if not isinstance(sub, _ALLOWED_NODES):
                return f"{type(sub).__name__} is not allowed in a test"
            if isinstance(sub, ast.Name) and sub.id not in allowed and sub.id not in SAFE_BUILTINS:
                return f"name {sub.id!r} is not the function under test or an allowed builtin"
            if isinstance(sub, ast.Attribute) and (sub.attr.startswith("_") or sub.attr in BANNED_METHODS):
                return f"attribute {sub.attr!r} is not allowed in a test"
    return None


def _line_starts(text: str) -> list[int]:
    starts = [0]
    for i, ch in enumerate(text):
        if ch == "\n":
            starts.append(i + 1)
    return starts


def _from_module(text: str, tree: ast.Module, offset: int, allowed: set[str]) -> list[ParsedAssert]:
    starts = _line_starts(text)
    out = []
    for node in tree.body:
        start = starts[node.lineno - 1] + node.col_offset
        end = starts[node.end_lineno - 1] + node.end_col_offset
        src = text[start:end]
        if not isinstance(node, ast.Assert):
            out.append(ParsedAssert(src, (offset + start, offset + end), f"not an assert ({type(node).__name__})"))
            continue
        problem = "assert too long" if len(src) > MAX_SOURCE_CHARS else check_assert(node, allowed)
        out.append(ParsedAssert(src, (offset + start, offset + end), problem))
    return out


def parse_asserts(response: str, reference: str) -> list[ParsedAssert]:
    """The statements of `response` in order: asserts (valid or with their problem) and other statements."""
    allowed = top_level_names(reference)
    try:
        return _from_module(response, quiet_parse(response), 0, allowed)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        pass
    out: list[ParsedAssert] = []
    lines = response.split("\n")
    starts = _line_starts(response)
    i = 0
    while i < len(lines):
        for j in range(i, min(i + 8, len(lines))):  # an open bracket may continue over a few lines
            chunk = "\n".join(lines[i:j + 1])
            try:
                tree = quiet_parse(chunk)
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                continue
            out.extend(_from_module(chunk, tree, starts[i], allowed))
            i = j + 1
            break
        else:
            i += 1  # a line that starts no parseable statement: the syntax component's business
    return out
