"""SynCode grammar check/constrain on the tiny model (mask store built once, ~8 s)."""

import codeop
import logging
import warnings

import pytest

from densecode.config import ModelConfig
from densecode.models import load_model_and_tokenizer

ROBOT_PROMPT = "# Instruction: go to the kitchen and pick up the apple\ndef task_program():\n"


@pytest.fixture(scope="module")
def grammar_env(tmp_path_factory):
    import os

    old = os.environ.get("DENSECODE_CACHE")
    os.environ["DENSECODE_CACHE"] = str(tmp_path_factory.mktemp("densecode-cache"))
    yield
    if old is None:
        os.environ.pop("DENSECODE_CACHE", None)
    else:
        os.environ["DENSECODE_CACHE"] = old


@pytest.fixture(scope="module")
def tiny(tiny_model_dir, grammar_env):
    return load_model_and_tokenizer(ModelConfig(name_or_path=str(tiny_model_dir)))


@pytest.fixture(scope="module")
def checker(tiny):
    from densecode.grammar import GrammarProcessor

    return GrammarProcessor(tiny[1], "check")


def _token_at(tok, ids, char_offset):
    """Index of the token whose text covers character `char_offset` of decode(ids)."""
    for k in range(len(ids)):
        if len(tok.decode(ids[: k + 1])) > char_offset:
            return k
    raise AssertionError("offset beyond text")


def test_import_keeps_root_logger(grammar_env):
    root = logging.getLogger()
    before = (list(root.handlers), root.level)
    from densecode.grammar import import_syncode

    import_syncode()
    assert (list(root.handlers), root.level) == before


def test_check_flags_the_invalid_token_exactly(tiny, checker):
    from densecode.grammar import check_token_ids

    _, tok = tiny
    body = "    x = 1\n    y = (x + 2) * 3\n    z = = 4\n    go_to(x)\n"
    ids = tok(body)["input_ids"]
    bad = _token_at(tok, ids, body.index("= =") + 2)
    verdicts = check_token_ids(tok, ROBOT_PROMPT, ids, mode_processor=checker)
    assert len(verdicts) == len(ids)
    assert all(v is True for v in verdicts[:bad]), verdicts[:bad]
    assert verdicts[bad] is False


def test_corrected_grammar_accepts_valid_python(tiny, checker):
    from densecode.grammar import check_token_ids

    _, tok = tiny
    code = (
        'def f(a, /, b=0):\n'
        '    """Docstring\n    over two lines."""\n'
        '    if (n := len(a)) > 1:\n'
        '        return 0b101 + 1j\n'
        "    s = 'it\\'s' + rb\"raw\" + f\"{b}\"\n"
        '    return s\n'
        'try:\n    pass\nexcept* ValueError:\n    pass\n'
    )
    compile(code, "<test>", "exec")
    ids = tok(code)["input_ids"]
    verdicts = check_token_ids(tok, "", ids, mode_processor=checker)
    rejected = [(i, tok.decode(ids[max(0, i - 5): i + 1])) for i, v in enumerate(verdicts) if v is not True]
    assert rejected == []


def test_every_end_token_is_judged_like_eos(tiny):
    """A chat model ends a turn with its end-of-turn token besides EOS: the grammar must treat both alike."""
    from densecode.grammar import GrammarProcessor

    _, tok = tiny
    end_of_turn = 5  # any other id stands in for <|im_end|>
    proc = GrammarProcessor(tok, "check", eos_ids={tok.eos_token_id, end_of_turn})
    assert proc.eos_ids == sorted({tok.eos_token_id, end_of_turn})
    vocab = len(tok)
    proc.begin([ROBOT_PROMPT])
    row = proc.rows[0]
    assert proc._accept_mask(row, vocab)[end_of_turn].item() is False  # empty body: no turn end yet
    row.ids = tok("    go_to('kitchen')\n")["input_ids"]
    assert proc._accept_mask(row, vocab)[end_of_turn].item() is True


def test_eos_allowed_only_when_code_is_complete(tiny, checker):
    _, tok = tiny
    vocab = len(tok)
    checker.begin([ROBOT_PROMPT])
    row = checker.rows[0]
    assert checker._accept_mask(row, vocab)[tok.eos_token_id].item() is False  # empty body
    row.ids = tok("    go_to('kitchen')\n")["input_ids"]
    assert checker._accept_mask(row, vocab)[tok.eos_token_id].item() is True
    row.ids = tok("    go_to('kitchen'")["input_ids"]
    assert checker._accept_mask(row, vocab)[tok.eos_token_id].item() is False


