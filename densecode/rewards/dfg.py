"""`dfg`: CodeBLEU-style data-flow-graph match against the task's reference solution.

Both programs are parsed with tree-sitter; the data-flow graph is the list of
edges `(variable, relation, sources)` in source order, where relation is
`computedFrom` (an assignment / for / with target and the variables its value is
computed from) or `comesFrom` (a use of a variable and the earlier definition it
reads; empty sources when the name has no definition, e.g. a builtin).

Variables are matched by their data-flow role, not by name or by order of first
appearance (which CodeBLEU uses: there one inserted `_u = 0` renumbers every later
variable and halves a correct solution's score). A variable's role starts as how it
is defined: parameter k of its function, or the shape of its assignments (relation
and number of sources); imported names keep the imported object's name, and names the
program never binds (builtins such as `len`) keep their own. Two refinement rounds
then add the roles of the variables each one is computed from (Weisfeiler-Lehman
colour refinement over the computedFrom edges, in-edges only, so code added
downstream of a variable does not change its role). Edges are compared as (role,
relation, sorted source roles), so renaming variables, inserting unrelated
statements and reordering independent ones leave the score unchanged.
score = matched reference edges / reference edges (multiset match).

Value on every code token: score - `offset` (0.5); with `positive_only` (reference
behaviour) only the positive part. Tasks without `task["reference"]`, or whose
reference has no edges, give zeros.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from functools import lru_cache

import numpy as np

from densecode.rewards.base import (
    ComponentOutput,
    RewardComponent,
    check_spread,
    spread_score,
)
from densecode.rewards.sample import Sample, program_of

_PATTERN_TYPES = {"identifier", "pattern_list", "tuple_pattern", "list_pattern", "list_splat_pattern",
                  "tuple", "list", "parenthesized_expression"}


@lru_cache(maxsize=1)
def _parser():
    import tree_sitter_python
    from tree_sitter import Language, Parser

    return Parser(Language(tree_sitter_python.language()))


class _DFG:
    def __init__(self, src: bytes) -> None:
        self.src = src
        self.defined: set[str] = set()
        self.edges: list[tuple[str, str, tuple[str, ...]]] = []
        self.params: dict[str, int] = {}  # name -> its position in a def's parameter list
        self.imports: dict[str, str] = {}  # bound name -> the imported object's name

    def name(self, node) -> str:
        return self.src[node.start_byte:node.end_byte].decode("utf-8", "replace")

    def targets(self, node) -> list:
        if node is None:
            return []
        if node.type == "identifier":
            return [node]
        if node.type in _PATTERN_TYPES:
            out = []
            for c in node.named_children:
                out += self.targets(c)
            return out
        return []

    def uses(self, node) -> list[str]:
        """Visit `node` as an expression; return the variable names it reads."""
        if node is None:
            return []
        found: list[str] = []
        self._visit_expr(node, found)
        return found

    def _visit_expr(self, node, found: list[str]) -> None:
        t = node.type
        if t == "identifier":
            name = self.name(node)
            self.edges.append((name, "comesFrom", (name,) if name in self.defined else ()))
            found.append(name)
            return
        if t == "attribute":
            self._visit_expr(node.child_by_field_name("object"), found)
            return
        if t == "keyword_argument":
            value = node.child_by_field_name("value")
            if value is not None:
                self._visit_expr(value, found)
            return
        if t in ("list_comprehension", "set_comprehension", "dictionary_comprehension", "generator_expression",
                 "lambda", "for_in_clause", "named_expression"):
            self.visit(node)
            return
        for c in node.named_children:
            self._visit_expr(c, found)

    def define(self, targets: list, sources: list[str]) -> None:
        srcs = tuple(dict.fromkeys(sources))
        for t in targets:
            name = self.name(t)
            self.edges.append((name, "computedFrom", srcs))
            self.defined.add(name)

    def visit(self, node) -> None:
        t = node.type
        if t in ("assignment", "augmented_assignment"):
            left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
            srcs = self.uses(right)
            targets = self.targets(left)
            if t == "augmented_assignment":
                srcs = [self.name(x) for x in targets] + srcs
            if not targets and left is not None:  # x.attr = ..., x[i] = ...: reads x
                srcs = self.uses(left) + srcs
            self.define(targets, srcs)
            return
        if t in ("for_statement", "for_in_clause"):
            left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
            srcs = self.uses(right)
            self.define(self.targets(left), srcs)
            for c in node.named_children:
                if c not in (left, right):
                    self.visit(c)
            return
        if t == "named_expression":
            srcs = self.uses(node.child_by_field_name("value"))
            self.define(self.targets(node.child_by_field_name("name")), srcs)
            return
        if t == "as_pattern":  # with x as y / except E as e
            srcs = self.uses(node.named_children[0]) if node.named_children else []
            alias = node.child_by_field_name("alias")
            self.define(self.targets(alias.named_children[0] if alias is not None and alias.named_children else alias), srcs)
            return
        if t in ("function_definition", "lambda"):
            name = node.child_by_field_name("name")
            if name is not None:
                self.defined.add(self.name(name))
            params = node.child_by_field_name("parameters")
            if params is not None:
                for k, p in enumerate(params.named_children):
                    ident = p if p.type == "identifier" else next((c for c in p.named_children if c.type == "identifier"), None)
                    if ident is not None:
                        self.params.setdefault(self.name(ident), k)
                        self.define([ident], [])
            body = node.child_by_field_name("body")
            if body is not None:
                self.visit(body) if t == "function_definition" else self.uses(body)
            return
        if t == "class_definition":
            name = node.child_by_field_name("name")
            if name is not None:
                self.defined.add(self.name(name))
            body = node.child_by_field_name("body")
            if body is not None:
                self.visit(body)
            return
        if t in ("import_statement", "import_from_statement"):
            module = node.child_by_field_name("module_name")
            for c in node.named_children:
                if c is module:
                    continue
                target = c.child_by_field_name("alias") if c.type == "aliased_import" else c
                real = c.child_by_field_name("name") if c.type == "aliased_import" else c
                if target is not None and target.type in ("identifier", "dotted_name"):
                    bound = self.name(target).split(".")[0]
                    self.defined.add(bound)
                    self.imports[bound] = self.name(real) if real is not None else bound
            return
        if t in ("expression_statement", "return_statement", "if_statement", "while_statement", "elif_clause",
                 "assert_statement", "call", "print_statement", "delete_statement", "raise_statement"):
            for c in node.named_children:
                if c.type in ("block", "else_clause", "elif_clause", "assignment", "augmented_assignment"):
                    self.visit(c)
                else:
                    self.uses(c)
            return
        for c in node.named_children:
            self.visit(c)


def _digest(value: object) -> str:
    return hashlib.sha1(repr(value).encode("utf-8", "surrogatepass")).hexdigest()[:16]


REFINEMENT_ROUNDS = 2


def _roles(g: _DFG) -> dict[str, str]:
    """Each name's data-flow role (see the module docstring); independent of names and order."""
    defs: dict[str, list[tuple[str, ...]]] = {}
    for target, rel, srcs in g.edges:
        if rel == "computedFrom":
            defs.setdefault(target, []).append(srcs)
    names = {t for t, _, _ in g.edges} | {s for _, _, srcs in g.edges for s in srcs} | g.defined
    bound = g.defined | set(defs)
    role: dict[str, str] = {}
    for n in names:
        if n in g.imports:
            role[n] = "import:" + g.imports[n]
        elif n not in bound:
            role[n] = "name:" + n  # a builtin or global the program never binds: its name is its role
        else:
            role[n] = _digest((g.params.get(n), sorted(len(srcs) for srcs in defs.get(n, []))))
    for _ in range(REFINEMENT_ROUNDS):
        role = {n: r if n in g.imports or n not in bound else
                _digest((r, sorted(tuple(sorted(role[s] for s in srcs)) for srcs in defs.get(n, []))))
                for n, r in role.items()}
    return role


