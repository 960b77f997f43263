"""Split an assert into candidate-dependent "probes" (run in the child) and a check run in the parent.

`assert f(x) == [1, 2]` becomes probe `f(x)` (evaluated in the sandbox, its
value shipped back as plain data) and the check `__p0 == [1, 2]` evaluated in
the parent with the real builtins. So the expected value never enters the
child (the candidate cannot read it from the caller's frame or the test text),
the comparison uses plain builtin values (an always-True `__eq__` cannot
survive `plain.encode`), and `math.isclose`, `sorted`, `set`, ... in a test are
the parent's, whatever the candidate monkeypatched.

What stays in the child: any sub-expression that is not plain-data arithmetic
over constants and safe builtins (calls to candidate or setup functions,
names defined by setup code, lambdas and comprehensions). Those are evaluated
there as a whole: a comprehension comparing candidate objects inside the child
is as weak as plain `exec` (none of MBPP's 974 tasks' asserts has one).
"""

from __future__ import annotations

import ast
import builtins
import math
from dataclasses import dataclass

SAFE_FUNCTIONS = (
    "abs", "all", "any", "bool", "bytes", "chr", "complex", "dict", "divmod", "enumerate", "filter", "float",
    "format", "frozenset", "int", "isinstance", "len", "list", "map", "max", "min", "ord", "pow", "range",
    "repr", "reversed", "round", "set", "sorted", "str", "sum", "tuple", "type", "zip",
)
SAFE_BUILTINS = {name: getattr(builtins, name) for name in SAFE_FUNCTIONS}
SAFE_BUILTINS.update({"True": True, "False": False, "None": None})
SAFE_MODULES = {"math": math}

_PLAIN_NODES = (
    ast.Expression, ast.Constant, ast.List, ast.Tuple, ast.Set, ast.Dict, ast.UnaryOp, ast.BinOp, ast.BoolOp,
    ast.Compare, ast.IfExp, ast.Subscript, ast.Slice, ast.Starred, ast.keyword, ast.JoinedStr, ast.FormattedValue,
    ast.expr_context, ast.operator, ast.unaryop, ast.boolop, ast.cmpop,
)


@dataclass
class SplitTest:
    source: str
    probes: list[str] | str  # expressions to evaluate in the child, or a whole statement (non-assert test)
    check: object | None  # compiled parent-side expression over __p0.. (None: passes iff the statement ran)
    error: str | None = None  # the test itself does not parse


class _Splitter(ast.NodeTransformer):
    def __init__(self):
        self.probes: list[str] = []

    def _probe(self, node: ast.AST) -> ast.Name:
        self.probes.append(ast.unparse(node))
        return ast.copy_location(ast.Name(id=f"__p{len(self.probes) - 1}", ctx=ast.Load()), node)

    def _safe_func(self, func: ast.AST) -> bool:
        if isinstance(func, ast.Name):
            return func.id in SAFE_FUNCTIONS
        if isinstance(func, ast.Attribute):
            if isinstance(func.value, ast.Name) and func.value.id in SAFE_MODULES:
                return not func.attr.startswith("_")
            return not func.attr.startswith("_")  # a method of a plain value (the value is split recursively)
        return False

    def visit(self, node: ast.AST):
        if isinstance(node, ast.Call):
            if not self._safe_func(node.func):
                return self._probe(node)
            if isinstance(node.func, ast.Attribute) and not (
                isinstance(node.func.value, ast.Name) and node.func.value.id in SAFE_MODULES
            ):
                node.func.value = self.visit(node.func.value)
            node.args = [self.visit(a) for a in node.args]
            node.keywords = [self.visit(k) for k in node.keywords]
            return node
        if isinstance(node, ast.Name):
            return node if node.id in SAFE_BUILTINS else self._probe(node)
        if isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Name) and node.value.id in SAFE_MODULES and not node.attr.startswith("_"):
                return node
            if node.attr.startswith("_"):
                return self._probe(node)
            node.value = self.visit(node.value)
            return node
        if isinstance(node, _PLAIN_NODES):
            return self.generic_visit(node)
        return self._probe(node)


def split_test(source: str) -> SplitTest:
    try:
        tree = ast.parse(source.strip())
    except SyntaxError as exc:
        return SplitTest(source, [], None, error=f"test does not parse: {exc}")
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.Assert):
        # Not a plain assert: run the statement in the child; it passes iff it raises nothing.
        return SplitTest(source, source.strip(), None)
    splitter = _Splitter()
    expr = splitter.visit(ast.Expression(body=tree.body[0].test))
    ast.fix_missing_locations(expr)
    return SplitTest(source, splitter.probes, compile(expr, "<check>", "eval"))


def evaluate_check(test: SplitTest, values: list) -> bool:
    """Run the parent-side check over decoded probe values; any exception means the test failed."""
    env = {"__builtins__": SAFE_BUILTINS, **SAFE_MODULES}
    env.update({f"__p{i}": v for i, v in enumerate(values)})
    result = eval(test.check, env)  # noqa: S307 - dataset test text over plain builtin values
    return bool(result)
