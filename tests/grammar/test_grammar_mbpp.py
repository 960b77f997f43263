"""The grammar on real code: MBPP's reference solutions (../shared/data/mbpp; skipped when absent).

Teacher-forced, as `benchmarks/speed/syncode_overhead.py`'s MBPP section does it (the full count, all 974
with a mask per token, is that script's job: about 20 minutes): check never rejects a token of a
reference solution, and constrain's mask never blocks one, on the tiny test tokenizer (whose token
boundaries differ from densecode-tiny's, so this also exercises other splits of the same code).
"""

import ast
import json
import warnings

import pytest

from densecode.config import ModelConfig
from densecode.models import load_model_and_tokenizer

MASKED_SOLUTIONS = 120  # every k-th solution gets the (slower) mask check too


def _solutions(shared_data):
    path = shared_data / "mbpp" / "mbpp.jsonl"
    if not path.is_file():
        pytest.skip(f"MBPP not found at {path} (expected ../shared/data/mbpp/mbpp.jsonl beside the repo)")
    out = []
    for line in path.read_text().splitlines():
        code = json.loads(line)["code"]
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # invalid escape sequences in some references
                ast.parse(code)
        except SyntaxError:
            continue
        out.append(code.replace("\r\n", "\n"))  # MBPP stores CRLF; models emit "\n"
    return out


@pytest.mark.slow
def test_mbpp_references_are_never_rejected_or_blocked(shared_data, tiny_model_dir, tmp_path, monkeypatch):
    from pathlib import Path

    from densecode.grammar import GrammarProcessor

    monkeypatch.setenv("DENSECODE_CACHE", str(tmp_path / "cache"))
    solutions = _solutions(Path(shared_data))
    assert len(solutions) > 900
    _, tok = load_model_and_tokenizer(ModelConfig(name_or_path=str(tiny_model_dir)))
    proc = GrammarProcessor(tok, "check", code_prefix="none")
    vocab = len(tok)
    step = max(1, len(solutions) // MASKED_SOLUTIONS)
    rejected, blocked = [], []
    for k, code in enumerate(solutions):
        ids = tok(code)["input_ids"]
        with_mask = k % step == 0
        proc.begin([""])
        row = proc.rows[0]
        for i, tok_id in enumerate(ids):
            if with_mask:
                mask = proc._accept_mask(row, vocab)
                if mask is None or not bool(mask[tok_id]):
                    blocked.append((k, tok.decode(ids[max(0, i - 6):i]) + " >>" + tok.decode([tok_id])))
                    break
            if proc.observe([0], [tok_id])[0] is not True:
                rejected.append((k, tok.decode(ids[max(0, i - 6):i]) + " >>" + tok.decode([tok_id])))
                break
    assert rejected == []
    assert blocked == []
