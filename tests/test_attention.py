"""The grouped-query SDPA path gives what transformers' own SDPA path gives, forward and backward."""

import pytest
import torch

from densecode.attention import NAME, use_gqa_sdpa


def _tiny_llama(kv_heads: int):
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(vocab_size=64, hidden_size=48, intermediate_size=96, num_hidden_layers=2,
                                      num_attention_heads=6, num_key_value_heads=kv_heads,
                                      max_position_embeddings=64, attn_implementation="sdpa")
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config)


def _loss_and_grads(model, ids, mask):
    model.zero_grad()
    out = model(input_ids=ids, attention_mask=mask)
    out.logits.float().logsumexp(-1).mean().backward()
    return out.logits.detach(), [p.grad.clone() for p in model.parameters()]


def test_grouped_sdpa_matches_transformers_sdpa_with_padding_and_cache():
    model = _tiny_llama(kv_heads=2)
    ids = torch.randint(0, 64, (3, 9))
    mask = torch.ones_like(ids)
    mask[0, :4] = 0  # left padding, as generation uses
    ref_logits, ref_grads = _loss_and_grads(model, ids, mask)
    with torch.no_grad():
        ref_step = model(input_ids=ids[:, :8], attention_mask=mask[:, :8], use_cache=True)
        ref_next = model(input_ids=ids[:, 8:], attention_mask=mask, past_key_values=ref_step.past_key_values).logits

    assert use_gqa_sdpa(model) and model.config._attn_implementation == NAME
    logits, grads = _loss_and_grads(model, ids, mask)
    with torch.no_grad():
        step = model(input_ids=ids[:, :8], attention_mask=mask[:, :8], use_cache=True)
        nxt = model(input_ids=ids[:, 8:], attention_mask=mask, past_key_values=step.past_key_values).logits
    torch.testing.assert_close(logits[mask.bool()], ref_logits[mask.bool()], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(nxt, ref_next, rtol=1e-5, atol=1e-5)
    for g, ref in zip(grads, ref_grads):
        torch.testing.assert_close(g, ref, rtol=1e-4, atol=1e-6)


def test_models_without_grouped_heads_keep_their_attention():
    model = _tiny_llama(kv_heads=6)
    assert not use_gqa_sdpa(model)
    assert model.config._attn_implementation == "sdpa"
