"""Lint categories by what each rule means: every enabled rule has one, and the categories hold on real cases."""

from __future__ import annotations

import os
import re
import subprocess
import warnings
from pathlib import Path

import numpy as np
import pytest

from densecode.rewards import make_sample
from densecode.rewards.lint import (
    DEFAULT_IGNORE,
    DEFAULT_SELECT,
    LintComponent,
    ruff_binary,
    run_ruff,
)
from densecode.rewards.lint_rules import CATEGORIES, RULE_CATEGORIES, category_of
from densecode.rewards.mutations import load_mbpp

DOCS = Path(__file__).resolve().parents[2] / "docs" / "rewards.md"

# Programs that `ast.parse` accepts but CPython refuses to compile, with the rule Ruff reports.
COMPILE_ERRORS = {
    "F404": "x = 1\nfrom __future__ import annotations\n",
    "F406": "def f():\n    from os import *\n",
    "F407": "from __future__ import nonexistent\n",
    "F622": "*a, *b = [1, 2]\n",
    "F701": "break\n",
    "F702": "continue\n",
    "F704": "yield 1\n",
    "F706": "return 1\n",
    "PLE0115": "def f():\n    global x\n    nonlocal x\n",
    "PLE0117": "def f():\n    nonlocal q\n",
    "PLE0118": "x = 0\ndef f():\n    print(x)\n    global x\n",
    "PLE1142": "async def g():\n    pass\ndef f():\n    await g()\n",
    "PLE1700": "async def f():\n    yield from range(3)\n",
}

# Programs that compile and raise when the flagged line runs.
RUNTIME_ERRORS = {
    "F821": "undefined_name_here()\n",
    "F633": "import sys\nprint >> sys.stderr, 'x'\n",
    "F901": "raise NotImplemented\n",
    "F502": "print('%(a)s' % (1,))\n",
    "F524": "print('{} {}'.format(1))\n",
    "PLE0704": "raise\n",
}


def _enabled_rules() -> set[str]:
    tmp = Path(os.environ.get("TMPDIR", "/tmp")) / "densecode-lint-settings.py"
    tmp.write_text("x = 1\n")
    out = subprocess.run([ruff_binary(), "check", "--isolated", "--show-settings", "--select", ",".join(DEFAULT_SELECT),
                          "--ignore", ",".join(DEFAULT_IGNORE), "--target-version", "py311", str(tmp)],
                         capture_output=True, text=True, check=True).stdout
    block = out.split("linter.rules.enabled = [", 1)[1].split("]", 1)[0]
    return set(re.findall(r"\(([A-Z]+[0-9]+)\)", block))


def test_every_enabled_rule_has_a_category_and_none_is_stale():
    enabled = _enabled_rules()
    assert len(enabled) > 300
    assert sorted(enabled - set(RULE_CATEGORIES)) == []  # a new rule must be categorised by hand
    assert sorted(set(RULE_CATEGORIES) - enabled) == []
    assert set(RULE_CATEGORIES.values()) == set(CATEGORIES)


@pytest.mark.parametrize("rule", sorted(COMPILE_ERRORS))
def test_compilable_rules_are_compile_errors(rule):
    src = COMPILE_ERRORS[rule]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compile(src, "<ast-only>", "exec", flags=0x400)  # PyCF_ONLY_AST: the parser accepts it
        with pytest.raises(SyntaxError):
            compile(src, "<full>", "exec")
    codes = {d["code"] for d in run_ruff({"p": src}, DEFAULT_SELECT, DEFAULT_IGNORE, [])["p"]}
    assert rule in codes, codes
    assert category_of(rule) == "compilable"


@pytest.mark.parametrize("rule", sorted(RUNTIME_ERRORS))
def test_runnable_rules_raise_at_run_time(rule):
    src = RUNTIME_ERRORS[rule]
    compile(src, "<x>", "exec")
    with pytest.raises(Exception):  # noqa: B017 - any exception: the line does not run
        exec(compile(src, "<x>", "exec"), {"__name__": "probe"})  # noqa: S102 - trusted test snippets
    codes = {d["code"] for d in run_ruff({"p": src}, DEFAULT_SELECT, DEFAULT_IGNORE, [])["p"]}
    assert rule in codes, codes
    assert category_of(rule) == "runnable"


def test_category_by_meaning_not_prefix():
    assert category_of("B905") == "style"  # zip() without strict=: runs the same
    assert category_of("E722") == "safety"  # bare except swallows KeyboardInterrupt/SystemExit
    assert category_of("F401") == "style" and category_of("F841") == "style"
    assert category_of("F821") == "runnable" and category_of("PLE0101") == "runnable"
    assert category_of("F701") == "compilable" and category_of("S307") == "safety"


def test_rules_outside_the_table_fall_back_to_ruffs_category():
    assert "RUF006" not in RULE_CATEGORIES
    assert category_of("RUF016") == "runnable"  # Ruff: correctness (invalid index type)
    assert category_of("RUF006") == "style"  # Ruff: pedantic
    assert category_of("D100") == "style"


@pytest.fixture(scope="module")
def tok(tiny_model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_dir)


def test_bare_except_and_zip_land_on_their_tokens_with_their_categories(tok):
    code = "def f(a, b):\n    try:\n        return list(zip(a, b))\n    except:\n        return []\n"
    s = make_sample("```python\n", tok(code, add_special_tokens=False)["input_ids"], tok)
    out = LintComponent()([s])[0]
    cats = {d["rule"]: d["category"] for d in out.diagnostics}
    assert cats.get("B905") == "style" and cats.get("E722") == "safety"
    e722 = next(d for d in out.diagnostics if d["rule"] == "E722")
    assert code[e722["span"][0]:e722["span"][1]].startswith("except")
    assert out.info["n_runnable"] == 0.0 and out.info["n_safety"] == 1.0
    assert np.all(out.values <= 0)


def test_mbpp_references_runnable_or_compilable_findings_are_real_defects(shared_data):
    """Only MBPP 218 is flagged: F821 `swap` is undefined (NameError whenever A > B; no test reaches it)."""
    rows = load_mbpp(os.path.join(shared_data, "mbpp", "mbpp.jsonl"))
    found = run_ruff({f"t{r['task_id']}": r["code"].replace("\r\n", "\n") for r in rows}, DEFAULT_SELECT,
                     DEFAULT_IGNORE, [])
    flagged = sorted((k, d["code"]) for k, ds in found.items() for d in ds
                     if d.get("code") and category_of(d["code"]) in ("compilable", "runnable"))
    assert flagged == [("t218", "F821")]


def test_docs_table_matches_the_code():
    if not DOCS.is_file():
        pytest.skip(f"{DOCS} not present on this branch yet")
    text = DOCS.read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| ([A-Z]+[0-9]+) \| [^|]* \| [^|]* \| (\w+) \|$", text, flags=re.MULTILINE))
    assert rows == RULE_CATEGORIES
