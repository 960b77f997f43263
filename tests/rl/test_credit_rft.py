"""Critic-free outcome credit (densecode/rl/credit.py), RFT (densecode/rl/rft.py), early stop on approx_kl."""

from __future__ import annotations


import numpy as np
import pytest
import torch

from densecode.config import load_config
from densecode.errors import DensecodeError
from densecode.models import load_model_and_tokenizer
from densecode.rewards import ComponentOutput, RewardBatch
from densecode.rl.credit import (
    leave_one_out_baseline,
    no_signal_share,
    outcome_advantages,
    reward_to_go,
)
from densecode.rl.grpo import GRPOAlgorithm
from densecode.rl.ppo import PPOAlgorithm
from densecode.rl.rft import RFTAlgorithm, keep_mask, rft_loss
from densecode.rl.trainer import Trainer

from tests.helpers import TARGET, TargetTokenTask


def test_leave_one_out_baseline_by_prompt_and_by_batch():
    r = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 1.0])
    groups = torch.tensor([0, 0, 0, 1, 1, 1])
    b = leave_one_out_baseline(r, groups)
    assert torch.allclose(b, torch.tensor([0.0, 0.5, 0.5, 1.0, 1.0, 1.0]))
    # One response per prompt: the other responses of the batch are the baseline.
    b1 = leave_one_out_baseline(torch.tensor([1.0, 0.0, 0.5]), torch.tensor([0, 1, 2]))
    assert torch.allclose(b1, torch.tensor([0.25, 0.75, 0.5]))
    assert leave_one_out_baseline(torch.tensor([1.0]), torch.tensor([0])).tolist() == [0.0]


def test_outcome_advantages_zero_for_agreeing_groups_and_same_on_every_token():
    mask = torch.ones(4, 3)
    mask[1, 2] = 0
    adv, st = outcome_advantages(torch.tensor([1.0, 0.0, 1.0, 1.0]), torch.tensor([0, 0, 1, 1]), mask)
    assert torch.all(adv[2:] == 0)  # group 1 all pass: no signal
    assert adv[0, 0] > 0 and adv[1, 0] < 0
    assert torch.allclose(adv[0], adv[0, :1].expand(3))  # the outcome term is on every token alike
    assert adv[1, 2] == 0  # padding
    assert st["all_pass_prompts"] == 0.5 and st["all_fail_prompts"] == 0.0


def test_outcome_credit_is_length_neutral():
    """Padding a response with neutral tokens (no KL) changes none of its tokens' advantages, and a longer
    response with the same outcome gets the same per-token credit (no length bonus)."""
    outcomes, groups = torch.tensor([1.0, 0.0]), torch.tensor([0, 0])
    short = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 0]], dtype=torch.float32)
    long = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]], dtype=torch.float32)
    a_short, _ = outcome_advantages(outcomes, groups, short)
    a_long, _ = outcome_advantages(outcomes, groups, long)
    assert torch.allclose(a_long[0, :2], a_short[0, :2])
    assert torch.allclose(a_long[1], a_short[1])
    assert torch.allclose(a_long[0, 2:], a_short[0, :1].expand(2))


def test_kl_enters_as_its_return_to_go():
    mask = torch.ones(2, 3)
    kl = torch.tensor([[-0.1, -0.2, -0.3], [0.0, 0.0, 0.0]])
    assert torch.allclose(reward_to_go(kl, mask)[0], torch.tensor([-0.6, -0.5, -0.3]))
    adv, st = outcome_advantages(torch.tensor([1.0, 0.0]), torch.tensor([0, 0]), mask, kl_rewards=kl,
                                 whiten=False)
    assert torch.allclose(adv[0], torch.tensor([0.4, 0.5, 0.7]))
    assert torch.allclose(adv[1], torch.tensor([-1.0, -1.0, -1.0]))


def test_no_signal_share():
    r = torch.tensor([1.0, 1.0, 0.0, 0.0, 1.0, 0.0])
    assert no_signal_share(r, torch.tensor([0, 0, 1, 1, 2, 2])) == (pytest.approx(1 / 3), pytest.approx(1 / 3))


