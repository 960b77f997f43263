"""Code out of model responses, the way EvalPlus sanitises them.

Chat models answer with prose and markdown; the program is the first python
code block (an unterminated block runs to the end of the text, since a
generation cut by `max_new_tokens` or a stop string often never closes it).
Without any block the whole response is taken as code.

`sanitize` then keeps only what a judge should run: imports, function and
class definitions and top-level assignments. Top-level asserts, prints and
`if __name__ == "__main__":` blocks are dropped: a model's own (possibly
wrong) tests must not decide its verdict, and a demo loop must not time out
the judge. A truncated tail that does not parse is cut back to the longest
prefix of lines that does.
"""

from __future__ import annotations

import ast
import re
import warnings
from dataclasses import dataclass

_FENCE = re.compile(r"^[ \t]*```+[ \t]*([\w+.#-]*)[^\n]*$", re.MULTILINE)
_PYTHON_TAGS = {"python", "py", "python3", "py3"}


@dataclass
class CodeBlock:
    language: str  # lower-cased info string ("" when the fence had none)
    code: str
    closed: bool
    start: int = 0  # where `code` starts in the text (its span is start, start + len(code))


def code_blocks(text: str) -> list[CodeBlock]:
    """Every fenced block in `text`, in order; an unclosed last block runs to the end."""
    blocks: list[CodeBlock] = []
    fences = list(_FENCE.finditer(text))
    i = 0
    while i < len(fences):
        opening = fences[i]
        start = min(opening.end() + 1, len(text))  # skip the newline after the fence line
        if i + 1 < len(fences):
            closing = fences[i + 1]
            body = text[start:closing.start()].rstrip("\n")
            blocks.append(CodeBlock(opening.group(1).lower(), body, True, start))
            i += 2
        else:
            blocks.append(CodeBlock(opening.group(1).lower(), text[start:].rstrip("\n"), False, start))
            i += 1
    return blocks


def first_python_code_block(text: str) -> CodeBlock | None:
    """The first block tagged python (or, failing that, the first untagged one); None without blocks."""
    blocks = code_blocks(text)
    for block in blocks:
        if block.language in _PYTHON_TAGS:
            return block
    for block in blocks:
        if block.language == "":
            return block
    return None


def first_python_block(text: str) -> str | None:
    """The code of `first_python_code_block`; None without blocks."""
    block = first_python_code_block(text)
    return block.code if block is not None else None


def answer_code_span(text: str) -> tuple[int, int]:
    """Where a chat answer's code lies in `text`: its first python block (as `extract_code` takes it), else all of
    it. The reward regions of a chat response are this span, so they cover exactly the code eval judges."""
    block = first_python_code_block(text)
    if block is None:
        return 0, len(text)
    return block.start, block.start + len(block.code)


def _parsable_prefix(code: str) -> ast.Module | None:
    """Parse `code`, cutting trailing lines until it parses (a truncated generation)."""
    lines = code.splitlines()
    for end in range(len(lines), 0, -1):
        try:
            return parse_quietly("\n".join(lines[:end]))
        except (SyntaxError, ValueError):
            continue
    return None


def parse_quietly(code: str) -> ast.Module:
    """ast.parse without the SyntaxWarnings (invalid escapes) that model and MBPP code is full of."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ast.parse(code)


def _is_main_guard(node: ast.stmt) -> bool:
    if not isinstance(node, ast.If):
        return False
    test = node.test
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
    )


_KEEP = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Assign,
         ast.AnnAssign)


def sanitize(code: str, entry_point: str | None = None) -> str:
    """Keep imports, definitions and assignments of `code` (see module docstring).

    Code that does not parse at all is returned unchanged, so the judge reports
    the syntax error the model really made. When `entry_point` is given and the
    kept code does not define it, the unchanged code is returned as well (the
    definition may sit inside a block we would otherwise drop).
    """
    tree = _parsable_prefix(code)
    if tree is None:
        return code
    kept = [node for node in tree.body if isinstance(node, _KEEP) and not _is_main_guard(node)]
    if entry_point is not None and not any(
        isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == entry_point
        for node in kept
    ) and not any(
        isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == entry_point for t in node.targets)
        for node in kept
    ):
        return code
    lines = code.splitlines()
    pieces = []
    for node in kept:
        start = node.lineno - 1
        if getattr(node, "decorator_list", None):
            start = min(d.lineno for d in node.decorator_list) - 1
        pieces.append("\n".join(lines[start:node.end_lineno]))
    return "\n".join(pieces) + "\n" if pieces else ""


def extract_code(response: str, entry_point: str | None = None) -> str:
    """The program in a chat response: first python block (else the whole text), sanitised."""
    block = first_python_block(response)
    code = block if block is not None else response
    return sanitize(code, entry_point)
