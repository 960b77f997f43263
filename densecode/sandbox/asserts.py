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
import copy
import functools
import importlib
from dataclasses import dataclass

SAFE_FUNCTIONS = (
    "abs", "all", "any", "bool", "bytes", "chr", "complex", "dict", "divmod", "enumerate", "filter", "float",
    "format", "frozenset", "int", "isinstance", "len", "list", "map", "max", "min", "ord", "pow", "range",
    "repr", "reversed", "round", "set", "sorted", "str", "sum", "tuple", "type", "zip",
)
SAFE_BUILTINS = {name: getattr(builtins, name) for name in SAFE_FUNCTIONS}
SAFE_BUILTINS.update({"True": True, "False": False, "None": None})
# Module names a test may use; they are the parent's modules, imported on first use.
SAFE_MODULES = {"math": "math", "cmath": "cmath", "sys": "sys", "np": "numpy", "numpy": "numpy"}

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
    def __init__(self, shadowed: frozenset[str] = frozenset()):
        self.probes: list[str] = []
        self.shadowed = shadowed  # names the program itself binds: `sum`, `math`, ... mean the program's

    def _probe(self, node: ast.AST) -> ast.Name:
        self.probes.append(ast.unparse(node))
        return ast.copy_location(ast.Name(id=f"__p{len(self.probes) - 1}", ctx=ast.Load()), node)

    def _is_plain(self, node: ast.AST) -> bool:
        """True when `node` can be evaluated in the parent without any probe."""
        trial = _Splitter(self.shadowed)
        trial.visit(copy.deepcopy(node))
        return not trial.probes

    def _module(self, node: ast.AST) -> bool:
        return isinstance(node, ast.Name) and node.id in SAFE_MODULES and node.id not in self.shadowed

    def visit(self, node: ast.AST):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id in SAFE_FUNCTIONS and func.id not in self.shadowed or isinstance(func, ast.Attribute) and not func.attr.startswith("_") and self._module(func.value):
                pass
            elif isinstance(func, ast.Attribute) and not func.attr.startswith("_") and self._is_plain(func.value):
                func.value = self.visit(func.value)  # a method of a plain value, e.g. "abc".upper()
            else:
                return self._probe(node)  # candidate/setup code, or a method of a candidate object
            node.args = [self.visit(a) for a in node.args]
            node.keywords = [self.visit(k) for k in node.keywords]
            return node
        if isinstance(node, ast.Name):
            return node if node.id in SAFE_BUILTINS and node.id not in self.shadowed else self._probe(node)
        if isinstance(node, ast.Attribute):
            if node.attr.startswith("_"):
                return self._probe(node)
            if self._module(node.value) or self._is_plain(node.value):
                return node
            return self._probe(node)
        if isinstance(node, _PLAIN_NODES):
            return self.generic_visit(node)
        return self._probe(node)


def bound_names(*sources: str) -> frozenset[str]:
    """Module-level names a program binds (def, class, import, assignment targets at module level, and names a
    function declares `global`): the names the tests, which run at module level, see as the program's. A function's
    locals are not among them (they cannot shadow anything in a test), so responses that define the same functions
    share one split of the task's tests (`split_test`'s cache)."""
    names: set[str] = set()
    for src in sources:
        try:
            tree = ast.parse(src)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        _module_bindings(tree, names)
    return frozenset(names)


def _module_bindings(tree: ast.AST, names: set[str]) -> None:
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            if not isinstance(node, ast.Lambda):
                names.add(node.name)
            names.update(n for g in ast.walk(node) if isinstance(g, ast.Global) for n in g.names)
            # decorators, defaults, annotations and base classes run at module level
            outer = [*getattr(node, "decorator_list", []), *getattr(node, "bases", []), *getattr(node, "keywords", [])]
            args = getattr(node, "args", None)
            if args is not None:
                outer += [*args.defaults, *(d for d in args.kw_defaults if d is not None)]
            stack.extend(outer)
            continue
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            # the loop variables are the comprehension's own; a walrus inside binds at module level
            names.update(n.target.id for n in ast.walk(node) if isinstance(n, ast.NamedExpr)
                         and isinstance(n.target, ast.Name))
            stack.extend(g.iter for g in node.generators[:1])
            continue
        if isinstance(node, ast.alias):
            name = (node.asname or node.name).split(".")[0]
            if SAFE_MODULES.get(name) != node.name:  # `import math` binds the real math: not a shadow
                names.add(name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, ast.MatchAs | ast.MatchStar) and node.name:
            names.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            names.add(node.rest)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        stack.extend(ast.iter_child_nodes(node))


def split_test(source: str, shadowed: frozenset[str] = frozenset()) -> SplitTest:
    """The probes and the parent-side check of one test. Cached: a task's tests are split once for all the responses
    that bind the same module-level names (a GRPO group, a fixed eval set); judges read the result, never change it."""
    return _split_test(source, frozenset(shadowed))


@functools.lru_cache(maxsize=8192)
def _split_test(source: str, shadowed: frozenset[str]) -> SplitTest:
    try:
        tree = ast.parse(source.strip())
    except SyntaxError as exc:
        return SplitTest(source, [], None, error=f"test does not parse: {exc}")
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.Assert):
        # Not a plain assert: run the statement in the child; it passes iff it raises nothing.
        return SplitTest(source, source.strip(), None)
    splitter = _Splitter(shadowed)
    expr = splitter.visit(ast.Expression(body=tree.body[0].test))
    ast.fix_missing_locations(expr)
    return SplitTest(source, splitter.probes, compile(expr, "<check>", "eval"))


def evaluate_check(test: SplitTest, values: list) -> bool:
    """Run the parent-side check over decoded probe values; any exception means the test failed."""
    env = {"__builtins__": SAFE_BUILTINS}
    for name in test.check.co_names:
        if name in SAFE_MODULES:
            env[name] = importlib.import_module(SAFE_MODULES[name])
    env.update({f"__p{i}": v for i, v in enumerate(values)})
    result = eval(test.check, env)
    return bool(result)


def program_with_setup(code: str, setup: str) -> str:
    """The program MBPP's asserts run against: the candidate's code, then the task's setup code.

    MBPP's `test_setup_code` builds test fixtures from the solution's own definitions
    (tasks 367 and 927: `root = Node(1)` with the solution's `Node` class), so it runs
    after the candidate's definitions and before the asserts, in the same namespace;
    the sanitized release's `test_imports` (`import math` for the asserts) work either
    way. `AssertJob.setup` runs BEFORE the code (a harness-level preamble), which is
    why MBPP's setup goes here instead. Line numbers of the candidate's code are
    unchanged; an error raised by the setup reports a line past the candidate's last.
    """
    setup = setup.replace("\r\n", "\n")
    if not setup.strip():
        return code
    return code + ("" if code.endswith("\n") or not code else "\n") + setup + ("" if setup.endswith("\n") else "\n")