def test_rft_keeps_only_passing_responses_and_their_gradient():
    keep = keep_mask(torch.tensor([1.0, 0.5, 0.0]), 1.0)
    assert keep.tolist() == [1.0, 0.0, 0.0]
    logp = torch.tensor([[-1.0, -2.0], [-3.0, -4.0], [-5.0, -6.0]], requires_grad=True)
    mask = torch.ones(3, 2)
    loss = rft_loss(logp, keep, mask)
    assert loss.item() == pytest.approx(1.5)
    loss.backward()
    assert torch.all(logp.grad[1:] == 0) and torch.all(logp.grad[0] != 0)
    assert rft_loss(logp.detach(), torch.zeros(3), mask).item() == 0.0


# ------------------------------------------------------------------ end to end on the tiny test model


class OutcomeReward:
    """The outcome: 1 when at least half of the response's tokens are targets (its ComponentOutput.outcome)."""

    def __init__(self, beta=0.0, graded=False):
        self.weights = {"kl": beta}
        self.graded = graded  # outcome = the share of target tokens (every group has a spread)

    def set_weight(self, name, value):
        self.weights[name] = value

    def __call__(self, samples):
        outs, totals, kls = [], [], []
        for s in samples:
            frac = float(np.mean([t < TARGET for t in s.token_ids])) if len(s.token_ids) else 0.0
            outcome = frac if self.graded else float(frac >= 0.5)
            kl = -self.weights["kl"] * (s.logprobs - s.ref_logprobs)
            values = np.zeros(len(s.token_ids), dtype=np.float32)
            if len(values):
                values[-1] = outcome
            outs.append(ComponentOutput(values, outcome=outcome))
            totals.append(values + kl)
            kls.append(kl.astype(np.float32))
        return RewardBatch(totals, {"task": [o.values for o in outs], "kl": kls}, {}, {"task": outs}, {},
                           weights=dict(self.weights))


def _cfg(model_dir, tmp_path, *extra):
    return load_config(None, [
        f"model.name_or_path={model_dir}", "model.value_model=shared", "reward.weights={task: 1.0, kl: 0.0}",
        "reward.code_regions=completion",
        "generation.max_new_tokens=6", "generation.top_p=1.0", "generation.batch_size=32", "train.batch_size=8",
        "train.lr=3e-3", "algo.num_minibatches=2", "train.eval_every=0", "train.save_every=0",
        f"train.output_dir={tmp_path}", *extra,
    ])


def _trainer(cfg, run_dir, algo, reward=None):
    torch.manual_seed(0)
    model, tok = load_model_and_tokenizer(cfg.model, None, device="cpu", for_training=True)
    return Trainer(cfg, model=model, tokenizer=tok, task_source=TargetTokenTask(), reward_fn=reward or OutcomeReward(),
                   algo=algo, run_dir=run_dir, progress=False)


@pytest.mark.parametrize("algo_name", ["rft", "ppo-outcome"])
def test_outcome_learners_learn_target_tokens(tiny_model_dir, tmp_path, algo_name):
    if algo_name == "rft":
        cfg = _cfg(tiny_model_dir, tmp_path, "algo.name=rft", "algo.rft.samples_per_prompt=4")
        algo = RFTAlgorithm.from_config(cfg.algo, cfg.generation)
    else:
        cfg = _cfg(tiny_model_dir, tmp_path, "algo.ppo.credit=outcome", "algo.ppo.samples_per_prompt=4",
                   "algo.ppo.epochs=2")
        algo = PPOAlgorithm.from_config(cfg.algo, cfg.generation)
        assert not algo.needs_value_head
    tr = _trainer(cfg, tmp_path, algo)
    assert tr.unwrapped.critic is None and tr.unwrapped.value_head is None
    before = tr.evaluate(0)["eval/target_frac"]
    logs = [tr.train_step(s) for s in range(25)]
    after = tr.evaluate(25)["eval/target_frac"]
    assert after > before + 0.3, (before, after)
    last = logs[-1]
    assert last["rollout/task_success"] >= logs[0]["rollout/task_success"]
    for key in ("rollout/outcome_mean", "rollout/no_signal_prompts", "train/approx_kl", "train/minibatches_done"):
        assert key in last


