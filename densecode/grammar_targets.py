"""Targets Python restricts and the grammar does not: `f(x) = 1`, `del f()`, `with a as f():`.

densecode/grammars/python.lark lets any expression stand where Python wants an assignment
target (as CPython's LL(1) grammar did: CPython checks targets after parsing). Once a row has
written such a target, no continuation parses, so it is refused at the earliest token where
the program can no longer be valid, by asking CPython's parser (`ast.parse`, cached per text)
about the target's text in a small probe program:

- `=` (each target of a chain `a = b = 1`), augmented assignment (`+=` ...) and annotations
  (`x: int`) are checked at that token, against the text since the statement's start (or since
  the previous `=`, or the colon of a one-line compound statement `if x: y = 1`);
- `del` targets at the `,`, `;` or line break that ends each of them;
- `with ... as TARGET` at the `,` or `:` that ends the target;
- `for` / comprehension targets at their `in` (IncrementalPythonParser._for_target_ok).

`except E as NAME`, import aliases and walrus targets (`(f() := 1)`) need no check: the grammar
only allows a name there. What a statement is, and where its current target began, is tracked
token by token at bracket depth 0 (`step`), a few comparisons per token; a check costs one
`ast.parse` of the target text the first time that text is seen.
"""

from __future__ import annotations

import ast
import warnings

AUGMENTED_OPERATORS = ("+=", "-=", "*=", "@=", "/=", "%=", "&=", "|=", "^=", "<<=", ">>=", "**=", "//=")

# What the current simple statement is, at bracket depth 0 of its logical line.
START, EXPRESSION, ANNOTATED, OTHER, HEADER, ASYNC, WITH, WITH_AS, DEL = range(9)
# A context: (kind, bracket depth, index of the post-lexed token the current target starts at
# (-1: none), lambdas whose `:` has not come yet, the statement starts with `match` that may be
# the soft keyword). Immutable: every parse snapshot keeps its own.
START_CONTEXT = (START, 0, -1, 0, False)

_OPEN = frozenset({"LPAR", "LSQB", "LBRACE"})
_CLOSE = frozenset({"RPAR", "RSQB", "RBRACE"})
_BOUNDARIES = frozenset({"_NL", "_INDENT", "_DEDENT", "SEMICOLON"})
# Statements whose first line ends in a colon that may be followed by a one-line body.
_HEADERS = frozenset({"IF", "ELIF", "ELSE", "WHILE", "FOR", "TRY", "EXCEPT", "FINALLY", "CLASS", "DEF", "AT"})
# Simple statements without targets (their `as`, `=` or `:` are no assignments).
_NO_TARGETS = frozenset({"RETURN", "IMPORT", "FROM", "PASS", "BREAK", "CONTINUE", "RAISE", "GLOBAL", "NONLOCAL",
                         "ASSERT", "YIELD", "EOF"})

# How each kind of target is put to CPython: the target's text in place of {}.
PROBES = {
    "assign": "{} = _\n",
    "augassign": "{} += _\n",
    "annotation": "{}: _\n",
    "del": "del {}\n",
    "with": "with _ as {}: pass\n",
    "for": "for{} in _: pass\n",
    "comprehension": "(_ for{} in _)\n",
}
_CACHE_LIMIT = 200_000


