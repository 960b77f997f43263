"""DFG match: renaming-, insertion- and order-robust (variables matched by data-flow role)."""

from __future__ import annotations

import ast
import builtins
import io
import os
import tokenize
import warnings

import pytest

from densecode.rewards.dfg import dataflow_edges, dataflow_match
from densecode.rewards.mutations import load_mbpp

REF = (
    "def count_pairs(nums, k):\n"
    "    seen = set()\n"
    "    pairs = 0\n"
    "    for n in nums:\n"
    "        if n - k in seen:\n"
    "            pairs += 1\n"
    "        seen.add(n)\n"
    "    return pairs\n"
)


def rename_all(code: str) -> str | None:
    """Every name the program binds (params, assignment/loop targets, defs) renamed; None if unsafe."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # invalid escapes in some references
        tree = ast.parse(code)
    if any(isinstance(n, ast.JoinedStr) for n in ast.walk(tree)):
        return None  # names inside f-strings are not NAME tokens
    bound = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound.add(node.id)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            bound.add(node.name)
    bound -= set(dir(builtins))
    out = []
    prev = None
    for t in tokenize.generate_tokens(io.StringIO(code).readline):
        if t.type == tokenize.NAME and t.string in bound and not (prev is not None and prev.string == "."):
            t = t._replace(string="zz_" + t.string[::-1])
        out.append(t)
        if t.type not in (tokenize.NL, tokenize.COMMENT):
            prev = t
    return tokenize.untokenize(out)


def test_renamed_variables_match_fully():
    renamed = REF.replace("nums", "xs").replace("seen", "visited").replace("pairs", "c").replace(" n ", " v ") \
        .replace("(n)", "(v)").replace("n - k", "v - k")
    assert renamed != REF
    assert dataflow_match(renamed, REF) == 1.0


def test_inserted_no_op_assignments_do_not_change_the_score():
    # The case: one `_u = 0` before a correct solution halved its score under first-appearance numbering.
    assert dataflow_match("_u = 0\n" + REF, REF) == 1.0
    inside = REF.replace("    seen = set()\n", "    tmp = 1\n    seen = set()\n    unused = tmp\n")
    assert dataflow_match(inside, REF) == 1.0


def test_reordered_independent_statements_match_fully():
    swapped = REF.replace("    seen = set()\n    pairs = 0\n", "    pairs = 0\n    seen = set()\n")
    assert swapped != REF
    assert dataflow_match(swapped, REF) == 1.0
    two = "def f(a, b):\n    x = a * 2\n    y = b + 1\n    return x - y\n"
    two_swapped = "def f(a, b):\n    y = b + 1\n    x = a * 2\n    return x - y\n"
    assert dataflow_match(two_swapped, two) == 1.0


def test_different_data_flow_still_scores_lower():
    chained = "def f(a, b):\n    x = a * 2\n    y = x + b\n    return y\n"
    assert dataflow_match("def f(a, b):\n    x = a * 2\n    y = a + b\n    return y\n", chained) < 1.0
    assert dataflow_match("def f(a, b):\n    x = b * 2\n    y = x + a\n    return y\n", chained) < 1.0
    assert dataflow_match("def count_pairs(nums, k):\n    return len(nums)\n", REF) < 0.5
    assert dataflow_match("def f(xs):\n    return 0\n", "def f(xs):\n    return sum(xs)\n") < 1.0


def test_builtins_and_imports_keep_their_names():
    edges = dataflow_edges("import numpy as np\ndef f(a):\n    return np.sum(len(a))\n")
    names = {x for e in edges for x in (e[0], *e[2])}
    assert "import:numpy" in names and "name:len" in names
    assert dataflow_match("import numpy as xp\ndef f(a):\n    return xp.sum(len(a))\n",
                          "import numpy as np\ndef f(a):\n    return np.sum(len(a))\n") == 1.0
    assert dataflow_match("def f(a):\n    return max(a)\n", "def f(a):\n    return min(a)\n") < 1.0


def test_every_mbpp_reference_is_robust_to_renaming_and_insertion(shared_data):
    rows = load_mbpp(os.path.join(shared_data, "mbpp", "mbpp.jsonl"))
    scored = renamed_n = 0
    for row in rows:
        code = row["code"].replace("\r\n", "\n")
        if not dataflow_edges(code):
            continue
        scored += 1
        assert dataflow_match(code, code) == 1.0, row["task_id"]
        assert dataflow_match("_u = 0\n" + code, code) == 1.0, row["task_id"]
        renamed = rename_all(code)
        if renamed is not None:
            renamed_n += 1
            assert dataflow_match(renamed, code) == 1.0, row["task_id"]
    assert scored > 900 and renamed_n > 850


@pytest.mark.parametrize("other", [1, 2, 3])
def test_unrelated_references_do_not_match_fully(shared_data, other):
    rows = load_mbpp(os.path.join(shared_data, "mbpp", "mbpp.jsonl"))[:200]
    full = sum(dataflow_match(rows[(i + other) % 200]["code"], r["code"]) == 1.0 for i, r in enumerate(rows)
               if dataflow_edges(r["code"]))
    assert full < 10  # only trivially small references may coincide


def test_too_deeply_nested_candidate_scores_zero_without_crashing():
    deep = "def count_pairs(nums, k):\n    x = " + "nums+" * 3000 + "k\n    return x\n"
    assert dataflow_match(deep, REF) == 0.0
    assert dataflow_match(REF, deep) is None