def test_code_prefix_selection(tiny, checker):
    checker.begin([ROBOT_PROMPT, "Write a function that adds two numbers.\n```python\n", "Add two numbers, please."])
    prefixes = [row.prefix for row in checker.rows]
    assert prefixes == [ROBOT_PROMPT, "", ""]
    assert not any(row.failed for row in checker.rows)


def test_unparsable_prompt_code_counts_a_fallback(tiny):
    from densecode.generation import generate

    model, tok = tiny
    prompt = "x = = 1\n"  # code the grammar cannot parse
    out = generate(model, tok, [prompt], max_new_tokens=3, grammar="check", progress=False,
                   grammar_options={"code_prefix": "prompt"})
    assert out[0].grammar_fallbacks == 1
    assert out[0].grammar_verdicts == [None] * len(out[0].token_ids)


def _valid_prefix_lines(code: str) -> bool:
    """Python's own verdict on the complete lines: valid, or incomplete-but-continuable."""
    complete_lines = code[: code.rfind("\n") + 1]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            codeop.compile_command(complete_lines, symbol="exec")
    except SyntaxError:
        return False
    return True


def test_constrain_generates_valid_python_prefixes(tiny):
    from densecode.generation import generate
    from densecode.grammar import code_is_complete

    model, tok = tiny
    prompts = [ROBOT_PROMPT, "def add(a, b):\n"]
    out = generate(model, tok, prompts, n=3, max_new_tokens=16, temperature=1.0, grammar="constrain", seed=0,
                   progress=False)
    checked = 0
    for g in out:
        assert len(g.grammar_verdicts) == len(g.token_ids)
        if g.grammar_fallbacks:
            continue  # reported, and the row decoded unconstrained from there on
        assert all(v is True for v in g.grammar_verdicts)
        code = g.prompt + g.completion
        if g.finish_reason == "eos":
            assert code_is_complete(code), code
        assert _valid_prefix_lines(code), code
        checked += 1
    assert checked >= 3


def test_check_mode_verdicts_are_for_the_emitted_tokens(tiny, checker):
    from densecode.generation import generate
    from densecode.grammar import check_token_ids

    model, tok = tiny
    out = generate(model, tok, [ROBOT_PROMPT], n=3, max_new_tokens=16, temperature=1.0, grammar="check", seed=2,
                   progress=False)
    assert any(False in g.grammar_verdicts for g in out)  # a random model writes invalid code
    for g in out:
        replay = check_token_ids(tok, ROBOT_PROMPT, g.token_ids, mode_processor=checker)
        assert replay == g.grammar_verdicts


def test_tokenizer_cache_key_depends_on_contents(tiny):
    import json

    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    from densecode.grammar import syncode_cache_dir, tokenizer_fingerprint

    _, tok = tiny
    data = json.loads(tok.backend_tokenizer.to_str())
    vocab = data["model"]["vocab"]
    a, b = sorted(vocab)[100], sorted(vocab)[200]
    vocab[a], vocab[b] = vocab[b], vocab[a]  # same size, different tokenizer
    other = PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_str(json.dumps(data)), eos_token="<|endoftext|>")
    assert len(other) == len(tok)
    assert tokenizer_fingerprint(other) != tokenizer_fingerprint(tok)
    assert syncode_cache_dir(other) != syncode_cache_dir(tok)


def test_fingerprint_is_stable_across_padded_calls(tiny):
    from densecode.grammar_syncode import _FINGERPRINTS, tokenizer_fingerprint

    _, tok = tiny
    before = tokenizer_fingerprint(tok)
    tok(["a", "longer prompt"], padding=True, truncation=True, max_length=8)
    _FINGERPRINTS.clear()
    assert tokenizer_fingerprint(tok) == before


def test_whitespace_only_line_deeper_than_its_block_is_accepted(tiny, checker):
    """A blank line holding deeper indentation is valid Python; the check must not reject it."""
    from densecode.grammar import check_token_ids, code_is_complete

    _, tok = tiny
    code = "def f(x):\n    y = x\n            \n    return y\n"
    assert code_is_complete(code)
    ids = tok(code)["input_ids"]
    verdicts = check_token_ids(tok, "", ids, mode_processor=checker)
    assert verdicts == [True] * len(ids), [tok.decode(ids[: k + 1]) for k, v in enumerate(verdicts) if v is not True][:1]
    # ...while code at that depth is still an unexpected indent.
    bad = tok("def f(x):\n    y = x\n            z = 1\n")["input_ids"]
    assert False in check_token_ids(tok, "", bad, mode_processor=checker)
