"""A minibatch drops the columns that are padding in all its rows, and scores the same."""

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from densecode.models import prepare_tokenizer
from densecode.rl.rollout import Response, build_batch
from densecode.rl.value_head import PolicyWithValue


def _batch(tokenizer):
    prompts = ["def add(a, b):\n", "x = 1\n" * 6, "y ="]
    lengths = [3, 9, 1, 0, 5]  # a 0-token response keeps its one masked slot
    responses = [Response(prompt_index=i % 3, token_ids=list(range(5, 5 + n)), finish_reason="length")
                 for i, n in enumerate(lengths)]
    return build_batch(tokenizer, prompts, [{} for _ in prompts], responses, temperature=1.0)


def test_trimmed_drops_shared_padding_and_keeps_every_row_aligned(tiny_model_dir):
    tok = prepare_tokenizer(AutoTokenizer.from_pretrained(tiny_model_dir))
    batch = _batch(tok)
    batch.advantages = torch.randn(batch.response_ids.shape)
    batch.components = {"tests": torch.randn(batch.response_ids.shape)}
    mb = batch.select([0, 2, 3])  # without the longest prompt (row 1) and the longest response (row 1)
    trimmed = mb.trimmed()
    assert trimmed.response_ids.shape[1] == 3 < mb.response_ids.shape[1]
    assert trimmed.input_ids.shape[1] < mb.input_ids.shape[1]
    for name in ("input_ids", "attention_mask", "position_ids"):
        assert getattr(trimmed, name).shape == trimmed.input_ids.shape
    assert bool(trimmed.attention_mask[:, 0].any()), "the first kept column holds some row's prompt"
    for name in ("response_ids", "response_mask", "advantages"):
        assert torch.equal(getattr(trimmed, name), getattr(mb, name)[:, :3])
    assert torch.equal(trimmed.components["tests"], mb.components["tests"][:, :3])
    # The response still sits at the end of the sequence: the same tokens score the same.
    model = PolicyWithValue(AutoModelForCausalLM.from_pretrained(tiny_model_dir), with_value_head=True).eval()
    with torch.no_grad():
        full = model(mb.input_ids, mb.attention_mask, mb.position_ids, mb.response_ids)
        cut = model(trimmed.input_ids, trimmed.attention_mask, trimmed.position_ids, trimmed.response_ids)
    mask = trimmed.response_mask.bool()
    torch.testing.assert_close(cut.logprobs[mask], full.logprobs[:, :3][mask], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(cut.values[mask], full.values[:, :3][mask], atol=1e-5, rtol=1e-5)
    assert batch.trimmed() is batch  # nothing to drop: the batch itself
