"""Mutants of a reference, for the mutation score: one small fault each, inside the reference's functions.

Kinds (each mutation point yields one mutant):
- `operator`: arithmetic swaps (+ -, * //, // *, % //), comparison swaps (< <=, > >=, == !=, in / not in),
  `and` <-> `or`, dropping a `not`;
- `off_by_one`: an integer constant n -> n + 1;
- `constant`: an integer n -> 0 (1 when n is 0), a string -> "" (or "x" when empty), True <-> False;
- `return`: `return e` -> `return None`, and `return <bool expression>` -> `return not (...)`.
Which mutants are equivalent to the reference is decided in the sandbox (the harness runs every mutant on the task's
sample inputs); equivalent ones are dropped from the score. At most `limit` mutants, spread over the points in a
deterministic order.
"""

from __future__ import annotations

import ast

from densecode.domains.testgen.asserts import quiet_parse

_BINOP_SWAP = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.FloorDiv, ast.FloorDiv: ast.Mult,
               ast.Mod: ast.FloorDiv, ast.Div: ast.Mult}
_CMP_SWAP = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq,
             ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is}
_BOOL_RESULT = (ast.Compare, ast.BoolOp)


def _points(tree: ast.Module) -> list[tuple[str, tuple[int, ...], str]]:
    """(kind, path to the node, variant) for every mutation point inside a function body."""
    out: list[tuple[str, tuple[int, ...], str]] = []
    nodes = list(_walk_with_paths(tree))
    docstrings = {id(fn.body[0].value) for fn in ast.walk(tree)
                  if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Module)) and fn.body
                  and isinstance(fn.body[0], ast.Expr) and isinstance(fn.body[0].value, ast.Constant)}
    for path, node, in_function in nodes:
        if not in_function:
            continue
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOP_SWAP:
            out.append(("operator", path, "binop"))
        elif isinstance(node, ast.Compare) and type(node.ops[0]) in _CMP_SWAP:
            out.append(("operator", path, "compare"))
        elif isinstance(node, ast.BoolOp):
            out.append(("operator", path, "boolop"))
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            out.append(("operator", path, "drop_not"))
        elif isinstance(node, ast.Constant) and type(node.value) is int:
            out.append(("off_by_one", path, "plus_one"))
            out.append(("constant", path, "zero"))
        elif isinstance(node, ast.Constant) and type(node.value) is bool:
            out.append(("constant", path, "flip_bool"))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            out.append(("constant", path, "string"))
        elif isinstance(node, ast.Return) and node.value is not None:
            out.append(("return", path, "none"))
            if isinstance(node.value, _BOOL_RESULT):
                out.append(("return", path, "negate"))
    return out


def _walk_with_paths(tree: ast.AST):
    """(path, node, inside a function) in a fixed order; a path is the child indices from the root (an Expr's
    value gets index -1 so that docstrings can be recognised)."""
    stack = [((), tree, False)]
    while stack:
        path, node, in_fn = stack.pop(0)
        yield path, node, in_fn
        inner = in_fn or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        if isinstance(node, ast.Expr):
            stack.append((path + (-1,), node.value, inner))
            continue
        for i, child in enumerate(ast.iter_child_nodes(node)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not _in_body(node, child):
                continue  # argument defaults and decorators run at load time: not the function's behaviour
            stack.append((path + (i,), child, inner))


def _in_body(fn: ast.FunctionDef, child: ast.AST) -> bool:
    return any(child is stmt for stmt in fn.body)


def _node_at(tree: ast.AST, path: tuple[int, ...]) -> ast.AST:
    node = tree
    for i in path:
        node = node.value if i == -1 else list(ast.iter_child_nodes(node))[i]
    return node


def _mutate(node: ast.AST, variant: str) -> bool:
    if variant == "binop":
        node.op = _BINOP_SWAP[type(node.op)]()
    elif variant == "compare":
        node.ops = [_CMP_SWAP[type(node.ops[0])]()] + node.ops[1:]
    elif variant == "boolop":
        node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
    elif variant == "plus_one":
        node.value = node.value + 1
    elif variant == "zero":
        node.value = 0 if node.value != 0 else 1
    elif variant == "flip_bool":
        node.value = not node.value
    elif variant == "string":
        node.value = "" if node.value else "x"
    else:
        return False
    return True


def _replace_return(tree: ast.AST, path: tuple[int, ...], variant: str) -> None:
    ret = _node_at(tree, path)
    if variant == "none":
        ret.value = ast.Constant(value=None)
    else:
        ret.value = ast.UnaryOp(op=ast.Not(), operand=ret.value)


def _drop_not(tree: ast.AST, path: tuple[int, ...]) -> None:
    parent = _node_at(tree, path[:-1])
    node = _node_at(tree, path)
    for field, value in ast.iter_fields(parent):
        if value is node:
            setattr(parent, field, node.operand)
            return
        if isinstance(value, list):
            for k, item in enumerate(value):
                if item is node:
                    value[k] = node.operand
                    return


def make_mutants(reference: str, limit: int = 10) -> list[dict]:
    """Up to `limit` mutants of `reference`: [{"kind", "variant", "source"}], distinct sources, in a fixed order."""
    try:
        tree = quiet_parse(reference)
    except SyntaxError:
        return []
    points = _points(tree)
    if len(points) > limit:  # spread the picks over the whole function, deterministically
        step = len(points) / limit
        points = [points[int(i * step)] for i in range(limit)]
    seen = {ast.unparse(tree)}
    out = []
    for kind, path, variant in points:
        mutant = quiet_parse(reference)  # a fresh tree: parsing (in C) is several times faster than copy.deepcopy
        if kind == "return":
            _replace_return(mutant, path, variant)
        elif variant == "drop_not":
            _drop_not(mutant, path)
        elif not _mutate(_node_at(mutant, path), variant):
            continue
        source = ast.unparse(mutant)  # unparse needs no source locations on the new nodes
        if source in seen:
            continue
        seen.add(source)
        out.append({"kind": kind, "variant": variant, "source": source})
    return out