class TargetRules:
    """The per-token context tracking and CPython's verdicts (cached per grammar)."""

    def __init__(self, base_parser):
        self.augmented = frozenset(t.name for t in base_parser.terminals
                                   if getattr(t.pattern, "type", "") == "str" and t.pattern.value in AUGMENTED_OPERATORS)
        # Terminals that can end a target: only these call `role` (everything else is one set lookup).
        self.enders = frozenset({"EQUAL", "COLON", "COMMA", "_NL", "SEMICOLON"}) | self.augmented
        # The terminals a failed check refuses, per kind of target.
        self.refused = {"assign": frozenset({"EQUAL"}), "augassign": self.augmented, "annotation": frozenset({"COLON"}),
                        "del": frozenset({"COMMA", "SEMICOLON", "_NL"}), "with": frozenset({"COMMA", "COLON"}),
                        "for": frozenset({"IN"}), "comprehension": frozenset({"IN"})}
        self._cache = base_parser.__dict__.setdefault("_densecode_targets", {})

    def role(self, context, ttype: str, index: int) -> str | None:
        """The kind of target a token of type `ttype` at post index `index` ends, if any."""
        kind, depth, start, lambdas, _ = context
        if depth:
            return None
        if kind == EXPRESSION:
            if lambdas:  # `lambda x=1:` - a default value, not an assignment
                return None
            if ttype == "EQUAL":
                return "assign"
            if ttype == "COLON":
                return "annotation"
            if ttype in self.augmented:
                return "augassign"
        elif kind == DEL:
            if ttype in ("COMMA", "_NL", "SEMICOLON") and start < index:
                return "del"
        elif kind == WITH_AS and ttype in ("COMMA", "COLON"):
            return "with"
        return None

    def step(self, context, ttype: str, index: int, read_as) -> tuple:
        """The context after the post-lexed token at `index` (of type `ttype`, read as `read_as`)."""
        kind, depth, start, lambdas, soft = context
        if ttype in _OPEN:
            if kind == START:
                return (EXPRESSION, 1, index, 0, False)
            return (kind, depth + 1, start, lambdas, soft)
        if ttype in _CLOSE:
            return (kind, depth - 1, start, lambdas, soft)
        if depth:
            return context
        if ttype in _BOUNDARIES:
            return START_CONTEXT
        if kind == START:
            if ttype == "NAME":
                if "CASE" in read_as:  # a `case` block of a match statement
                    return (HEADER, 0, -1, 0, False)
                return (EXPRESSION, 0, index, 0, "MATCH" in read_as)
            if ttype in _HEADERS:
                return (HEADER, 0, -1, 0, False)
            if ttype in _NO_TARGETS:
                return (OTHER, 0, -1, 0, False)
            if ttype == "DEL":
                return (DEL, 0, index + 1, 0, False)
            if ttype == "WITH":
                return (WITH, 0, -1, 0, False)
            if ttype == "ASYNC":
                return (ASYNC, 0, -1, 0, False)
            return (EXPRESSION, 0, index, int(ttype == "LAMBDA"), False)
        if kind == EXPRESSION:
            if ttype == "LAMBDA":
                return (kind, 0, start, lambdas + 1, soft)
            if ttype == "COLON":
                if lambdas:
                    return (kind, 0, start, lambdas - 1, soft)
                return (ANNOTATED, 0, -1, 0, False)  # what follows is the annotation (and its value)
            if ttype == "EQUAL" and not lambdas:
                return (kind, 0, index + 1, 0, soft)  # the next target of a chain, or the value
            if ttype in self.augmented:
                return (OTHER, 0, -1, 0, False)
            return context
        if kind == HEADER or kind == WITH:
            if ttype == "LAMBDA":
                return (kind, 0, start, lambdas + 1, soft)
            if ttype == "COLON":
                if lambdas:
                    return (kind, 0, start, lambdas - 1, soft)
                return START_CONTEXT  # a one-line body may follow: `if x: y = 1`
            if kind == WITH and ttype == "AS":
                return (WITH_AS, 0, index + 1, 0, False)
            return context
        if kind == WITH_AS:
            if ttype == "COMMA":
                return (WITH, 0, -1, 0, False)
            if ttype == "COLON":
                return START_CONTEXT
            return context
        if kind == DEL:
            return (DEL, 0, index + 1, 0, False) if ttype == "COMMA" else context
        if kind == ASYNC:
            return (WITH, 0, -1, 0, False) if ttype == "WITH" else (HEADER, 0, -1, 0, False)
        return context

    def segment_ok(self, role: str, post: list, start: int, end: int, code: str) -> bool:
        """Python's verdict on post[start:end] as a target of kind `role`."""
        # A name or a dotted name is a target of every kind: no need to ask.
        for k in range(start, end):
            if post[k].type != ("NAME" if (k - start) % 2 == 0 else "DOT"):
                break
        else:
            if (end - start) % 2 == 1:
                return True
        return self.text_ok(role, code[post[start].start_pos:post[end].start_pos])

    def text_ok(self, role: str, text: str) -> bool:
        key = (role, text)
        found = self._cache.get(key)
        if found is None:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    ast.parse(PROBES[role].format(text))
                found = True
            except (SyntaxError, ValueError, MemoryError, RecursionError):
                found = False
            if len(self._cache) > _CACHE_LIMIT:
                self._cache.clear()
            self._cache[key] = found
        return found

    def blocked_next(self, context, text: str) -> frozenset:
        """Terminals that cannot come next because they would end `text`, a target Python rejects.

        For constrain's mask (built only when a mask is needed): after `f(x)` it leaves out
        `=`, `+=` and `:`, so a token such as ` = ` is masked; ` =` stays (it may become `==`).
        `text`: the code since the current target's start (`context[2]`).
        """
        kind, depth, _, lambdas, soft = context
        if depth:
            return frozenset()
        if kind == EXPRESSION and not lambdas:
            blocked = set()
            for role in ("assign", "augassign", "annotation"):
                if role == "annotation" and soft:  # `match (x):` may be a match statement
                    continue
                if not self.text_ok(role, text):
                    blocked |= self.refused[role]
            return frozenset(blocked)
        if kind == DEL and not self.text_ok("del", text):
            return self.refused["del"]
        if kind == WITH_AS and not self.text_ok("with", text):
            return self.refused["with"]
        return frozenset()