def test_early_stop_on_approx_kl(tiny_model_dir, tmp_path):
    cfg = _cfg(tiny_model_dir, tmp_path, "algo.ppo.credit=outcome", "algo.ppo.samples_per_prompt=4",
               "algo.ppo.epochs=4", "algo.early_stop_kl=1e-6", "train.lr=1e-2")
    tr = _trainer(cfg, tmp_path, PPOAlgorithm.from_config(cfg.algo, cfg.generation), OutcomeReward(graded=True))
    st = tr.train_step(0)
    assert st["train/early_stopped"] == 1.0
    assert 1 <= st["train/minibatches_done"] < 8
    cfg_off = _cfg(tiny_model_dir, tmp_path / "off", "algo.ppo.credit=outcome", "algo.ppo.samples_per_prompt=4",
                   "algo.ppo.epochs=4")
    st_off = _trainer(cfg_off, tmp_path / "off", PPOAlgorithm.from_config(cfg_off.algo, cfg_off.generation),
                      OutcomeReward(graded=True)).train_step(0)
    assert st_off["train/early_stopped"] == 0.0 and st_off["train/minibatches_done"] == 8


def test_bad_credit_and_rft_settings_are_config_errors(tmp_path):
    from densecode.training import build_algorithm
    from densecode.errors import ConfigError

    with pytest.raises(ConfigError):
        load_config(None, ["algo.ppo.credit=outcomes"])
    with pytest.raises(DensecodeError, match="samples_per_prompt"):
        build_algorithm(load_config(None, ["algo.name=rft", "algo.rft.samples_per_prompt=0"]))
    with pytest.raises(DensecodeError, match="samples_per_prompt"):
        build_algorithm(load_config(None, ["algo.ppo.samples_per_prompt=0"]))


# ------------------------------------------------------------------ summary.md diagnostics


def test_diagnose_names_the_known_failure_patterns():
    from densecode.rl.report import diagnose

    flat = [{"step": s, "ppo/clipfrac": 0.0, "train/approx_kl": 1e-6, "objective/kl": 0.05 + 0.01 * s,
             "rollout/task_success": 0.33, "rollout/outcome_mean": 0.33 - 0.002 * s,
             "reward/sequence_mean": 0.2 - 0.002 * s, "reward/kl_share": 0.1} for s in range(40)]
    text = " ".join(diagnose(flat))
    for pattern in ("updates too small", "drift", "task reward falling", "reward falling"):
        assert pattern in text
    learning = [{"step": s, "ppo/clipfrac": 0.05, "train/approx_kl": 0.01, "objective/kl": 0.05 + 0.01 * s,
                 "rollout/task_success": 0.3 + 0.005 * s, "rollout/outcome_mean": 0.3 + 0.005 * s,
                 "reward/sequence_mean": 0.2 + 0.003 * s} for s in range(40)]
    assert diagnose(learning) == []


def test_summary_reports_before_after_with_a_paired_interval(tmp_path):
    import json

    from densecode.rl.report import paired_interval, write_summary

    mean, lo, hi = paired_interval([0.0, 0.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0])
    assert mean == pytest.approx(0.5) and lo < 0.5 < hi
    rows = [{"step": 0, "pass": "greedy", "values": [0.0] * 50 + [1.0] * 50},
            {"step": 40, "pass": "greedy", "values": [1.0] * 80 + [0.0] * 20}]
    (tmp_path / "eval_tasks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "metrics.jsonl").write_text(json.dumps({"kind": "train", "step": 1, "ppo/clipfrac": 0.0,
                                                        "train/approx_kl": 0.0}) + "\n")
    text = write_summary(tmp_path).read_text()
    assert "| greedy | 0.500 | 0.800 | +0.300 [" in text
    assert "## Diagnostics" in text and "updates too small" in text


