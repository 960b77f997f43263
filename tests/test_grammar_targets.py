"""`for` targets: the grammar lets any expression be one, Python does not (`for len(x) in`).

densecode's parser asks CPython's parser about the text between a `for` and its `in`; ground
truth is `ast.parse` on complete programs, and the `in` after a bad target is refused at once.
"""

import ast
import random

import pytest

from densecode.config import ModelConfig
from densecode.models import load_model_and_tokenizer

CASES = [
    "for len(x) in y: pass\n", "for a.b in c: pass\n", "for a[0], *b in c: pass\n", "for (a, b) in c: pass\n",
    "x = [a for f(x) in y]\n", "x = [x for x in a in b]\n", "for x in lambda: y in z: pass\n",
    "for x in a if b in c else d: pass\n", "for (a in b) in c: pass\n", "x = [a in b for c in d]\n",
    "async def f():\n    async for len(x) in y: pass\n", "async def f():\n    async for x in y: pass\n",
    "x = [a for a in b if c in d]\n", "for x, in y: pass\n", "x = {k: v for k, v in d.items()}\n",
    "x = (1 for [a, b] in c)\n", "for a + b in c: pass\n", "for *a in c: pass\n", "f(a for len(b) in c)\n",
    "for i in range(3):\n    for j, k in enumerate(x): pass\n", "for x in y:\n    z = a in b\n",
    "for (x) in y: pass\n", "for x.y[0].z in w: pass\n", "for None in x: pass\n", "for 'a' in x: pass\n",
    "[x for x in y for f() in z]\n", "[x for x in y if a for b.c in z]\n",
]
_SOUP = ["x", "f", "(", ")", "[", "]", ".", "a", ",", "*", "1", "+", "in", "not", "lambda:", "if", "else", "'s'"]


@pytest.fixture(scope="module")
def engine(tiny_model_dir, tmp_path_factory):
    import os

    old = os.environ.get("DENSECODE_CACHE")
    os.environ["DENSECODE_CACHE"] = str(tmp_path_factory.mktemp("densecode-cache"))
    import densecode.grammar as G

    _, tok = load_model_and_tokenizer(ModelConfig(name_or_path=str(tiny_model_dir)))
    yield G.syncode_processor(tok, G.load_grammar()), tok
    if old is None:
        os.environ.pop("DENSECODE_CACHE", None)
    else:
        os.environ["DENSECODE_CACHE"] = old


def _python_accepts(code):
    try:
        ast.parse(code)
    except SyntaxError:
        return False
    return True


def _grammar_accepts(parser, code):
    parser.reset()
    try:
        result = parser.get_acceptable_next_terminals(code)
    except Exception:  # noqa: BLE001
        return False
    return result.remainder_state.name != "INCOMPLETE" and "$END" in parser.next_ac_terminals


def test_for_targets_agree_with_python(engine):
    from densecode.grammar import new_row_parser

    parser = new_row_parser(engine[0], "incremental")
    rng = random.Random(0)
    programs = list(CASES)
    for _ in range(600):
        target = " ".join(rng.choice(_SOUP) for _ in range(1 + rng.randrange(4)))
        iterable = rng.choice(["y", "a in b", "a if b else c", "lambda: z"])
        programs.append(rng.choice([f"for {target} in {iterable}: pass\n", f"z = [q for {target} in {iterable}]\n"]))
    wrong = [(code, _python_accepts(code)) for code in programs if _grammar_accepts(parser, code) != _python_accepts(code)]
    assert wrong == []
    assert sum(map(_python_accepts, programs)) >= 25  # both verdicts exercised


def test_check_refuses_the_in_after_a_bad_target(engine):
    from densecode.grammar import GrammarProcessor, check_token_ids

    _, tok = engine
    checker = GrammarProcessor(tok, "check", code_prefix="none")
    for good, bad in [("for x.y", "for len(x)"), ("z = [q for a, b", "z = [q for f(a)")]:
        for code, ok in ((good, True), (bad, False)):
            ids = tok(code)["input_ids"]
            assert all(v is True for v in check_token_ids(tok, "", ids, mode_processor=checker)), code
            in_ids = tok(code + " in y")["input_ids"][len(ids):]
            verdicts = check_token_ids(tok, "", ids + in_ids, mode_processor=checker)[len(ids):]
            assert (verdicts[0] is True) is ok, (code, verdicts)
