"""The syntax -1 sits on the token that broke the program: cases where that token is known exactly."""

from __future__ import annotations

import os
import random

import numpy as np
import pytest

from densecode.rewards import make_sample
from densecode.rewards.mutations import insertion_probes, load_mbpp, position_probe
from densecode.rewards.syntax import SyntaxComponent, first_invalid_char, parse_error

ROBOT_PROMPT = "# Instruction: x\ndef task_program():\n"
CODE_PROMPT = '"""Write a function."""\n```python\n'
PROSE_PROMPT = "Write a function that adds two numbers.\n"


@pytest.fixture(scope="module")
def tok(tiny_model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_dir)


def sample_of(tok, prompt, response, **kw):
    s = make_sample(prompt, tok(response, add_special_tokens=False)["input_ids"], tok, {}, **kw)
    assert s.response == response
    return s


@pytest.mark.parametrize(
    ("program", "first_bad"),
    [
        # CPython blames `d` ("Perhaps you forgot a comma?"); `d e` is where it stops parsing.
        ("print(a, b or c, d e)\n", "e)"),
        # `[x f` may still become `[x for ...]`: the first invalid character is the space after `fo`.
        ("y = [x fo x in z]\n", " x in"),
        # A keyword may still grow into a name (`in` -> `int`), a number literal into a longer one.
        ("x = in\n", "\n"),
        ("x = 0x\n", "\n"),
        # An unterminated string later in the source is reported first by CPython (a tokenizer
        # error): the real error before it must still be found.
        ("y = 1 $\nz = 'ab", "$"),
        ("y = 1 $\nz = f'{a", "$"),
        ("y = 1 $\nz = '''ab\nc", "$"),
        ("foo(a b, 'abc')\n", "b, "),
        # An open bracket may be closed on a later line: the next line's first word is the
        # first token no continuation accepts.
        ("x = foo(1, 2\ny = 3\n", "y = 3"),
        ("s = 'abc' 'd' x\n", "x\n"),
        # At the end of the source, a conditional expression still waiting for `else` is not broken
        # (CPython's implied NEWLINE would blame the start of the expression).
        ("y = max(a, b) if (a != b) $ else -1\n", "$"),
        # A dedent to a column never opened is wrong from the line's first token on.
        ("def f():\n    x = 1\n  y = 2\n", "y = 2"),
        ("if x:\n    pass\n  else:\n    pass\n", "else:"),
        ("def f():\n\tif x:\n        y = 2\n", "y = 2"),
    ],
)
def test_first_invalid_char_known_cases(program, first_bad):
    assert parse_error(program) is not None
    k = first_invalid_char(program)
    assert program[k:].startswith(first_bad), (program[:k], program[k:])


def _check_placement(sample, values, pos):
    target = sample.token_at(pos)
    negative = np.flatnonzero(values < 0).tolist()
    assert negative == [target], (sample.response, negative, target)
    assert np.all(values[:target] > 0)
    assert not np.any(values[target + 1:] > 0)


def test_string_left_open_after_the_error_does_not_move_the_penalty(tok):
    # Not truncated: CPython's verdict is "unterminated string" at the end (which used to read as
    # "incomplete" and put the -1 on the last token); the `$` is the real error.
    response = "    x = 1 $\n    say('hi"
    s = sample_of(tok, ROBOT_PROMPT, response)
    v = SyntaxComponent()([s])[0].values
    _check_placement(s, v, response.index("$"))
    # CPython's position is the open string, after the real error: the "cpython" locator's known flaw.
    v_cpython = SyntaxComponent(locate="cpython")([s])[0].values
    assert np.flatnonzero(v_cpython < 0).tolist() != np.flatnonzero(v < 0).tolist()


def test_position_probe_over_mbpp_references(tok, shared_data):
    """` $` on a middle line of every third MBPP reference: the -1 lands exactly on it, every time."""
    rows = load_mbpp(os.path.join(shared_data, "mbpp", "mbpp.jsonl"))[::3]
    comp = SyntaxComponent()
    n = 0
    for row in rows:
        case = position_probe(row["code"])
        assert case is not None, row["task_id"]
        program, pos = case
        assert program[pos] == "$"
        s = sample_of(tok, CODE_PROMPT, program)
        _check_placement(s, comp([s])[0].values, pos)
        n += 1
    assert n >= 300


def test_invalid_character_before_random_tokens_of_mbpp_references(shared_data):
    """`$`/`?` inserted mid-line, inside brackets, after keywords...: located exactly, never early or late."""
    rows = load_mbpp(os.path.join(shared_data, "mbpp", "mbpp.jsonl"))[::5]
    rng = random.Random(0)
    misplaced = []
    n = 0
    for row in rows:
        for program, pos in insertion_probes(row["code"], rng, n=2):
            n += 1
            k = first_invalid_char(program)
            if k != pos:
                misplaced.append((row["task_id"], program[max(0, pos - 30):pos + 1], k - pos))
    assert n >= 350 and misplaced == []


@pytest.mark.parametrize("prompt", [ROBOT_PROMPT, CODE_PROMPT, PROSE_PROMPT])
@pytest.mark.parametrize("response", ["", "   \n\n", "# TODO\n", "    # nothing here\n    \n",
                                      "I cannot do that.", "```python\n\n```\n"])
def test_no_code_is_an_error_on_the_stop_token(tok, prompt, response):
    if response == "I cannot do that." and prompt != PROSE_PROMPT:
        pytest.skip("after a prompt that ends in code, the response is code: prose there is a syntax error")
    ids = tok(response, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    s = make_sample(prompt, ids, tok, {})
    out = SyntaxComponent()([s])[0]
    assert out.values[-1] == -1.0 and np.all(out.values[:-1] == 0.0)
    assert out.info["syntax_ok"] == 0.0 and out.info["has_code"] == 0.0
    assert out.diagnostics[0]["rule"] == "syntax-no-code"
    # Without an EOS the last token is the stop; a length cut-off is no decision to stop.
    if response:
        bare = make_sample(prompt, ids[:-1], tok, {})
        assert SyntaxComponent()([bare])[0].values[-1] == -1.0
    cut = make_sample(prompt, ids, tok, {}, truncated=True)
    assert np.all(SyntaxComponent()([cut])[0].values == 0.0)


def test_code_after_comments_is_code(tok):
    s = sample_of(tok, CODE_PROMPT, "# add\ndef add(a, b):\n    return a + b\n")
    out = SyntaxComponent()([s])[0]
    assert out.info["has_code"] == 1.0 and out.values.min() >= 0 and out.values.max() == 1.0


def test_too_deeply_nested_to_compile_is_an_error_not_a_crash(tok):
    """CPython cannot build the tree of a few thousand chained `+` (RecursionError): a syntax error.

    Only a complete expression shows the depth (an unfinished one fails to parse before the
    tree is built), so the position is not exact here; the verdict is.
    """
    response = "x = " + "1+" * 3000 + "1\n"
    with pytest.raises(RecursionError):
        compile(response, "<deep>", "exec")
    s = sample_of(tok, CODE_PROMPT, response)
    out = SyntaxComponent()([s])[0]
    assert out.info["syntax_ok"] == 0.0 and (out.values < 0).sum() == 1
