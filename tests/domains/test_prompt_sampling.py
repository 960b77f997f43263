"""tasks.train_sampling: signal (densecode/domains/prompt_sampling.py): prompts drawn by the chance their next group
of samples is mixed, from their pass/fail counts; the code domain's draws, its counts, and their checkpointed state."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from densecode.domains.code import POOL_INDEX, CodeDomain
from densecode.domains.prompt_sampling import SignalSampler, mixed_group_probability
from densecode.errors import DensecodeError
from densecode.rewards import ComponentOutput, RewardBatch


def test_mixed_group_probability_matches_monte_carlo():
    rng = np.random.default_rng(0)
    for passes, fails, k, m, s in [(0, 0, 4, 0.1, 2.0), (1, 3, 4, 0.1, 2.0), (0, 8, 4, 0.3, 2.0), (2, 2, 8, 0.5, 4.0)]:
        want = mixed_group_probability(np.array([passes]), np.array([fails]), k, m, s)[0]
        p = rng.beta(m * s + passes, (1 - m) * s + fails, size=200_000)
        draws = rng.random((200_000, k)) < p[:, None]
        got = np.mean(draws.any(1) & ~draws.all(1))
        assert abs(got - want) < 0.01, (passes, fails, k, got, want)


def test_failing_prompts_fall_and_passing_ones_rise_against_unseen():
    sampler = SignalSampler(3)
    sampler.observe([0] * 4 + [1] * 4, [0.0] * 4 + [1.0, 0.0, 0.0, 0.0], group_size=4)
    w = sampler.weights()
    assert w[0] < w[2] < w[1]  # all-fail < unseen < mixed
    assert sampler.stats()["prompts_seen"] == 2 and sampler.stats()["prompts_ever_passed"] == 1
    sampler.observe([2], [None], group_size=4)  # a sample without an outcome is not counted
    assert sampler.passes[2] == sampler.fails[2] == 0


def test_draws_are_distinct_deterministic_and_follow_the_weights():
    sampler = SignalSampler(50)
    assert sampler.draw(10, seed=3) == sampler.draw(10, seed=3)
    assert len(set(sampler.draw(50, seed=1))) == 50 and len(sampler.draw(120, seed=1)) == 120
    sampler.observe(list(range(1, 50)) * 4, [0.0] * (49 * 4), group_size=4)  # every prompt but 0 always fails
    sampler.observe([0] * 4, [1.0, 0.0, 1.0, 0.0], group_size=4)
    firsts = [sampler.draw(1, seed=s)[0] for s in range(300)]
    assert firsts.count(0) > 300 / 50 * 3  # drawn several times more often than uniform would


def _domain(tmp_path, sampling="signal"):
    rows = [{"prompt": f"def f{i}(x):\n", "tests": [f"assert f{i}(1) == 1"]} for i in range(10)]
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return CodeDomain({"path": str(path), "eval_fraction": 0.2, "train_sampling": sampling})


def _batch(tasks, outcomes):
    outs = [ComponentOutput(np.zeros(1, dtype=np.float32), outcome=o) for o in outcomes]
    rb = RewardBatch([o.values for o in outs], {"tests": [o.values for o in outs]}, {}, {"tests": outs}, {})
    return SimpleNamespace(tasks=tasks, reward_outputs=rb)


def test_code_domain_counts_outcomes_by_prompt_and_checkpoints_them(tmp_path):
    domain = _domain(tmp_path)
    prompts, tasks = domain.train_batch(4, seed=0)
    assert len(set(prompts)) == 4 and all(POOL_INDEX in t for t in tasks)
    rows = [t for t in tasks for _ in range(2)]  # 2 samples a prompt
    outcomes = [1.0, 0.0] + [0.0, 0.0] * 3
    stats = domain.on_step_end(SimpleNamespace(samples_per_prompt=2), _batch(rows, outcomes), {})
    assert stats["tasks/prompts_seen"] == 4 and stats["tasks/prompts_ever_passed"] == 1
    first = tasks[0][POOL_INDEX]
    state = domain.state_dict()
    assert state["signal_sampler"]["passes"][first] == 1 and sum(state["signal_sampler"]["fails"]) == 7
    resumed = _domain(tmp_path)
    resumed.load_state_dict(json.loads(json.dumps(state)))  # through JSON, as the checkpoint stores it
    assert resumed.train_batch(4, seed=9) == domain.train_batch(4, seed=9)
    other = CodeDomain({"path": str(tmp_path / "tasks.jsonl"), "eval_fraction": 0.5, "train_sampling": "signal"})
    with pytest.raises(DensecodeError, match="tasks file the run started with"):
        other.load_state_dict(state)


def test_uniform_sampling_is_unchanged_and_keeps_no_state(tmp_path):
    domain = _domain(tmp_path, "uniform")
    prompts, tasks = domain.train_batch(4, seed=0)
    assert all(POOL_INDEX not in t for t in tasks)
    assert domain.on_step_end(SimpleNamespace(samples_per_prompt=2), None, {}) == {}
    assert domain.state_dict() is None
    with pytest.raises(DensecodeError, match="tasks.train_sampling must be one of"):
        _domain(tmp_path, "weighted")


def test_a_code_run_with_signal_sampling_logs_its_counts_and_checkpoints_them(tiny_model_dir, tmp_path):
    from densecode import api

    _domain(tmp_path)  # writes tasks.jsonl
    overrides = [f"tasks.path={tmp_path / 'tasks.jsonl'}", "tasks.train_sampling=signal", "train.batch_size=2",
                 "algo.ppo.credit=outcome", "algo.ppo.samples_per_prompt=2", "generation.max_new_tokens=8",
                 "train.eval_every=0", "train.save_every=1", "train.num_threads=1", "model.value_model=shared"]
    run = api.train(domain="code", model=str(tiny_model_dir), steps=2, output_dir=tmp_path / "run",
                    overrides=overrides, progress=False)
    rows = [json.loads(line) for line in (run["run_dir"] / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in rows if r.get("kind") == "train"]
    assert [r["tasks/prompts_seen"] for r in train] == sorted(r["tasks/prompts_seen"] for r in train)
    assert 2 <= train[-1]["tasks/prompts_seen"] <= 4
    state = json.loads((run["run_dir"] / "checkpoints" / "step-000002" / "trainer_state.json").read_text())
    counts = state["task_source"]["signal_sampler"]
    assert sum(counts["passes"]) + sum(counts["fails"]) == 8  # 2 steps x 2 prompts x 2 samples