def dataflow_edges(code: str) -> list[tuple[str, str, tuple[str, ...]]]:
    """Data-flow edges of `code` with every name replaced by its role: (role, relation, sorted source roles)."""
    src = code.encode("utf-8", "surrogatepass")
    g = _DFG(src)
    g.visit(_parser().parse(src).root_node)
    role = _roles(g)
    return [(role[a], rel, tuple(sorted(role[s] for s in srcs))) for a, rel, srcs in g.edges]


def dataflow_match(candidate: str, reference: str) -> float | None:
    """Matched reference edges / reference edges; None when the reference has no edges.

    A program nested too deeply for the (recursive) graph walk has no edges we can read:
    as a reference it scores nothing (None), as a candidate it matches nothing (0.0).
    """
    try:
        ref = Counter(dataflow_edges(reference))
    except RecursionError:
        return None
    total = sum(ref.values())
    if total == 0:
        return None
    try:
        cand = Counter(dataflow_edges(candidate))
    except RecursionError:
        return 0.0
    return sum((ref & cand).values()) / total


class DFGComponent(RewardComponent):
    name = "dfg"

    def __init__(self, offset: float = 0.5, positive_only: bool = True, spread: str = "each") -> None:
        self.spread = check_spread("dfg", spread)
        self.offset = float(offset)
        self.positive_only = positive_only

    def __call__(self, samples: list[Sample]) -> list[ComponentOutput]:
        outs = []
        for s in samples:
            reference = s.task.get("reference")
            program, _ = program_of(s)
            score = dataflow_match(program, reference) if reference and program.strip() else None
            if score is None:
                outs.append(ComponentOutput.zeros(s, has_reference=float(bool(reference))))
                continue
            value = score - self.offset
            if self.positive_only:
                value = max(value, 0.0)
            values = np.zeros(s.n_tokens, dtype=np.float32)
            spread_score(values, s.code_token_mask(), value, self.spread)
            outs.append(ComponentOutput(values, [{"rule": "dfg", "span": None, "tokens": None,
                                                  "message": f"data-flow match {score:.2f}", "value": value}],
                                        {"dfg_score": score, "has_reference": 1.0}))
        return outs
