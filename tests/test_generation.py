import json

import pytest
import torch

from densecode.cli import main
from densecode.config import ModelConfig
from densecode.errors import DensecodeError
from densecode.generation import cut_at_stop, filter_logits, generate
from densecode.models import load_model_and_tokenizer

PROMPTS = ["def add(a, b):\n", "# Instruction: go to the kitchen and pick up the apple\ndef task_program():\n", "x ="]


@pytest.fixture(scope="module")
def tiny(tiny_model_dir):
    return load_model_and_tokenizer(ModelConfig(name_or_path=str(tiny_model_dir)))


def test_shapes_order_and_invariants(tiny):
    model, tok = tiny
    out = generate(model, tok, PROMPTS, n=2, max_new_tokens=12, temperature=1.0, seed=0, progress=False)
    assert len(out) == 6
    assert [g.prompt_index for g in out] == [0, 0, 1, 1, 2, 2]
    assert [g.sample_index for g in out] == [0, 1, 0, 1, 0, 1]
    for g in out:
        assert g.prompt == PROMPTS[g.prompt_index]
        assert len(g.token_ids) == len(g.logprobs) <= 12
        assert all(lp <= 0 for lp in g.logprobs)
        assert g.finish_reason in ("eos", "stop", "length")
        assert g.completion == tok.decode(g.token_ids, skip_special_tokens=True)
        assert tok.eos_token_id not in g.token_ids
        assert g.grammar_verdicts is None


def test_seed_reproducible(tiny):
    model, tok = tiny
    a = generate(model, tok, PROMPTS, n=2, max_new_tokens=8, seed=3, progress=False)
    b = generate(model, tok, PROMPTS, n=2, max_new_tokens=8, seed=3, progress=False)
    assert [g.token_ids for g in a] == [g.token_ids for g in b]


def _greedy_reference(model, tok, prompt, steps):
    ids = tok([prompt], return_tensors="pt")["input_ids"]
    out = []
    with torch.no_grad():
        for _ in range(steps):
            nxt = int(model(ids).logits[0, -1].argmax())
            if nxt == tok.eos_token_id:
                break
            out.append(nxt)
            ids = torch.cat([ids, torch.tensor([[nxt]])], dim=1)
    return out


def test_greedy_batched_with_left_padding_matches_uncached_reference(tiny):
    model, tok = tiny
    out = generate(model, tok, PROMPTS, max_new_tokens=10, temperature=0, batch_size=3, progress=False)
    for g in out:
        assert g.token_ids == _greedy_reference(model, tok, g.prompt, 10)[: len(g.token_ids)]
        assert len(g.token_ids) == 10 or g.finish_reason == "eos"


def test_logprobs_are_those_of_the_sampling_distribution(tiny):
    model, tok = tiny
    for temperature in (1.0, 0.7):
        (g,) = generate(model, tok, [PROMPTS[0]], max_new_tokens=6, temperature=temperature, seed=1, progress=False)
        prompt_ids = tok([PROMPTS[0]], return_tensors="pt")["input_ids"]
        ids = torch.cat([prompt_ids, torch.tensor([g.token_ids])], dim=1)
        with torch.no_grad():
            logits = model(ids).logits[0, prompt_ids.shape[1] - 1 : -1] / temperature
        expected = torch.log_softmax(logits, -1).gather(-1, torch.tensor(g.token_ids)[:, None]).squeeze(-1)
        assert torch.allclose(torch.tensor(g.logprobs), expected, atol=1e-4)


def test_top_k_top_p_filtering():
    logits = torch.tensor([[3.0, 2.0, 1.0, 0.0]])
    assert torch.isinf(filter_logits(logits, 2, 1.0)).tolist() == [[False, False, True, True]]
    probs = torch.softmax(logits, -1)  # 0.64, 0.24, 0.09, 0.03
    kept = ~torch.isinf(filter_logits(logits, 0, 0.8))
    assert kept.tolist() == [[True, True, False, False]]
    assert probs[0, 0] < 0.8


def _nucleus_by_full_sort(logits, top_p):
    sorted_logits, order = torch.sort(logits, dim=-1, descending=True)
    probs = torch.softmax(sorted_logits, dim=-1)
    drop_sorted = (probs.cumsum(-1) - probs) >= top_p
    return torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)


