"""`generation.grammar_code_prefix` reaches the grammar in training, eval and generate; the one JSONL reader's errors."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from densecode.config import load_config
from densecode.errors import DensecodeError
from densecode.jsonl import read_jsonl


class _Spy:
    """Stands in for densecode.generation.generate and records the grammar options it was given."""

    def __init__(self):
        self.options = []

    def __call__(self, model, tokenizer, prompts, *, n=1, grammar_options=None, **kw):
        self.options.append(grammar_options)
        return [SimpleNamespace(prompt_index=i // n, token_ids=[1], finish_reason="eos", completion="x",
                                grammar_verdicts=None, to_dict=dict, policy_logprobs=[-1.0],
                                eos_policy_logprob=-1.0, hidden=None, stop_token_id=None, stop_ids=[],
                                stop_policy_logprobs=[])
                for i in range(len(prompts) * n)]


def test_training_rollout_passes_the_code_prefix(tiny_model_dir, tmp_path, monkeypatch):
    import densecode.generation
    from densecode.training import build_trainer

    spy = _Spy()
    monkeypatch.setattr(densecode.generation, "generate", spy)
    cfg = load_config(None, [f"model.name_or_path={tiny_model_dir}", "domain=code", "tasks.path=unused.jsonl",
                             "generation.grammar_code_prefix=prompt", "train.batch_size=2"])
    task = SimpleNamespace(train_batch=lambda n, seed: (["x = "] * n, [{}] * n),
                           evaluate=lambda *a, **k: {})
    reward = SimpleNamespace(weights={}, __call__=None)
    trainer = build_trainer(cfg, tmp_path, progress=False, task_source=task, reward_fn=lambda s: reward)
    trainer.rollout(0)
    assert spy.options == [{"code_prefix": "prompt"}]


def test_domain_eval_passes_the_code_prefix(tiny_model_dir, monkeypatch):
    import densecode.generation
    from densecode.domains import build_domain

    spy = _Spy()
    monkeypatch.setattr(densecode.generation, "generate", spy)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model, tok = AutoModelForCausalLM.from_pretrained(tiny_model_dir), AutoTokenizer.from_pretrained(tiny_model_dir)
    cfg = load_config("robotics", ["generation.grammar_code_prefix=none"])
    build_domain(cfg).generate(model, tok, ["p"], temperature=0.0, seed=0)  # the held-out eval's sampling call
    assert spy.options == [{"code_prefix": "none"}]


def test_eval_and_generate_commands_pass_the_code_prefix(tiny_model_dir, tmp_path, monkeypatch):
    import densecode.generation
    from densecode.cli import main
    from densecode.eval.runner import sample

    spy = _Spy()
    monkeypatch.setattr(densecode.generation, "generate", spy)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    args = SimpleNamespace(n=1, max_new_tokens=4, temperature=0.0, top_p=1.0, grammar="off", batch_size=1, seed=0,
                           grammar_code_prefix="prompt")
    sample(args, model, tok, ["x = "], [])
    assert spy.options == [{"code_prefix": "prompt"}]
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(json.dumps({"prompt": "x = "}) + "\n")
    assert main(["generate", "--model", str(tiny_model_dir), "--prompts", str(prompts), "--out",
                 str(tmp_path / "o.jsonl"), "--no-progress", "--set", "generation.grammar_code_prefix=none"]) == 0
    assert spy.options[-1] == {"code_prefix": "none"}


@pytest.mark.parametrize(("content", "message"), [
    (b'{"a": 1}\n{"a": \n', r"x.jsonl:2: not valid JSON"),
    (b'{"a": 1}\n\xff\xfe\n', r"x.jsonl:2: not UTF-8 text"),
    (b"[1, 2]\n", r"x.jsonl:1: expected a JSON object, got list"),
    (b"\n\n", r"x.jsonl: no tasks in the file \(fix it\)"),
])
def test_one_reader_one_error_format(tmp_path, content, message):
    path = tmp_path / "x.jsonl"
    path.write_bytes(content)
    with pytest.raises(DensecodeError, match=message):
        read_jsonl(path, what="tasks", hint="fix it")
    with pytest.raises(DensecodeError, match=r"nope.jsonl: file not found"):
        read_jsonl(tmp_path / "nope.jsonl")
    with pytest.raises(DensecodeError, match=r"is a directory"):
        read_jsonl(tmp_path)
