import os

import pytest

# Tests share 2 cores with everything else: keep torch single-threaded and offline.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

SHARED_DATA = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data")


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """A tiny random GPT-2 + BPE tokenizer saved as a local model directory."""
    from densecode.testing import make_tiny_model

    import torch

    torch.set_num_threads(1)
    return make_tiny_model(tmp_path_factory.mktemp("tiny-model"))


@pytest.fixture(scope="session")
def shared_data():
    """Path to ../shared/data; skips the test with a message when absent."""
    path = os.path.abspath(SHARED_DATA)
    if not os.path.isdir(path):
        pytest.skip(f"benchmark data not found at {path} (expected ../shared/data beside the repo)")
    return path


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