def test_summary_adds_task_success_where_the_headline_metric_is_not_success(tmp_path):
    """testgen's per-task metric is coverage: summary.md reports it and the outcome's success beside it."""
    import json

    from densecode.rl.report import eval_task_rows, write_summary

    outcomes = {0: ["success"] * 2 + ["failing_assert"] * 2, 40: ["success"] * 3 + ["incomplete"]}
    rows = [{"step": 0, "pass": "greedy", "metric": "coverage", "values": [0.5] * 4, "outcomes": outcomes[0]},
            {"step": 40, "pass": "greedy", "metric": "coverage", "values": [0.9] * 4, "outcomes": outcomes[40]}]
    (tmp_path / "eval_tasks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "metrics.jsonl").write_text(json.dumps({"kind": "train", "step": 1}) + "\n")
    assert eval_task_rows(tmp_path, values="success")[(40, "greedy")] == [1.0, 1.0, 1.0, 0.0]
    text = write_summary(tmp_path).read_text()
    assert "| greedy coverage | 0.500 | 0.900 | +0.400 [" in text
    assert "| greedy success | 0.500 | 0.750 | +0.250 [" in text


def test_freeze_embeddings_leaves_the_embeddings_out_of_the_update(tiny_model_dir):
    from densecode.config import ModelConfig

    model, _ = load_model_and_tokenizer(ModelConfig(name_or_path=str(tiny_model_dir), freeze_embeddings=True),
                                        None, device="cpu", for_training=True)
    assert not model.get_input_embeddings().weight.requires_grad
    assert not model.get_output_embeddings().weight.requires_grad
    assert any(p.requires_grad for p in model.parameters())


def test_negative_scale_weighs_below_baseline_responses():
    mask = torch.ones(2, 2)
    out, groups = torch.tensor([1.0, 0.0]), torch.tensor([0, 0])
    plain, _ = outcome_advantages(out, groups, mask, whiten=False)
    half, _ = outcome_advantages(out, groups, mask, whiten=False, negative_scale=0.5)
    none, _ = outcome_advantages(out, groups, mask, whiten=False, negative_scale=0.0)
    assert torch.allclose(plain[1], torch.tensor([-1.0, -1.0])) and torch.allclose(half[1], torch.tensor([-0.5, -0.5]))
    assert torch.all(none[1] == 0) and torch.allclose(none[0], plain[0])


# ------------------------------------------------------------------ no-signal minibatches, stop-string tokens


class SwitchableOutcome(OutcomeReward):
    """Graded outcomes (a signal) until `constant` is set; then every response scores the same (no signal)."""

    constant = False

    def __call__(self, samples):
        out = super().__call__(samples)
        if self.constant:
            for o, total in zip(out.outputs["task"], out.total):
                o.outcome = 1.0
                total[:] = 0.0
        return out


def test_a_minibatch_without_gradient_takes_no_optimizer_step(tiny_model_dir, tmp_path):
    """Adam's moments would keep moving the weights along the last signal's direction on a minibatch whose
    advantages are all 0 (every group agrees): the trainer must leave the weights alone there."""
    cfg = _cfg(tiny_model_dir, tmp_path, "algo.ppo.credit=outcome", "algo.ppo.samples_per_prompt=4",
               "algo.ppo.epochs=1", "algo.skip_zero_gradient=true")
    reward = SwitchableOutcome(graded=True)
    tr = _trainer(cfg, tmp_path, PPOAlgorithm.from_config(cfg.algo, cfg.generation), reward)
    first = tr.train_step(0)
    assert first["train/minibatches_done"] == 2 and first["train/zero_gradient_minibatches"] == 0
    reward.constant = True
    before = {k: v.clone() for k, v in tr.unwrapped.policy.state_dict().items()}
    st = tr.train_step(1)
    assert st["train/zero_gradient_minibatches"] == 2 and st["train/minibatches_done"] == 0
    after = tr.unwrapped.policy.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    # off (torch's Adam, TRL, CleanRL): the same minibatches are counted, and the step still moves the weights
    cfg_off = _cfg(tiny_model_dir, tmp_path / "off", "algo.ppo.credit=outcome", "algo.ppo.samples_per_prompt=4",
                   "algo.ppo.epochs=1")
    reward_off = SwitchableOutcome(graded=True)
    tr_off = _trainer(cfg_off, tmp_path / "off", PPOAlgorithm.from_config(cfg_off.algo, cfg_off.generation), reward_off)
    tr_off.train_step(0)
    reward_off.constant = True
    before = {k: v.clone() for k, v in tr_off.unwrapped.policy.state_dict().items()}
    st_off = tr_off.train_step(1)
    assert st_off["train/zero_gradient_minibatches"] == 2 and st_off["train/minibatches_done"] == 2
    assert not all(torch.equal(before[k], v) for k, v in tr_off.unwrapped.policy.state_dict().items())


def test_stop_string_tokens_are_trained_as_the_end_action_when_asked(tiny_model_dir, tmp_path):
    stops = "generation.stop=[\"e\", \"a\", \"o\", \"t\", \" \"]"  # the random tiny model hits one within 6 tokens
    for train_stop in (False, True):
        run = tmp_path / str(train_stop)
        cfg = _cfg(tiny_model_dir, run, "algo.ppo.credit=outcome", "algo.ppo.samples_per_prompt=4", stops,
                   f"generation.train_stop_tokens={str(train_stop).lower()}")
        tr = _trainer(cfg, run, PPOAlgorithm.from_config(cfg.algo, cfg.generation))
        batch, _ = tr.rollout(0)
        tr.compute_rewards(batch)
        stopped = [i for i, r in enumerate(batch.responses) if r.finish_reason == "stop" and r.stop_ids]
        assert stopped, "the test needs responses cut at a stop string"
        for i in stopped:
            r, s = batch.responses[i], batch.samples[i]
            n = len(r.token_ids)
            assert batch.response_mask[i].sum() == n  # every token the update sees, the stop tokens included
            if train_stop:
                assert r.end_tokens == len(r.stop_ids) and r.token_ids[-r.end_tokens:] == r.stop_ids
                assert list(s.token_ids) == r.token_ids[:-r.end_tokens]  # the rewards judge the cut response
                assert batch.rewards[i, n - r.end_tokens:].abs().sum() == 0
                assert torch.isfinite(batch.logprobs[i, :n]).all() and (batch.logprobs[i, :n] < 0).all()
            else:
                assert r.end_tokens == 0 and list(s.token_ids) == r.token_ids


GRPO_NEG0 = ["algo.name=grpo", "algo.grpo.group_size=4", "algo.grpo.negative_scale=0", "algo.grpo.num_iterations=2",
             "algo.grpo.truncation_masking=none"]


@pytest.mark.parametrize("algo_name", ["ppo-neg0", "rft", "ppo-grad-accum", "grpo-neg0", "grpo-sequence"])
def test_skipping_zero_advantage_rows_takes_the_same_update(tiny_model_dir, tmp_path, algo_name):
    """algo.skip_zero_advantage_rows runs forward/backward only on rows with a nonzero advantage and rescales
    the loss: the weights after two steps match the full update's (float rounding aside), on fewer rows."""
    extra = {"ppo-neg0": ["algo.ppo.credit=outcome", "algo.ppo.samples_per_prompt=4", "algo.ppo.negative_scale=0",
                          "algo.ppo.epochs=2"],
             "ppo-grad-accum": ["algo.ppo.credit=outcome", "algo.ppo.samples_per_prompt=4",
                                "algo.ppo.negative_scale=0", "algo.grad_accum_steps=2"],
             "rft": ["algo.name=rft", "algo.rft.samples_per_prompt=4"],
             "grpo-neg0": GRPO_NEG0,
             "grpo-sequence": [*GRPO_NEG0, "algo.grpo.loss_aggregation=sequence"]}[algo_name]
    algo_class = {"rft": RFTAlgorithm, "grpo-neg0": GRPOAlgorithm, "grpo-sequence": GRPOAlgorithm}.get(algo_name,
                                                                                                        PPOAlgorithm)
    weights, rows_frac = [], []
    for skip in (False, True):
        run = tmp_path / str(skip)
        cfg = _cfg(tiny_model_dir, run, *extra, f"algo.skip_zero_advantage_rows={str(skip).lower()}")
        tr = _trainer(cfg, run, algo_class.from_config(cfg.algo, cfg.generation))
        start = {k: v.clone() for k, v in tr.unwrapped.policy.state_dict().items()}
        logs = [tr.train_step(s) for s in range(2)]
        rows_frac.append([lg.get("train/update_rows_frac") for lg in logs])
        weights.append({k: v.clone() for k, v in tr.unwrapped.policy.state_dict().items()})
    assert rows_frac[0] == [None, None] and 0.0 < np.mean(rows_frac[1]) < 1.0, rows_frac  # only logged when on
    assert any(not torch.equal(start[k], v) for k, v in weights[1].items())  # the runs did learn something
    for k in weights[0]:
        assert torch.allclose(weights[0][k], weights[1][k], atol=1e-6, rtol=1e-4), k


def test_grpo_negative_scale_weighs_the_below_mean_responses(tiny_model_dir, tmp_path):
    advantages = {}
    for scale in (1.0, 0.5, 0.0):
        run = tmp_path / str(scale)
        cfg = _cfg(tiny_model_dir, run, *GRPO_NEG0[:2], "algo.grpo.truncation_masking=none",
                   f"algo.grpo.negative_scale={scale}")
        tr = _trainer(cfg, run, GRPOAlgorithm.from_config(cfg.algo, cfg.generation), SwitchableOutcome(graded=True))
        batch, _ = tr.rollout(0)
        tr.compute_rewards(batch)
        tr.algo.compute_advantages(batch)
        advantages[scale] = batch.advantages[:, 0].clone()
    plain = advantages[1.0]
    assert (plain < 0).any() and (plain > 0).any(), "the test needs groups with a spread"
    for scale in (0.5, 0.0):
        expected = torch.where(plain < 0, plain * scale, plain)
        assert torch.allclose(advantages[scale], expected), scale


def test_skipping_zero_advantage_rows_keeps_rows_a_value_loss_needs(tiny_model_dir, tmp_path):
    cfg = _cfg(tiny_model_dir, tmp_path, "algo.ppo.credit=gae", "algo.skip_zero_advantage_rows=true")
    tr = _trainer(cfg, tmp_path, PPOAlgorithm.from_config(cfg.algo, cfg.generation))
    assert tr.train_step(0)["train/update_rows_frac"] == 1.0


def test_skipping_zero_advantage_rows_on_a_step_without_signal_still_takes_adams_step(tiny_model_dir, tmp_path):
    """A minibatch with no signal row runs nothing, and its gradient is set to exactly 0: with skip_zero_gradient
    off, Adam's moments still move the weights as they do when every row runs."""
    weights = []
    for skip in (False, True):
        run = tmp_path / str(skip)
        cfg = _cfg(tiny_model_dir, run, "algo.ppo.credit=outcome", "algo.ppo.samples_per_prompt=4",
                   "algo.ppo.negative_scale=0", "algo.ppo.epochs=1",
                   f"algo.skip_zero_advantage_rows={str(skip).lower()}")
        reward = SwitchableOutcome(graded=True)
        tr = _trainer(cfg, run, PPOAlgorithm.from_config(cfg.algo, cfg.generation), reward)
        tr.train_step(0)
        reward.constant = True
        before = {k: v.clone() for k, v in tr.unwrapped.policy.state_dict().items()}
        st = tr.train_step(1)
        assert st["train/zero_gradient_minibatches"] == 2 and st["train/minibatches_done"] == 2
        assert st.get("train/update_rows_frac", 0.0) == 0.0  # no row ran (logged only with the flag on)
        weights.append(tr.unwrapped.policy.state_dict())
        assert any(not torch.equal(before[k], v) for k, v in weights[-1].items())
    for k in weights[0]:
        assert torch.allclose(weights[0][k], weights[1][k], atol=1e-6, rtol=1e-4), k