@pytest.mark.parametrize("scale", [0.05, 1.0, 4.0, 20.0])  # flat (nucleus past the candidates) to peaked
@pytest.mark.parametrize("top_k", [0, 5, 300])
def test_nucleus_from_candidates_is_the_full_sort_nucleus(scale, top_k):
    torch.manual_seed(int(scale * 10) + top_k)
    logits = torch.randn(6, 5000) * scale
    logits[0, :2] += 50.0  # one row whose nucleus is two tokens
    for top_p in (0.5, 0.9, 0.95, 0.999):
        expected = filter_logits(logits, top_k, 1.0)
        expected = expected.masked_fill(_nucleus_by_full_sort(expected, top_p), float("-inf"))
        assert torch.equal(torch.isinf(filter_logits(logits, top_k, top_p)), torch.isinf(expected))


def test_stop_strings_cut_text_and_tokens_consistently(tiny):
    model, tok = tiny
    (full,) = generate(model, tok, [PROMPTS[1]], max_new_tokens=24, temperature=0, progress=False)
    text = full.completion
    assert len(text) > 6
    stop = text[3:5]
    (g,) = generate(model, tok, [PROMPTS[1]], max_new_tokens=24, temperature=0, stop=[stop], progress=False)
    assert g.finish_reason == "stop"
    assert stop not in g.completion
    assert g.completion == tok.decode(g.token_ids, skip_special_tokens=True)
    assert text.startswith(g.completion)
    assert g.token_ids == full.token_ids[: len(g.token_ids)]
    assert len(g.logprobs) == len(g.token_ids)
    # the tokens cut off are the ones that completed the stop string, with their policy log-probs
    whole = g.token_ids + g.stop_ids
    assert g.stop_ids and whole == full.token_ids[: len(whole)] and stop in tok.decode(whole)
    assert stop not in tok.decode(whole[:-1])
    assert g.stop_policy_logprobs == pytest.approx(full.policy_logprobs[len(g.token_ids): len(whole)], abs=1e-5)


def test_cut_at_stop_keeps_tokens_before_the_stop(tiny):
    _, tok = tiny
    ids = tok("x = 1\n# done\ny = 2")["input_ids"]
    text = tok.decode(ids)
    kept = cut_at_stop(tok, ids, text.index("\n#"))
    kept_text = tok.decode(kept)
    assert "\n#" not in kept_text and kept_text.startswith("x = 1")
    assert text.startswith(kept_text)


def test_bad_arguments(tiny):
    model, tok = tiny
    with pytest.raises(DensecodeError, match="grammar"):
        generate(model, tok, PROMPTS, grammar="strict", progress=False)
    with pytest.raises(DensecodeError):
        generate(model, tok, PROMPTS, n=0, progress=False)


def test_cli_writes_records(tiny_model_dir, tmp_path, capsys):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("\n".join(json.dumps({"prompt": p, "task_id": i}) for i, p in enumerate(PROMPTS)) + "\n")
    out = tmp_path / "out" / "gen.jsonl"
    code = main(["generate", "--model", str(tiny_model_dir), "--prompts", str(prompts), "--n", "2",
                 "--max-new-tokens", "5", "--temperature", "0.8", "--out", str(out), "--no-progress"])
    assert code == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == 6
    for key in ("prompt", "completion", "token_ids", "logprobs", "grammar_verdicts", "finish_reason"):
        assert key in records[0]
    assert "wrote 6 completions" in capsys.readouterr().err

    text_prompts = tmp_path / "prompts.txt"
    text_prompts.write_text("x = 1\ny =\n")
    assert main(["generate", "--model", str(tiny_model_dir), "--prompts", str(text_prompts),
                 "--max-new-tokens", "3", "--out", str(out), "--no-progress"]) == 0
    assert [json.loads(line)["prompt"] for line in out.read_text().splitlines()] == ["x = 1", "y ="]

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "x"}\n{"text": "no prompt field"}\n')
    assert main(["generate", "--model", str(tiny_model_dir), "--prompts", str(bad), "--out", str(out)]) == 2
    assert "bad.jsonl:2" in capsys.readouterr().err


