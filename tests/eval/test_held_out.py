"""The trainer's held-out eval is EvalSpecs run by the same sampling call as `densecode eval`."""

from dataclasses import replace

import pytest

from densecode.config import GenerationConfig, ModelConfig, load_config
from densecode.domains import build_domain
from densecode.domains.base import DomainOptions
from densecode.eval.held_out import complete, held_out_passes
from densecode.eval.runner import evaluate
from densecode.models import load_model_and_tokenizer


def test_passes_take_the_runs_generation_settings():
    gen = GenerationConfig(top_p=0.9, max_new_tokens=40, batch_size=8, grammar="check")
    opts = DomainOptions(eval_sampled_temperature=1.0, eval_seed=99)
    greedy, sampled = held_out_passes("codegen", gen, opts, seed=3)
    assert (greedy.name, greedy.spec.temperature, greedy.spec.seed) == ("greedy", 0.0, 3)
    assert (sampled.name, sampled.spec.temperature, sampled.spec.seed) == ("sampled", 1.0, 99)
    for p in (greedy, sampled):
        s = p.spec
        assert (s.domain, s.n, s.top_p, s.max_new_tokens, s.grammar, s.batch_size) == ("codegen", 1, 0.9, 40, "check", 16)
    [only] = held_out_passes("codegen", gen, DomainOptions(eval_temperature=0.5, eval_max_new_tokens=12), seed=0)
    assert (only.name, only.spec.temperature, only.spec.max_new_tokens) == ("eval", 0.5, 12)


def test_complete_refuses_several_samples_per_prompt():
    gen = GenerationConfig()
    [p] = held_out_passes("codegen", gen, DomainOptions(), seed=0)
    with pytest.raises(ValueError, match="n=2"):
        complete(replace(p.spec, n=2), None, None, ["x"], [])


@pytest.mark.parametrize("domain_name", ["robotics", "codegen"])
def test_cli_domain_eval_reproduces_the_trainers_eval(domain_name, tiny_model_dir):
    """densecode eval --domain, given the run's decoding (its pass's EvalSpec), judges the same answers the
    trainer's held-out eval judged: every task's outcome, in order, on both passes."""
    overrides = ["generation.max_new_tokens=24", "tasks.eval_sampled_temperature=1.0", "tasks.eval_seed=12345"]
    cfg = load_config(domain_name, overrides)
    domain = build_domain(cfg)
    domain.prepare()
    model, tok = load_model_and_tokenizer(ModelConfig(name_or_path=str(tiny_model_dir), dtype="float32"))
    domain.use_tokenizer(tok, str(tiny_model_dir))
    domain.evaluate(model, tok, n=5, seed=0)
    rows = {r["pass"]: r for r in domain.last_eval_rows}
    passes = held_out_passes(domain.name, cfg.generation, domain.options, seed=0)
    assert [p.name for p in passes] == list(rows) == ["greedy", "sampled"]
    prompts = [t["prompt"] for t in domain.eval_tasks(5)]
    for p in passes:
        answers = domain.generate(model, tok, prompts, temperature=p.spec.temperature, seed=p.spec.seed)
        spec = replace(p.spec, model=str(tiny_model_dir), dtype="float32", tasks=5, overrides=overrides,
                       split=domain.options.eval_split, task_seed=int(domain.options.eval_seed), workers=1)
        cli = evaluate(spec)
        assert [t["completion"] for t in cli["tasks"]] == answers, p.name
        assert [t["outcome"] for t in cli["tasks"]] == rows[p.name]["outcomes"], p.name
        assert [str(t["task_id"]) for t in cli["tasks"]] == rows[p.name]["task_ids"]
