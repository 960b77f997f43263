"""Check-first constrained sampling draws from the same distribution as full masking.

Target (both strategies): q restricted to A, q = softmax(truncate(logits) / T) with
top-k/top-p truncation first, A = the tokens the grammar's parser accepts. The draws
are compared with the exact target, computed by checking every token of the vocabulary.
"""

import math

import pytest
import torch

from densecode.config import ModelConfig
from densecode.models import load_model_and_tokenizer

PROMPT = "def add(a, b):\n    return a"
N_DRAWS = 6000


@pytest.fixture(scope="module")
def setup(tiny_model_dir, tmp_path_factory):
    import os

    os.environ.setdefault("DENSECODE_CACHE", str(tmp_path_factory.mktemp("densecode-cache")))
    model, tok = load_model_and_tokenizer(ModelConfig(name_or_path=str(tiny_model_dir)))
    with torch.no_grad():
        ids = tok(PROMPT, return_tensors="pt")["input_ids"]
        logits = model(ids).logits[0, -1].float()
    return model, tok, logits


def _draws(tok, logits, strategy, temperature, top_k, top_p, seed):
    """N_DRAWS one-step draws at PROMPT's end (all batch positions share one grammar row)."""
    from densecode.generation import (_constrain_check_first, _draw, _resample_rejected, _restrict, _truncate)
    from densecode.grammar import GrammarProcessor

    grammar = GrammarProcessor(tok, "constrain", code_prefix="prompt", constrain_by=strategy)
    grammar.begin([PROMPT])
    alive = [0] * N_DRAWS
    raw = logits[None].expand(N_DRAWS, -1).clone()
    truncated = _truncate(raw, temperature, top_k, top_p)
    generator = torch.Generator().manual_seed(seed)
    if grammar.masks_every_step:
        mask = grammar._accept_mask(grammar.rows[0], raw.shape[-1])
        grammar.rows[0].mask = mask
        truncated = torch.stack([_restrict(truncated[0], raw[0], mask)] * N_DRAWS)
        tokens, logps = _draw(truncated, temperature, generator)
        tokens, _ = _resample_rejected(grammar, alive, truncated, raw, tokens, logps, temperature, generator,
                                       lambda b: mask)
    else:
        tokens, logps = _draw(truncated, temperature, generator)
        tokens, _ = _constrain_check_first(grammar, alive, raw, truncated, tokens, logps, temperature, generator)
    return tokens, grammar


def _target(grammar, logits, temperature, top_k, top_p):
    from densecode.generation import _truncate

    row = grammar.rows[0]
    accepted = torch.tensor([grammar.token_is_valid(row, t) if t not in grammar.eos_ids else grammar._eos_ok(row)
                             for t in range(logits.shape[-1])])
    q = torch.softmax(_truncate(logits[None], temperature, top_k, top_p)[0] / temperature, -1)
    if not bool((q * accepted).sum() > 0):
        q = torch.softmax(logits / temperature, -1)
    target = q * accepted
    return q, accepted, target / target.sum()


@pytest.mark.slow
@pytest.mark.parametrize("temperature,top_k,top_p", [(1.0, 0, 1.0), (0.8, 40, 0.9)])
def test_check_first_and_full_masking_sample_the_same_distribution(setup, temperature, top_k, top_p):
    _, tok, logits = setup
    results = {}
    for strategy in ("check_first", "mask"):
        tokens, grammar = _draws(tok, logits, strategy, temperature, top_k, top_p, seed=7)
        results[strategy] = torch.bincount(tokens, minlength=logits.shape[-1]).float() / N_DRAWS
    q, accepted, target = _target(grammar, logits, temperature, top_k, top_p)
    # The state must make the test meaningful: the unconstrained draw is often rejected.
    assert float((q * accepted).sum()) < 0.9
    # Precondition of exactness: SynCode's mask contains every accepted token of q's support.
    mask = grammar._accept_mask(grammar.rows[0], logits.shape[-1])
    assert bool(mask[(accepted & (q > 0))].all())
    tolerance = 5 * torch.sqrt(target * (1 - target) / N_DRAWS) + 2.0 / N_DRAWS
    for strategy, freq in results.items():
        assert bool((freq[~accepted] == 0).all()), f"{strategy} emitted a rejected token"
        worst = float(((freq - target).abs() - tolerance).max())
        assert worst <= 0, f"{strategy}: frequencies off the target by {worst:.4f} beyond 5 sigma"
    # And the test has power: the unconstrained q is far from the target.
    assert float((q - target).abs().sum()) > 20 * math.sqrt(1 / N_DRAWS)
