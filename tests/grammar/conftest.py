"""The grammar tests' fixtures: the SynCode processor on the tiny test tokenizer (a fresh grammar cache per module),
and a reused incremental row parser checked against a new parser per prefix."""

import pytest

from densecode.config import ModelConfig
from densecode.models import load_model_and_tokenizer


@pytest.fixture(scope="module")
def engine(tiny_model_dir, tmp_path_factory):
    """(the SynCode processor, the tokenizer) of the tiny test model, with DENSECODE_CACHE in a fresh folder."""
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


def _parser_answer(parser, code):
    """Everything a row parser answers for `code`: acceptable terminal sequences, remainder, indents, next terminals."""
    try:
        r = parser.get_acceptable_next_terminals(code)
    except Exception as exc:  # noqa: BLE001
        return ("raises", type(exc).__name__)
    ind = r.next_ac_indents
    ind = None if ind is None else (ind.accept_indents, ind.greater_than_indent_val)
    return (frozenset(tuple(a.accept_terminals) for a in r.accept_sequences), r.remainder, r.remainder_state, ind,
            frozenset(parser.next_ac_terminals))


@pytest.fixture
def reused_parser_agrees():
    """check(proc, programs, probes, rng) -> the number of prefixes (each also with a random probe appended, which
    makes the reused parser backtrack) on which a reused incremental row parser, as decoding uses it, answered exactly
    like a new parser per prefix; asserts on the first difference."""
    from densecode.grammar import new_row_parser

    def check(proc, programs, probes, rng) -> int:
        reused = new_row_parser(proc, "incremental")
        checked = 0
        for code in programs:
            reused.reset()
            for i in range(1, len(code) + 1):
                for text in (code[:i] + rng.choice(probes), code[:i]):
                    fresh = new_row_parser(proc, "incremental")
                    assert _parser_answer(reused, text) == _parser_answer(fresh, text), repr(text[-60:])
                    checked += 1
        return checked

    return check