def test_rows_leaving_the_batch_do_not_disturb_the_others(tiny):
    model, tok = tiny
    full = generate(model, tok, PROMPTS[:2], max_new_tokens=16, temperature=0, progress=False)
    stop = full[0].completion[2:4]
    assert stop and stop not in full[1].completion[:-1]
    cut = generate(model, tok, PROMPTS[:2], max_new_tokens=16, temperature=0, stop=[stop], progress=False)
    assert cut[0].finish_reason == "stop"
    assert cut[1].token_ids == full[1].token_ids  # computed after row 0 left the KV cache


def test_a_stop_at_the_first_characters_leaves_an_empty_response_with_its_hidden_shape(tiny):
    # A policy that opens with the stop string (seen in training at a high lr) must not crash the rollout.
    model, tok = tiny
    (full,) = generate(model, tok, [PROMPTS[1]], max_new_tokens=8, temperature=0, progress=False,
                       collect_hidden=True)
    stop = full.completion[:2]
    assert stop
    (g,) = generate(model, tok, [PROMPTS[1]], max_new_tokens=8, temperature=0, stop=[stop], progress=False,
                    collect_hidden=True)
    assert (g.finish_reason, g.completion, g.token_ids, g.policy_logprobs) == ("stop", "", [], [])
    assert g.stop_ids and g.hidden.shape == (len(g.stop_ids), full.hidden.shape[-1])  # the stop tokens' states


def test_samples_of_one_prompt_share_its_prompt_pass_and_match_one_row_batches(tiny):
    model, tok = tiny
    shared = generate(model, tok, PROMPTS, n=3, max_new_tokens=8, temperature=0, batch_size=9, progress=False,
                      collect_hidden=True)
    alone = generate(model, tok, PROMPTS, n=3, max_new_tokens=8, temperature=0, batch_size=1, progress=False,
                     collect_hidden=True)
    for a, b in zip(shared, alone):
        assert (a.prompt_index, a.sample_index, a.token_ids) == (b.prompt_index, b.sample_index, b.token_ids)
        torch.testing.assert_close(torch.tensor(a.logprobs), torch.tensor(b.logprobs), atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(a.hidden, b.hidden, atol=1e-5, rtol=1e-5)
    # sampled: the rows of one prompt still draw independently
    sampled = generate(model, tok, [PROMPTS[1]], n=6, max_new_tokens=12, temperature=1.0, seed=0, progress=False)
    assert len({tuple(g.token_ids) for g in sampled}) > 1


def test_prompt_stops_cut_each_prompt_at_its_own_strings(tiny):
    """prompt_stops (a multi-task batch): each prompt's rows end at that prompt's stop strings only, and the same
    list for every prompt is `stop` itself."""
    model, tok = tiny
    prompts = [PROMPTS[0], PROMPTS[2]]
    full = generate(model, tok, prompts, n=2, max_new_tokens=16, temperature=0, progress=False)
    a, b = full[0].completion[:3], full[2].completion[1:4]  # in one prompt's completion and not in the other's
    assert a.strip() == "" and b.strip() and a not in full[2].completion and b not in full[0].completion
    cut = generate(model, tok, prompts, n=2, max_new_tokens=16, temperature=0, progress=False,
                   prompt_stops=[[a], [b]])
    for g, s, whole in zip(cut, [a, a, b, b], full):
        assert g.finish_reason == "stop" and s not in g.completion and whole.completion.startswith(g.completion)
    # Prompt 0's string does not cut prompt 1's rows: nothing else stops them.
    only_a = generate(model, tok, prompts, max_new_tokens=16, temperature=0, progress=False, prompt_stops=[[a], []])
    assert only_a[0].finish_reason == "stop" and only_a[1].token_ids == full[2].token_ids
    same = generate(model, tok, prompts, max_new_tokens=16, temperature=0, progress=False, prompt_stops=[[b], [b]])
    shared = generate(model, tok, prompts, max_new_tokens=16, temperature=0, progress=False, stop=[b])
    assert [g.token_ids for g in same] == [g.token_ids for g in shared] and shared[1].finish_reason == "stop"
    with pytest.raises(DensecodeError, match="prompt_stops has 1 lists for 2 prompts"):
        generate(model, tok, prompts, max_new_tokens=4, progress=False, prompt_stops=[[a]])
