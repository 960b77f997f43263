"""Syntax reward against real code (never negative on valid Python) and against SynCode."""

from __future__ import annotations

import glob
import json
import os
import random
import sysconfig
from pathlib import Path

import numpy as np
import pytest

from densecode.rewards import make_sample
from densecode.rewards.syntax import SyntaxComponent, first_invalid_char, parse_error

ROBOT_PROMPT = "# Instruction: x\ndef task_program():\n"


@pytest.fixture(scope="module")
def tok(tiny_model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_dir)


def test_all_mbpp_references_get_no_negative_syntax_token(tok, shared_data):
    with open(os.path.join(shared_data, "mbpp", "mbpp.jsonl"), encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh]
    assert len(rows) == 974
    comp = SyntaxComponent()
    for prompt in ("Write a function.\n```python\n", "Write a function.\n"):
        samples = [make_sample(prompt, tok(r["code"], add_special_tokens=False)["input_ids"], tok) for r in rows]
        for r, s, out in zip(rows, samples, comp(samples)):
            assert s.code_regions, r["task_id"]
            assert out.values.min() >= 0, (r["task_id"], out.diagnostics)
            assert out.values.max() == 1.0


def test_stdlib_sample_gets_no_negative_syntax_token(tok):
    files = sorted(glob.glob(os.path.join(sysconfig.get_paths()["stdlib"], "*.py")))
    random.Random(0).shuffle(files)
    files = [f for f in files if os.path.getsize(f) < 30000][:30]
    assert len(files) >= 20
    comp = SyntaxComponent()
    for f in files:
        src = Path(f).read_text(encoding="utf-8")
        s = make_sample("```python\n", tok(src, add_special_tokens=False)["input_ids"], tok)
        assert s.response == src
        assert comp([s])[0].values.min() >= 0, f


@pytest.mark.parametrize(
    ("program", "first_bad"),
    [
        ("go_to('kitchen'\n    say('hi')\n", "say"),  # CPython reports the first string
        ("if x = 1:\n  pass\n", " 1"),  # CPython reports `x`; `if x =` may still become `if x ==`
        ("x = (1 + ) * 2\n", ") * 2"),
        ("while True\n  break\n", "\n  break"),
        ("def f(:\n", ":"),
        ("x = 1 + * 2\n", "* 2"),
        ("say(1) say(2)\n", "say(2)"),
        ("x = [1, 2,, 3]\n", ", 3]"),
        ("return return\n", "\n"),  # `return return` might still grow into `return returned`
    ],
)
def test_first_invalid_char(program, first_bad):
    k = first_invalid_char(program)
    assert program[k:].startswith(first_bad)
    assert parse_error(program)[2] is False


# Broken robot programs. "agree": both sources flag the same token. The others are
# known, explained disagreements (measured with densecode.grammar at the time of
# writing; the grammar module may close some gaps, so only agreement is asserted):
BROKEN = [
    ("    x = (1 + ) * 2\n    say(x)\n", "agree"),
    ("    for in range(3):\n        pass\n", "agree"),
    ("    say('a') say('b')\n", "agree"),
    ("    x = [1, 2,, 3]\n", "agree"),
    # Python: `if x = ` cannot continue, so the space is flagged; SynCode's lexer skips
    # whitespace and flags the `1`.
    ("    if x = 1:\n        pass\n", "python-earlier"),
    # Python flags `say`, where the missing comma makes it invalid (older SynCode
    # grammars also rejected the valid newline inside the open bracket).
    ("    go_to('kitchen'\n    say('hi')\n", "python-first"),
    # SynCode's parser fails on `def =` and stops judging (verdicts None): no grammar verdict.
    ("    def = 3\n", "grammar-silent"),
    # SynCode accepts `return return`, a dedent to a column never opened, and the newline
    # after `while True` (then its parser fails): Python's parser is stricter.
    ("    return return\n", "grammar-silent"),
    ("    x = 1\n  y = 2\n", "grammar-silent"),
    ("    while True\n        break\n", "grammar-silent"),
]


@pytest.mark.slow
def test_python_and_grammar_sources_flag_the_same_token(tok, tmp_path, monkeypatch):
    pytest.importorskip("syncode")
    monkeypatch.setenv("DENSECODE_CACHE", str(tmp_path))
    from densecode.grammar import GrammarProcessor, check_token_ids

    proc = GrammarProcessor(tok, "check")
    py, gr = SyntaxComponent(), SyntaxComponent(source="grammar")
    report = []
    for response, expect in BROKEN:
        ids = tok(response, add_special_tokens=False)["input_ids"]
        s = make_sample(ROBOT_PROMPT, ids, tok)
        s.grammar_verdicts = check_token_ids(tok, ROBOT_PROMPT, ids, mode_processor=proc)
        a = np.flatnonzero(py([s])[0].values < 0).tolist()
        b = np.flatnonzero(gr([s])[0].values < 0).tolist()
        assert len(a) == 1, response  # Python's parser flags every broken program
        report.append((response, a, b))
        if expect == "agree":
            assert a == b, (response, a, b)
    print("python vs grammar first rejected token:", report)
