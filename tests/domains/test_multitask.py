"""The `multi` domain (ASTOR, joint, curriculum): scheduler equations, reward routing with per-task KL,
two-step runs for every schedule with PPO and GRPO on toy domains (tests/toy_domains.py), robotics+code, and exact
resume."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from densecode.config import load_config
from densecode.domains import build_domain, build_reward_fn
from densecode.domains.multi import AstorOptions, TaskScheduler
from densecode.errors import DensecodeError

from tests import toy_domains  # noqa: F401  (registers the toy-a / toy-b domains)


# --------------------------------------------------------------------------- the scheduler's equations


def test_quotas_softmax_with_floor_and_integer_allocation():
    opts = AstorOptions(temperature=0.5, floor=0.1)
    s = TaskScheduler(["a", "b", "c"], "astor", opts)
    s.potential = {"a": 2.0, "b": 1.0, "c": 0.0}
    s.synergy = {"a": -0.5, "b": 0.5, "c": 0.0}
    util = s.utilities()
    assert util["a"]["utility"] == pytest.approx(1.0 - 0.5) and util["b"]["utility"] == pytest.approx(0.5 + 0.5)
    u = np.array([0.5, 1.0, 0.0]) / 0.5
    soft = np.exp(u) / np.exp(u).sum()
    q = s.quotas()
    assert [q[t] for t in "abc"] == pytest.approx(list(0.1 + 0.7 * soft))
    counts = s.allocate(10)
    assert sum(counts.values()) == 10 and min(counts.values()) >= 1 and counts["b"] == max(counts.values())
    # joint: uniform; curriculum: one task at a time in order
    assert TaskScheduler(["a", "b"], "joint", opts).allocate(5) in ({"a": 3, "b": 2}, {"a": 2, "b": 3})
    cur = TaskScheduler(["a", "b"], "curriculum", opts, curriculum_steps=2)
    assert [cur.curriculum_task(k) for k in range(5)] == ["a", "a", "b", "b", "b"]
    assert cur.allocate(4, step=2) == {"a": 0, "b": 4}
    with pytest.raises(DensecodeError, match="floor"):
        TaskScheduler(["a", "b", "c"], "astor", AstorOptions(floor=0.5))


def test_adaptive_beta_follows_utility():
    s = TaskScheduler(["a", "b"], "astor", AstorOptions(kl_lambda=0.5))
    s.potential = {"a": 1.0, "b": 0.0}
    s.synergy = {"a": 0.0, "b": -3.0}
    assert s.betas({"a": 0.1, "b": 0.2}) == pytest.approx({"a": 0.1 * 1.5, "b": 0.0})  # clamped at 0
    s.opts.adaptive_kl = False
    assert s.betas({"a": 0.1, "b": 0.2}) == {"a": 0.1, "b": 0.2}


def test_prompt_priority_prefers_variance_and_progress_and_unseen_prompts():
    s = TaskScheduler(["a"], "astor", AstorOptions(pool_size=3, unseen_prior=0.0, pool_refresh=0))
    # GRPO-style groups: slot 0 all equal (no signal), slot 1 mixed outcomes; slot 2 never seen
    s.observe({"a": {0: [1.0, 1.0], 1: [0.0, 1.0]}}, samples_per_prompt=2)
    assert s.prompt_utility("a", 0) == 0.0 and s.prompt_utility("a", 1) == pytest.approx(0.25)
    rng = np.random.default_rng(0)
    picks = [s.pick("a", 1, rng)[0] for _ in range(4000)]
    share = {k: picks.count(k) / len(picks) for k in range(3)}
    # weights 0+eps, 0.25, and the optimistic prior max(0, 0.25) for the unseen slot
    assert share[0] < 0.01 and share[1] == pytest.approx(0.5, abs=0.05) and share[2] == pytest.approx(0.5, abs=0.05)
    # progress: a prompt whose mean reward rose gets the EMA of the change; PPO: variance across visits
    s1 = TaskScheduler(["a"], "astor", AstorOptions(pool_size=1, progress_ema=0.5))
    s1.observe({"a": {0: [0.0]}}, 1)
    s1.observe({"a": {0: [1.0]}}, 1)
    st = s1.stats["a"][0]
    assert st.progress == pytest.approx(0.5) and st.var == pytest.approx(0.25)
    assert s1.potential["a"] == pytest.approx(0.25)  # one sample a step: the variance over the last rewards [0, 1]


def test_learning_potential_is_an_ema_of_reward_variance_and_pools_refresh():
    s = TaskScheduler(["a"], "astor", AstorOptions(utility_ema=0.5, pool_size=4, pool_refresh=2))
    s.observe({"a": {0: [0.0], 1: [1.0]}}, 1)
    assert s.potential["a"] == pytest.approx(0.25)
    s.observe({"a": {0: [0.0], 1: [0.0]}}, 1)  # PPO: the window holds [0, 1, 0, 0], variance 3/16
    assert s.potential["a"] == pytest.approx(0.5 * 0.25 + 0.5 * 3 / 16)
    s.opts.potential_window = 2  # only this step's two rewards: variance 0
    s.observe({"a": {0: [0.0], 1: [0.0]}}, 1)
    assert s.recent["a"] == [0.0, 0.0] and s.potential["a"] == pytest.approx(0.5 * (0.5 * 0.25 + 0.5 * 3 / 16))
    s.refresh_pools()
    assert s.pools["a"] == [2, 3, 4, 5] and set(s.stats["a"]) == set()
    state = json.loads(json.dumps(s.state_dict()))
    s2 = TaskScheduler(["a"], "astor", AstorOptions(utility_ema=0.5, pool_size=4, pool_refresh=2))
    s2.load_state_dict(state)
    assert s2.state_dict() == s.state_dict()


# --------------------------------------------------------------------------- domain, reward routing


def _cfg(*sets):
    return load_config(None, ["domain=multi", "tasks.tasks=[toy-a,toy-b]", "reward.code_regions=completion",
                              "tasks.options={toy-a: {word: x}, toy-b: {word: y}}", *sets])


def test_each_sample_is_routed_to_its_task_with_its_own_beta():
    from densecode.rewards import Sample

    cfg = _cfg("tasks.kl_beta={toy-a: 0.1}", "tasks.task_weights={toy-b: 2.0}")
    domain = build_domain(cfg)
    reward = build_reward_fn(cfg, domain)
    reward.set_task_betas({"toy-a": 0.1, "toy-b": 0.3})
    prompts, tasks = domain.train_batch(6, seed=3)
    assert {t["_domain"] for t in tasks} == {"toy-a", "toy-b"}
    samples = []
    for p, t in zip(prompts, tasks):
        s = Sample(prompt=p, response="x y", token_ids=[1, 2, 3], token_spans=[(0, 1), (1, 2), (2, 3)],
                   code_regions=[(0, 3)], task=t)
        s.logprobs = np.array([-1.0, -1.0, -1.0], dtype=np.float32)
        s.ref_logprobs = np.array([-2.0, -2.0, -2.0], dtype=np.float32)
        samples.append(s)
    rb = reward(samples)
    kl_tok = float(np.expm1(-1.0) + 1.0)  # k3 with x = ref - logp = -1
    for s, kl, tot in zip(samples, rb.components["kl"], rb.total):
        beta, scale = (0.1, 1.0) if s.task["_domain"] == "toy-a" else (0.3, 2.0)
        assert kl == pytest.approx(np.full(3, -beta * kl_tok * scale), rel=1e-5)
        assert tot[-1] == pytest.approx(scale * (1.0 + 0.03 - beta * kl_tok), rel=1e-5)
    assert "reward/toy-a/word/hit" in rb.stats and "reward/toy-b/sequence_mean" in rb.stats
    with pytest.raises(DensecodeError, match="not in tasks.tasks"):
        build_domain(_cfg("tasks.kl_beta={toy-c: 0.1}"))
    with pytest.raises(DensecodeError, match="schedule"):
        build_domain(_cfg("tasks.schedule=random"))


# --------------------------------------------------------------------------- two-step runs


def _train(tiny_model_dir, run, *extra):
    from densecode.cli import main

    return main(["train", "--domain", "multi", "--model", str(tiny_model_dir), "--output-dir", str(run), "--no-progress",
                 "--set", "tasks.tasks=[toy-a,toy-b]", "--set", "tasks.options={toy-a: {word: x}, toy-b: {word: y}}",
                 "--set", "train.batch_size=4", "--set", "train.eval_tasks=2", "--set", "generation.max_new_tokens=6",
                 "--set", "reward.code_regions=completion", "--set", "tasks.astor.synergy_every=1",
                 "--set", "tasks.astor.pool_size=6", *extra])


def _rows(run):
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("algo", ["ppo", "grpo"])
@pytest.mark.parametrize("schedule", ["astor", "joint", "curriculum"])
def test_two_step_runs_for_each_schedule_and_optimiser(tiny_model_dir, tmp_path, schedule, algo):
    extra = ["--steps", "2", "--set", f"tasks.schedule={schedule}", "--algo", algo]
    if algo == "grpo":
        extra += ["--set", "reward.weights.kl=0", "--set", "algo.grpo.group_size=2", "--set", "algo.grpo.repetition_window=3"]
    run = tmp_path / "run"
    assert _train(tiny_model_dir, run, *extra) == 0
    rows = _rows(run)
    train = [r for r in rows if r["kind"] == "train"]
    evals = [r for r in rows if r["kind"] == "eval"]
    assert [r["step"] for r in train] == [1, 2]
    for key in ("multi/toy-a/quota", "multi/toy-b/utility", "multi/toy-a/potential", "multi/toy-b/synergy",
                "multi/toy-a/beta", "time/scheduler_s"):
        assert key in train[-1], key
    assert "eval/toy-a/success_rate" in evals[-1] and "eval/average/score" in evals[-1]
    if schedule == "curriculum":  # 2 steps, 2 tasks: one step each, in order
        assert [r["multi/toy-a/n_prompts"] > 0 for r in train] == [True, False]
    if schedule == "astor":
        assert "time/synergy_probe_s" in train[-1] and -1.0 <= train[-1]["multi/toy-a/synergy"] <= 1.0
        if algo == "ppo":  # (GRPO: a group with equal outcomes has zero advantages, hence a zero gradient)
            assert train[-1]["multi/toy-a/synergy"] != 0.0
    else:
        assert train[-1]["multi/toy-a/quota"] in (0.5, 0.0, 1.0)
    state = json.loads((run / "checkpoints" / "step-000002" / "trainer_state.json").read_text())
    assert state["task_source"]["scheduler"]["step"] == 2
    assert (run / "multitask_curves.png").is_file()


def test_resume_restores_the_scheduler_state_exactly(tiny_model_dir, tmp_path):
    straight, split = tmp_path / "straight", tmp_path / "split"
    assert _train(tiny_model_dir, straight, "--steps", "3") == 0
    assert _train(tiny_model_dir, split, "--steps", "2") == 0
    assert _train(tiny_model_dir, split, "--steps", "3", "--resume", str(split)) == 0

    def sched(run, step):
        return json.loads((run / "checkpoints" / f"step-{step:06d}" / "trainer_state.json").read_text()
                          )["task_source"]["scheduler"]

    assert sched(split, 3) == sched(straight, 3)
    assert sched(split, 3)["stats"] and sched(split, 3) != sched(split, 2)


def test_robotics_and_code_train_together_from_the_gae_config(tiny_model_dir, tmp_path):
    from densecode.cli import main

    data = tmp_path / "tiny_code.jsonl"
    rows = [{"task_id": f"t{i}", "prompt": f"def add{i}(a, b):\n", "tests": [f"assert add{i}(1, 2) == 3"],
             "reference": "    return a + b\n"} for i in range(6)]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    run = tmp_path / "run"
    rc = main(["train", "--config", "multitask-gae", "--model", str(tiny_model_dir), "--output-dir", str(run),
               "--no-progress", "--steps", "2", "--set", f"tasks.options={{code: {{path: {data}}}}}",
               "--set", "train.batch_size=4", "--set", "train.eval_tasks=2", "--set", "generation.max_new_tokens=8",
               "--set", "tasks.astor.synergy_every=1", "--set", "tasks.astor.pool_size=4"])
    assert rc == 0
    rows = _rows(run)
    train = [r for r in rows if r["kind"] == "train"]
    evals = [r for r in rows if r["kind"] == "eval"]
    assert train[-1]["multi/robotics/quota"] + train[-1]["multi/code/quota"] == pytest.approx(1.0)
    assert train[-1]["multi/robotics/beta"] >= 0
    assert "reward/code/sequence_mean" in train[0] and "reward/robotics/sim/sim_score" in train[0]
    assert "eval/robotics/success_rate" in evals[-1] and "eval/code/pass_rate" in evals[-1]
    assert (run / "multitask_curves.png").is_file() and "| robotics" in (run / "multitask.md").read_text()


def test_shipped_config_trains_robotics_and_codegen_on_the_outcome_recipe(tiny_model_dir, tmp_path):
    """configs/multitask.yaml: PPO's outcome credit with 4 responses per prompt; a prompt's responses are one task's
    (the leave-one-out baseline stays within a task), both tasks evaluated greedy and sampled."""
    from densecode.cli import main

    run = tmp_path / "run"
    rc = main(["train", "--config", "multitask", "--model", str(tiny_model_dir), "--output-dir", str(run),
               "--no-progress", "--steps", "2", "--set", "train.batch_size=4", "--set", "train.eval_tasks=2",
               "--set", "train.eval_every=2", "--set", "generation.max_new_tokens=8", "--set", "train.rollouts_every=1",
               "--set", "tasks.astor.synergy_every=1", "--set", "tasks.astor.pool_size=4"])
    assert rc == 0
    rows = _rows(run)
    train = [r for r in rows if r["kind"] == "train"]
    evals = [r for r in rows if r["kind"] == "eval"]
    assert train[-1]["multi/robotics/quota"] + train[-1]["multi/codegen/quota"] == pytest.approx(1.0)
    assert train[-1]["multi/robotics/beta"] == 0.0 and train[-1]["multi/codegen/beta"] == 0.0
    assert {"eval/robotics/sampled_success_rate", "eval/codegen/sampled_pass_rate"} <= set(evals[-1])
    # Each task's per-task outcomes, pass by pass, averaging to the metric logged for it (paired comparisons).
    got = {(r["step"], r["pass"]): r for r in map(json.loads, (run / "eval_tasks.jsonl").read_text().splitlines())}
    assert {p for _, p in got} == {"robotics/greedy", "robotics/sampled", "codegen/greedy", "codegen/sampled"}
    for (step, p), r in got.items():
        task, pass_name = p.split("/")
        key = f"eval/{task}/{'sampled_' if pass_name == 'sampled' else ''}{r['metric']}"
        assert r["task"] == task and len(r["values"]) == 2
        assert np.mean(r["values"]) == pytest.approx(next(e for e in evals if e["step"] == step)[key])
    rollouts = [json.loads(line) for line in (run / "rollouts.jsonl").read_text().splitlines()]
    step = [r for r in rollouts if r["step"] == rollouts[-1]["step"]]
    assert len(step) == 4 * 4  # 4 prompts x 4 responses
    for g in range(4):
        group = step[4 * g:4 * g + 4]
        assert len({r["prompt"] for r in group}) == 1
        assert len({r["task"]["_domain"] for r in group}) == 1
    assert {r["task"]["_domain"] for r in step} <= {"robotics", "codegen"}


def test_merging_averages_the_specialists_task_vectors(tiny_model_dir, tmp_path):
    import torch
    from transformers import AutoModelForCausalLM

    from densecode.domains.multi.merge import main as merge_main
    from densecode.domains.multi.merge import merge_task_vectors

    base = AutoModelForCausalLM.from_pretrained(str(tiny_model_dir))
    specialists = []
    for k in range(2):
        m = AutoModelForCausalLM.from_pretrained(str(tiny_model_dir))
        with torch.no_grad():
            for i, p in enumerate(m.parameters()):
                p.add_(0.01 * (k + 1) * (i % 3 - 1))
        m.save_pretrained(tmp_path / f"spec{k}")
        specialists.append(m)
    out = tmp_path / "merged"
    assert merge_main([str(tmp_path / "spec0"), str(tmp_path / "spec1"), "--base", str(tiny_model_dir),
                       "--out", str(out)]) == 0
    merged = AutoModelForCausalLM.from_pretrained(str(out))
    for (name, b), s0, s1, mg in zip(base.named_parameters(), specialists[0].parameters(),
                                     specialists[1].parameters(), merged.parameters()):
        assert torch.allclose(mg, b + 0.5 * ((s0 - b) + (s1 - b)), atol=1e-6), name
    # weights and scale: base + 2 * (1 * delta_0) = base + 2 * delta_0
    m2 = merge_task_vectors(tiny_model_dir, [tmp_path / "spec0"], weights=[1.0], scale=2.0)
    p_base, p0, p2 = next(base.parameters()), next(specialists[0].parameters()), next(m2.parameters())
    assert torch.allclose(p2, p_base + 2 * (p0 - p_base), atol=1e-6)
    with pytest.raises(DensecodeError, match="weights"):
        merge_task_vectors(tiny_model_dir, [tmp_path / "spec0"], weights=[0.5, 0.5])


def test_eval_tasks_and_scores_route_to_each_domain():
    domain = build_domain(_cfg())
    tasks = domain.tasks("test", 5, seed=1)
    assert [t["_domain"] for t in tasks] == ["toy-a"] * 3 + ["toy-b"] * 2
    records = domain.score(tasks, ["x", "no", "x", "y", "no"])
    assert [r["outcome"] for r in records] == ["success", "failure", "success", "success", "failure"]
    m = domain.metrics(records)
    assert m["toy-a/success_rate"] == pytest.approx(2 / 3) and m["toy-b/success_rate"] == 0.5
    assert m["average/score"] == pytest.approx((2 / 3 + 0.5) / 2)


def test_bad_multitask_settings_name_the_key_and_the_fix():
    def cfg(*sets):
        return load_config(None, ["domain=multi", *sets])

    with pytest.raises(DensecodeError, match="unknown domain 'chess'"):
        build_domain(cfg("tasks.tasks=[toy-a,chess]"))
    with pytest.raises(DensecodeError, match=r"tasks.options names \['toy-c'\]"):
        build_domain(cfg("tasks.tasks=[toy-a]", "tasks.options.toy-c.word=x"))
    with pytest.raises(DensecodeError, match=r"unknown key 'tasks.options.toy-a.wrod'"):
        build_domain(_cfg("tasks.options={toy-a: {wrod: x}}"))
    with pytest.raises(DensecodeError, match="each domain once"):
        build_domain(cfg("tasks.tasks=[toy-a,toy-a]"))
    with pytest.raises(DensecodeError, match="tasks.tasks is empty"):
        build_domain(cfg("tasks.tasks=[]"))
    with pytest.raises(DensecodeError, match=r"tasks.astor.floor=0.9"):
        build_domain(_cfg("tasks.astor.floor=0.9"))


# --------------------------------------------------------------------------- ablation switches, per-sample KL in GRPO


def test_shared_beta_gives_every_task_one_beta():
    s = TaskScheduler(["a", "b"], "astor", AstorOptions(kl_lambda=0.5, shared_beta=True))
    s.potential = {"a": 1.0, "b": 0.0}  # U_a = 1, U_b = 0: mean U = 0.5
    base = {"a": 0.1, "b": 0.3}  # mean base 0.2
    assert s.betas(base) == pytest.approx({"a": 0.2 * 1.25, "b": 0.2 * 1.25})
    s.opts.adaptive_kl = False
    assert s.betas(base) == pytest.approx({"a": 0.2, "b": 0.2})
    s.opts.shared_beta = False
    assert s.betas(base) == pytest.approx(base)


def test_grpo_loss_weights_each_samples_kl_by_its_own_coefficient():
    import torch

    from densecode.rl.grpo import aggregate, grpo_policy_loss, k3_kl

    g = torch.Generator().manual_seed(0)
    logp = (-torch.rand(4, 5, generator=g) - 0.5).requires_grad_(True)
    ref = -torch.rand(4, 5, generator=g) - 0.5
    mask = torch.ones(4, 5)
    mask[1, 3:] = 0
    adv = torch.tensor([1.0, -1.0, 0.5, -0.5])
    coefs = torch.tensor([0.0, 0.0, 3.0, 3.0])  # rows 0-1: a task with beta 0; rows 2-3: beta 3
    for how in ("token", "sequence"):
        loss, st = grpo_policy_loss(logp, logp.detach(), adv, mask, aggregation=how, ref_logprobs=ref, kl_coef=coefs)
        pg_only, _ = grpo_policy_loss(logp, logp.detach(), adv, mask, aggregation=how)
        k3 = k3_kl(logp.detach(), ref)
        kl_part = aggregate(coefs[:, None] * k3, mask, how)
        assert float(kl_part) > 0
        assert float(loss.detach()) == pytest.approx(float(pg_only.detach()) + float(kl_part), abs=1e-6)
        assert st["kl_loss"] == pytest.approx(float(kl_part), rel=1e-5) and st["kl_coef_mean"] == pytest.approx(1.5)
        # The KL gradient: none on the beta-0 rows; beta * (1 - e^x) / count on the others (token aggregation).
        (grad_kl,) = torch.autograd.grad(loss - pg_only, logp)
        assert torch.equal(grad_kl[:2], torch.zeros(2, 5))
        if how == "token":
            expected = 3.0 * (1.0 - torch.exp(ref[2:] - logp.detach()[2:])) / mask.sum()
            assert torch.allclose(grad_kl[2:], expected, atol=1e-6)
    # A constant tensor is the scalar coefficient.
    a, _ = grpo_policy_loss(logp, logp.detach(), adv, mask, ref_logprobs=ref, kl_coef=torch.full((4,), 0.7))
    b, _ = grpo_policy_loss(logp, logp.detach(), adv, mask, ref_logprobs=ref, kl_coef=0.7)
    assert float(a.detach()) == pytest.approx(float(b.detach()), rel=1e-6)
    with pytest.raises(ValueError, match="3 values for 4 responses"):
        grpo_policy_loss(logp, logp.detach(), adv, mask, ref_logprobs=ref, kl_coef=torch.ones(3))


def test_a_two_task_grpo_step_applies_each_tasks_beta_to_its_own_samples(tiny_model_dir, tmp_path):
    """toy-a's beta is 0, toy-b's 2: every micro-batch's KL loss is 2 * k3 on toy-b's rows only."""
    import torch

    from densecode.training import build_trainer
    from densecode.rl.grpo import aggregate, k3_kl

    cfg = _cfg("algo.name=grpo", "reward.weights.kl=0", "algo.grpo.group_size=2", "algo.grpo.repetition_window=3",
               "algo.grpo.beta=0.5", "tasks.kl_beta={toy-a: 0.0, toy-b: 2.0}", "tasks.schedule=joint",
               "algo.num_minibatches=2", "train.batch_size=4", "generation.max_new_tokens=6",
               f"model.name_or_path={tiny_model_dir}", f"train.output_dir={tmp_path / 'run'}")
    trainer = build_trainer(cfg, tmp_path / "run", progress=False)
    assert trainer.reference is not None  # loaded because a task's beta is > 0 (the reward has no KL)
    with torch.no_grad():  # move the policy off the reference so k3 > 0 from the first minibatch on
        for p in trainer.unwrapped.policy.parameters():
            p.add_(0.05 * torch.randn_like(p))
    seen = []
    loss_fn = trainer.algo.loss

    def spy(mb, out):
        loss, st = loss_fn(mb, out)
        seen.append((mb, out.logprobs.detach(), st))
        return loss, st

    trainer.algo.loss = spy
    trainer.train_step(0)
    batch = trainer._last_batch
    want = [0.0 if t["_domain"] == "toy-a" else 2.0 for t in batch.tasks]
    assert {t["_domain"] for t in batch.tasks} == {"toy-a", "toy-b"}
    assert batch.kl_coefs.tolist() == want  # per sample, by its task (not algo.grpo.beta = 0.5)
    assert len(seen) == 2
    for mb, logp, st in seen:
        coefs = torch.tensor([0.0 if t["_domain"] == "toy-a" else 2.0 for t in mb.tasks])
        assert mb.kl_coefs.tolist() == coefs.tolist()
        k3 = k3_kl(logp, mb.ref_logprobs)
        expected = aggregate(coefs[:, None] * k3, mb.response_mask, "token")
        assert float(st["grpo/kl_loss"]) == pytest.approx(float(expected), rel=1e-5)
        b_rows = coefs > 0
        if b_rows.any():
            assert float(expected) > 0
        # The same k3 weighted by the run's single algo.grpo.beta would be another number.
        assert float(st["grpo/kl_loss"]) != pytest.approx(float(aggregate(0.5 * k3, mb.response_mask, "token")))


def test_the_trainer_checks_a_task_sources_per_sample_kl_weights():
    import torch

    from densecode.rl.trainer import Trainer

    def coefs(values, with_ref=True):
        owner = SimpleNamespace(_kl_loss_hook=lambda tasks, base: values, algo=SimpleNamespace(kl_coef=0.1))
        batch = SimpleNamespace(size=2, tasks=[{}, {}], response_mask=torch.ones(2, 3),
                                ref_logprobs=torch.zeros(2, 3) if with_ref else None)
        return Trainer._sample_kl_coefs(owner, batch)

    assert coefs([0.0, 0.5]).tolist() == [0.0, 0.5]
    assert coefs(None) is None
    for bad in ([0.1], [0.1, -1.0], [0.1, float("nan")]):
        with pytest.raises(DensecodeError, match="one finite weight >= 0 per sample"):
            coefs(bad)
    with pytest.raises(DensecodeError, match="no reference model"):
        coefs([0.0, 0.5], with_ref=False)


# --------------------------------------------------------------------------- the utilities' signal


def _step_end_batch(tasks, outcomes, rewards):
    """A batch as on_step_end sees it: one sample per prompt, the given outcomes (None: none reported) and rewards."""
    import torch

    from densecode.rewards.base import ComponentOutput

    reward_outputs = SimpleNamespace(outputs={"word": [ComponentOutput(np.zeros(1), [], {"hit": 1.0}, outcome=o)
                                                       for o in outcomes]})
    return SimpleNamespace(tasks=tasks, sequence_rewards=torch.tensor(rewards), reward_outputs=reward_outputs)


@pytest.mark.parametrize("signal", ["outcome", "reward"])
def test_learning_potential_is_taken_of_the_chosen_signal(signal):
    # toy-a's sequence rewards are 100x toy-b's while both tasks' outcomes spread alike: with the outcome signal the
    # two potentials are equal; with the reward signal the reward scale decides (the reason outcome is the default).
    domain = build_domain(_cfg(f"tasks.astor.potential_signal={signal}"))
    view = SimpleNamespace(samples_per_prompt=1, step=1)
    _, tasks = domain.train_batch(8, seed=1)
    outcomes = [float(k % 2) for k in range(8)]
    rewards = [(100.0 if t["_domain"] == "toy-a" else 1.0) * (o + 0.5) for t, o in zip(tasks, outcomes)]
    batch = _step_end_batch(tasks, outcomes, rewards)
    domain.on_step_end(view, batch, {})
    sched = domain.scheduler
    by_task = {t: [v for task, v in zip(batch.tasks, outcomes if signal == "outcome" else rewards)
                   if task["_domain"] == t] for t in ("toy-a", "toy-b")}
    for t, vals in by_task.items():
        assert sched.recent[t] == pytest.approx(vals)
        assert sched.potential[t] == pytest.approx(float(np.var(vals)))
    if signal == "reward":
        assert sched.potential["toy-a"] == pytest.approx(1e4 * sched.potential["toy-b"])


def test_a_task_without_a_verifiable_outcome_stops_astor_with_the_fix_and_not_joint():
    view = SimpleNamespace(samples_per_prompt=1, step=1)
    for schedule in ("astor", "joint"):
        domain = build_domain(_cfg(f"tasks.schedule={schedule}"))
        _, tasks = domain.train_batch(4, seed=1)
        rewards = [0.5, 1.0, 2.0, 3.0]
        outcomes = [None if t["_domain"] == "toy-a" else 1.0 for t in tasks]  # toy-a: no outcome at all
        batch = _step_end_batch(tasks, outcomes, rewards)
        if schedule == "astor":
            with pytest.raises(DensecodeError, match="toy-a report no verifiable outcome.*potential_signal=reward"):
                domain.on_step_end(view, batch, {})
        else:
            domain.on_step_end(view, batch, {})  # joint only logs the utilities: the sequence rewards
            assert sorted(x for v in domain.scheduler.recent.values() for x in v) == rewards
    with pytest.raises(DensecodeError, match="potential_signal='variance'"):
        build_domain(_cfg("tasks.astor.potential_signal=variance"))


def test_a_sample_without_an_outcome_is_left_out_of_the_utilities():
    # e.g. a simulator that failed on every run of one program: the run goes on, the sample counts for nothing.
    domain = build_domain(_cfg())
    _, tasks = domain.train_batch(6, seed=1)
    first_a = next(i for i, t in enumerate(tasks) if t["_domain"] == "toy-a")
    outcomes = [None if i == first_a else float(i % 2) for i in range(6)]
    domain.on_step_end(SimpleNamespace(samples_per_prompt=1, step=1), _step_end_batch(tasks, outcomes, [0.0] * 6), {})
    for t in ("toy-a", "toy-b"):
        assert domain.scheduler.recent[t] == [o for o, task in zip(outcomes, tasks) if task["_domain"] == t
                                              and o is not None]


def test_task_stops_end_each_tasks_responses_at_its_own_stop_strings(tiny_model_dir, tmp_path, monkeypatch):
    """tasks.task_stops: a training prompt's responses end at its own task's stop strings (those its held-out eval
    uses: generation.stop when set, else the domain's own), not at one list for every task."""
    import densecode.rl.trainer as trainer_module

    from densecode.domains.codeio.domain import CodeioDomain
    from densecode.domains.commitmsg import CommitmsgDomain

    domain = build_domain(load_config(None, ["domain=multi", "tasks.tasks=[codeio,commitmsg]", "tasks.task_stops=true",
                                             "generation.stop=[]"]))
    prompts, tasks = domain.train_batch(6, seed=0)
    want = {"codeio": CodeioDomain.stop, "commitmsg": CommitmsgDomain.stop}
    assert domain.prompt_stops(tasks) == [want[t["_domain"]] for t in tasks]
    assert {t["_domain"] for t in tasks} == {"codeio", "commitmsg"}
    shared = build_domain(load_config(None, ["domain=multi", "tasks.tasks=[codeio,commitmsg]", "tasks.task_stops=true",
                                             "generation.stop=[END]"]))
    assert shared.prompt_stops(tasks) == [["END"]] * len(tasks)  # generation.stop set: what every task's eval uses
    assert build_domain(load_config(None, ["domain=multi", "tasks.tasks=[codeio,commitmsg]"])).prompt_stops(tasks) is None

    # In training: the trainer hands each prompt's list to the sampler, and toy-b's responses end at its " ".
    monkeypatch.setattr(toy_domains.ToyB, "stop", [" "])
    seen = []
    real = trainer_module.sample_responses

    def spy(model, tokenizer, prompts, **kwargs):
        seen.append((list(prompts), kwargs.get("prompt_stops")))
        return real(model, tokenizer, prompts, **kwargs)

    monkeypatch.setattr(trainer_module, "sample_responses", spy)
    run = tmp_path / "run"
    assert _train(tiny_model_dir, run, "--steps", "1", "--set", "tasks.task_stops=true", "--set", "generation.stop=[]",
                  "--set", "train.rollouts_every=1", "--set", "train.eval_every=0", "--set", "tasks.schedule=joint") == 0
    (prompts, stops), = seen
    assert stops == [[" "] if p.startswith("say y") else [] for p in prompts] and [" "] in stops and [] in stops
    rows = [json.loads(line) for line in (run / "rollouts.jsonl").read_text().splitlines()]
    assert {r["task"]["_domain"] for r in rows} == {"toy-a", "toy-b"}
    assert all(" " not in r["response"] for r in rows if r["task"]["_domain"] == "toy-b")
