"""Pure GRPO pieces: group advantages, truncation masking, repetition, diversity, temperature, loss."""

import itertools
import math

import pytest
import torch

from densecode.config import GRPOConfig
from densecode.rl.diversity import (
    distinct_ngram_ratio,
    edit_distance,
    pairwise_edit_distance,
    rollout_diversity,
)
from densecode.rl.grpo import (
    aggregate,
    dense_token_term,
    group_advantages,
    grpo_policy_loss,
    is_repetitive,
    judged_incorrect,
    truncation_mask,
)
from densecode.rl.temperature import TemperatureController

# ------------------------------------------------------------------ group advantages


def test_group_advantages_hand_computed():
    rewards = torch.tensor([1.0, 0.0, 0.0, 1.0, 2.0, 2.0, 2.0, 2.0, 0.0, 3.0, 0.0, 3.0])
    out = group_advantages(rewards, group_size=4, eps=1e-6)
    # group 0: mean 0.5, std 0.5 -> ±1
    assert torch.allclose(out.advantages[:4], torch.tensor([1.0, -1.0, -1.0, 1.0]), atol=1e-5)
    # group 1: no spread -> exactly zero, counted
    assert torch.equal(out.advantages[4:8], torch.zeros(4))
    # group 2: mean 1.5, std 1.5 -> ±1
    assert torch.allclose(out.advantages[8:], torch.tensor([-1.0, 1.0, -1.0, 1.0]), atol=1e-5)
    assert out.zero_std_groups == 1
    assert out.zero_std.tolist() == [False, True, False]
    assert torch.allclose(out.group_mean, torch.tensor([0.5, 2.0, 1.5]))


def test_group_advantages_uneven_values_and_bad_shape():
    out = group_advantages(torch.tensor([3.0, 1.0, 2.0]), group_size=3, eps=0.0)
    std = math.sqrt(2 / 3)
    assert torch.allclose(out.advantages, torch.tensor([1 / std, -1 / std, 0.0]), atol=1e-5)
    with pytest.raises(ValueError, match="groups of 4"):
        group_advantages(torch.zeros(6), group_size=4)


# ------------------------------------------------------------------ repetition


def test_repetition_paper_case_period_equals_window():
    body = list(range(100, 108))  # 8 distinct tokens
    assert is_repetitive(list(range(50)) + body + body, window=8)
    assert not is_repetitive(list(range(50)) + body + list(range(200, 208)), window=8)


def test_repetition_paper_test_is_last_m_equal_to_the_m_before():
    block = list(range(100, 128))  # m = 28 distinct tokens
    assert is_repetitive([1, 2, 3] + block + block, window=28)  # default test: paper
    assert not is_repetitive(block + block[:-1] + [0], window=28)  # one token differs
    assert not is_repetitive(block + block, window=29)  # shorter than 2m is never repetitive
    assert not is_repetitive(block, window=28)
    assert not is_repetitive([], window=128) and not is_repetitive([5, 5], window=0)


def test_repetition_paper_misses_what_any_period_catches():
    loop = [7, 8, 9] * 100  # period 3; 128 % 3 != 0, the literal m-vs-m test misses it
    assert not is_repetitive(list(range(20)) + loop, window=128, test="paper")
    assert is_repetitive(list(range(20)) + loop, window=128, test="any_period")
    assert not is_repetitive(list(range(300)), window=128, test="any_period")
    with pytest.raises(ValueError, match="repetition_test"):
        is_repetitive([1, 1], window=1, test="broad")


def test_repetition_any_period_short_responses():
    rep = lambda ids, w: is_repetitive(ids, window=w, test="any_period")
    assert not rep([], 128) and not rep([5], 128)
    assert rep([1, 2, 1, 2], 128)  # w = 2
    assert not rep([1, 2, 3, 4, 5, 6], 128)
    # a loop that stopped: the tail is new, so not repetitive
    assert not rep([1, 2] * 20 + list(range(10, 30)), 10)


# ------------------------------------------------------------------ truncation masking


@pytest.mark.parametrize("truncated,incorrect,repetitive,draw_below", list(itertools.product([False, True], repeat=4)))
def test_conditional_masking_all_16_cases(truncated, incorrect, repetitive, draw_below):
    rho = 0.3
    u = 0.1 if draw_below else 0.9
    t = truncation_mask(
        torch.tensor([truncated]), torch.tensor([incorrect]), torch.tensor([repetitive]), torch.tensor([u]),
        mode="conditional", rho=rho,
    )
    expected = truncated and not incorrect and not repetitive and draw_below
    assert bool(t.masked[0]) is expected
    assert t.counts["masked"] == int(expected)
    # the other rules on the same sample
    assert bool(truncation_mask(torch.tensor([truncated]), torch.tensor([incorrect]), torch.tensor([repetitive]),
                                torch.tensor([u]), mode="all").masked[0]) is truncated
    assert not bool(truncation_mask(torch.tensor([truncated]), torch.tensor([incorrect]), torch.tensor([repetitive]),
                                    torch.tensor([u]), mode="none").masked[0])


def test_masking_counts_and_rho_boundary():
    truncated = torch.tensor([True, True, True, True, False])
    incorrect = torch.tensor([False, True, False, False, False])
    repetitive = torch.tensor([False, False, True, False, False])
    uniform = torch.tensor([0.29, 0.0, 0.0, 0.3, 0.0])  # u < rho is strict
    t = truncation_mask(truncated, incorrect, repetitive, uniform, mode="conditional", rho=0.3)
    assert t.masked.tolist() == [True, False, False, False, False]
    assert t.counts == {
        "truncated": 4, "truncated_incorrect": 1, "truncated_repetitive": 1, "eligible": 2,
        "masked_conditional": 1, "masked_all": 4, "masked": 1,
    }
    with pytest.raises(ValueError, match="truncation_masking"):
        truncation_mask(truncated, incorrect, repetitive, uniform, mode="some")


def test_judged_incorrect_reads_the_typed_verdict():
    import numpy as np

    from densecode.rewards.base import ComponentOutput

    def out(**verdict):
        return ComponentOutput(np.zeros(1), [], {"judged_incorrect": 1.0, "syntax_ok": 0.0}, **verdict)

    assert not judged_incorrect({})
    assert not judged_incorrect({"lint": out(), "kl": out(kl=0.3)})  # no verdict (the info keys are logs only)
    assert judged_incorrect({"sim": out(incorrect=True), "lint": out()})
    assert not judged_incorrect({"syntax": out(incorrect=False, parsed=True), "tests": out(incorrect=False)})


def test_the_sim_backends_verdict():
    from densecode.simulators.backend import feedback
    from densecode.simulators.runner import RunResult

    def runs(*outcomes):
        return [RunResult(outcome=o) for o in outcomes]

    ok = feedback(runs("success", "success"))
    assert (ok.outcome, ok.incorrect, ok.ran_cleanly, ok.judged) == (1.0, False, True, True)
    assert feedback(runs("success", "timeout")).incorrect is False  # a timeout alone is no verdict
    assert feedback(runs("success", "robot_error")).incorrect and not feedback(runs("robot_error")).ran_cleanly
    assert feedback(runs("python_error")).ran_cleanly is False
    checks_failed = feedback(runs("success", "check_failure"))  # a clean run that failed the task's checks
    assert checks_failed.incorrect and checks_failed.ran_cleanly and checks_failed.outcome == 0.5
    assert feedback(runs("simulator_error")).judged is False


# ------------------------------------------------------------------ loss


def test_clip_higher_bounds():
    # one token per response; old logprob 0, so ratio = exp(logprob)
    ratios = torch.tensor([0.5, 0.9, 1.1, 1.25, 1.5, 0.5, 1.5])
    adv = torch.tensor([1.0, 1.0, 1.0, 1.0, 1.0, -1.0, -1.0])
    logprobs = ratios.log()[:, None].requires_grad_(True)
    loss_tok = []
    for i in range(len(ratios)):
        loss, _ = grpo_policy_loss(logprobs[i : i + 1], torch.zeros(1, 1), adv[i : i + 1], torch.ones(1, 1),
                                   clip_eps_low=0.2, clip_eps_high=0.28)
        loss_tok.append(float(loss.detach()))
    # positive advantage: objective capped at ratio 1.28 (not 1.2), unclipped below
    # negative advantage: objective floored at ratio 0.8, unclipped above
    expected = [-0.5, -0.9, -1.1, -1.25, -1.28, 0.8, 1.5]
    assert loss_tok == pytest.approx(expected, abs=1e-5)
    loss, stats = grpo_policy_loss(logprobs, torch.zeros(7, 1), adv, torch.ones(7, 1))
    loss.backward()
    grads = logprobs.grad[:, 0]
    # clipped tokens (ratio 1.5 with A>0, ratio 0.5 with A<0) get no gradient; 1.25 < 1.28 still does
    assert grads[4] == 0 and grads[5] == 0
    assert grads[3] != 0 and grads[0] != 0 and grads[6] != 0
    assert stats["clipfrac"] == pytest.approx(2 / 7)
    assert stats["clipfrac_high"] == pytest.approx(1 / 7) and stats["clipfrac_low"] == pytest.approx(1 / 7)


def test_token_vs_sequence_aggregation_hand_computed():
    loss_tokens = torch.tensor([[1.0, 2.0, 3.0, 0.0], [10.0, 0.0, 0.0, 0.0]])
    mask = torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0]])
    assert float(aggregate(loss_tokens, mask, "token")) == pytest.approx((1 + 2 + 3 + 10) / 4)
    assert float(aggregate(loss_tokens, mask, "sequence")) == pytest.approx((2.0 + 10.0) / 2)
    # through the loss: ratio 1 everywhere, so pg_loss_t = -A_t
    adv = torch.tensor([[-1.0, -2.0, -3.0, 5.0], [-10.0, 5.0, 5.0, 5.0]])
    zeros = torch.zeros(2, 4)
    tok, _ = grpo_policy_loss(zeros, zeros, adv, mask, aggregation="token")
    seq, _ = grpo_policy_loss(zeros, zeros, adv, mask, aggregation="sequence")
    assert float(tok) == pytest.approx(4.0) and float(seq) == pytest.approx(6.0)
    with pytest.raises(ValueError, match="loss_aggregation"):
        aggregate(loss_tokens, mask, "batch")


def test_kl_term_only_when_coef_positive():
    logprobs = torch.tensor([[-1.0, -2.0]])
    ref = torch.tensor([[-1.5, -1.0]])
    adv = torch.zeros(1)
    mask = torch.ones(1, 2)
    loss0, stats0 = grpo_policy_loss(logprobs, logprobs, adv, mask, ref_logprobs=ref, kl_coef=0.0)
    assert float(loss0) == 0.0 and "kl_ref" not in stats0
    loss1, stats1 = grpo_policy_loss(logprobs, logprobs, adv, mask, ref_logprobs=ref, kl_coef=0.5)
    x = ref - logprobs
    k3 = (x.exp() - x - 1).mean()
    assert float(loss1) == pytest.approx(0.5 * float(k3)) and stats1["kl_ref"] == pytest.approx(float(k3))
    with pytest.raises(ValueError, match="ref_logprobs"):
        grpo_policy_loss(logprobs, logprobs, adv, mask, kl_coef=0.1)


# ------------------------------------------------------------------ dense term


def test_dense_token_term_group_normalised():
    # group of 2 responses, 3 tokens; one syntax-error token (-1), padding at the end of response 1
    c = torch.tensor([[0.0, -1.0, 0.0], [0.0, 0.0, 9.0]])
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]])
    d = dense_token_term(c, mask, group_size=2)
    vals = torch.tensor([0.0, -1.0, 0.0, 0.0, 0.0])
    mean, std = vals.mean(), vals.std(unbiased=False)
    assert d[0, 1] == pytest.approx(float((-1 - mean) / std), abs=1e-4)
    assert d[0, 0] == pytest.approx(float((0 - mean) / std), abs=1e-4)
    assert d[1, 2] == 0.0  # padding
    flat = torch.zeros(2, 3)
    assert torch.equal(dense_token_term(flat, mask, group_size=2), torch.zeros(2, 3))


# ------------------------------------------------------------------ diversity


def test_diversity_measures():
    assert distinct_ngram_ratio([[1, 2, 3, 4, 5], [6, 7, 8, 9]], n=4) == 1.0
    assert distinct_ngram_ratio([[1, 2, 3, 4, 5]] * 4, n=4) == pytest.approx(0.25)
    assert distinct_ngram_ratio([[1, 2]], n=4) is None
    assert edit_distance([1, 2, 3], [1, 2, 3]) == 0
    assert edit_distance([1, 2, 3], [1, 3]) == 1
    assert edit_distance([], [4, 5]) == 2
    assert edit_distance([1, 2, 3, 4, 5, 6], [2, 3, 9, 5, 6, 7]) == 3  # delete 1, sub 4->9, insert 7
    assert pairwise_edit_distance([[1, 2, 3], [1, 2, 3]]) == 0.0
    assert pairwise_edit_distance([[1, 2], [3, 4], [1, 2]]) == pytest.approx((1 + 0 + 1) / 3)
    d = rollout_diversity([[1, 2, 3, 4]] * 2 + [[1, 2, 3, 4], [5, 6, 7, 8]], group_size=2)
    assert d["distinct_4"] == pytest.approx((0.5 + 1.0) / 2)
    assert d["edit_distance"] == pytest.approx((0.0 + 1.0) / 2)


def test_edit_distance_matches_plain_dp():
    g = torch.Generator().manual_seed(0)

    def plain(a, b):
        d = [[i + j if i * j == 0 else 0 for j in range(len(b) + 1)] for i in range(len(a) + 1)]
        for i in range(1, len(a) + 1):
            for j in range(1, len(b) + 1):
                d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1]))
        return d[-1][-1]

    for _ in range(30):
        a = torch.randint(0, 4, (int(torch.randint(0, 12, (1,), generator=g)),), generator=g).tolist()
        b = torch.randint(0, 4, (int(torch.randint(0, 12, (1,), generator=g)),), generator=g).tolist()
        assert edit_distance(a, b) == plain(a, b)


# ------------------------------------------------------------------ temperature controller


def test_temperature_staged_never_ramps():
    ctl = TemperatureController(stages=[0.6, 1.2], switch_steps=[10], floor=0.0, window=3, min_slope=1.0)
    temps = []
    for step in range(15):
        temps.append(ctl.temperature_for_step(step))
        ctl.update(0.8)
    assert temps == [0.6] * 10 + [1.2] * 5


def test_temperature_raised_early_when_below_floor():
    ctl = TemperatureController(stages=[0.6, 1.2, 1.8], switch_steps=[100, 200], floor=0.4, window=3, min_slope=1.0)
    seq = [0.9, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3]
    temps = []
    for step, div in enumerate(seq):
        temps.append(ctl.temperature_for_step(step))
        ctl.update(div)
    # window [0.9,0.3,0.3] level 0.5 ok; [0.3,0.3,0.3] after step 3 -> raise; history cleared,
    # needs 3 new values (steps 4,5,6) -> raise again after step 6
    assert temps == [0.6, 0.6, 0.6, 0.6, 1.2, 1.2, 1.2, 1.8]
    assert "floor" in ctl.last_reason
    # never above the last stage, and a later scheduled switch does not step back
    assert ctl.temperature_for_step(150) == 1.8 and ctl.update(0.0) == 1.8


def test_temperature_raised_early_when_falling():
    ctl = TemperatureController(stages=[0.6, 1.2], switch_steps=[100], floor=0.1, window=4, min_slope=0.0,
                                min_drop=0.1)
    seq = [0.9, 0.9, 0.9, 0.9, 0.86, 0.82, 0.78, 0.74, 0.7, 0.66, 0.62]
    temps = []
    for step, div in enumerate(seq):
        temps.append(ctl.temperature_for_step(step))
        ctl.update(div)
    # baseline 0.9 (first full window); levels after steps 4..8: 0.89, 0.87, 0.84, 0.80, 0.76
    # (a drop of 0.1 is reached after step 8 -> step 9 samples at 1.2)
    assert temps == [0.6] * 9 + [1.2] * 2
    assert "falling" in ctl.last_reason and ctl.baseline is None


def test_temperature_falling_trend_without_real_drop_keeps_stage():
    ctl = TemperatureController(stages=[0.6, 1.2], switch_steps=[100], floor=0.1, window=4, min_slope=0.0,
                                min_drop=0.1)
    for step, div in enumerate([0.9, 0.9, 0.9, 0.9, 0.88, 0.87, 0.86, 0.85, 0.85, 0.84]):
        assert ctl.temperature_for_step(step) == 0.6  # negative trend, but only 0.05 below the baseline
        ctl.update(div)


def test_temperature_noisy_but_stable_diversity_keeps_stage():
    # distinct-4 on the embedded model at T=0.6 moves by about ±0.1 step to step
    ctl = TemperatureController.from_config({"switch_steps": [1000]})
    g = torch.Generator().manual_seed(0)
    noise = (torch.rand(200, generator=g) - 0.5) * 0.25
    for step in range(200):
        assert ctl.temperature_for_step(step) == 0.6, step
        ctl.update(0.45 + float(noise[step]))


def test_temperature_config_validation():
    ctl = TemperatureController.from_config({"switch_steps": [3]})
    assert ctl.stages == [0.6, 1.2] and ctl.temperature_for_step(3) == 1.2
    with pytest.raises(ValueError, match="unknown keys"):
        TemperatureController.from_config({"stage": [1.0]})
    with pytest.raises(ValueError, match="switch_steps"):
        TemperatureController.from_config({"stages": [0.6, 1.2, 1.8]})
    with pytest.raises(ValueError, match="must not decrease"):
        TemperatureController.from_config({"stages": [1.2, 0.6]})


def test_one_stage_schedule_is_fixed():
    assert TemperatureController.from_config({"stages": [0.9], "switch_steps": [60]}).switch_steps == []
    ctl = TemperatureController.from_config({"stages": [0.9]})
    for step in range(300):
        assert ctl.temperature_for_step(step) == 0.9
        ctl.update(0.0)


# ------------------------------------------------------------------ the strategy object on a fake batch


def _fake_sample(ids):
    """One response token per line ("t\\n" each), all code: every token before the last is on a finished line."""
    from types import SimpleNamespace

    import numpy as np

    spans = [(2 * k, 2 * k + 2) for k in range(len(ids))]
    return SimpleNamespace(response="t\n" * len(ids), token_spans=spans,
                           code_token_mask=lambda: np.ones(len(ids), dtype=bool))


def _fake_batch(seq_rewards, prompt_index, truncated, token_ids, syntax_values=None, syntax_ok=None, length=6,
                syntax_diagnostics=None):
    from types import SimpleNamespace

    import numpy as np

    n = len(seq_rewards)
    mask = torch.zeros(n, length)
    for i, ids in enumerate(token_ids):
        mask[i, : len(ids)] = 1
    from densecode.rewards.base import ComponentOutput, LocatedError

    outputs = {}
    if syntax_values is not None:
        diags = syntax_diagnostics or [[] for _ in syntax_values]
        outputs["syntax"] = [ComponentOutput(np.asarray(v, dtype=np.float32), d, {}, parsed=bool(ok), incorrect=not ok,
                                             errors=[LocatedError(tuple(x["tokens"])) for x in d])
                             for v, ok, d in zip(syntax_values, syntax_ok, diags)]
    return SimpleNamespace(
        response_mask=mask, prompt_index=torch.tensor(prompt_index), sequence_rewards=torch.tensor(seq_rewards),
        rewards=None, truncated=list(truncated), temperature=0.6,
        responses=[SimpleNamespace(token_ids=list(ids)) for ids in token_ids],
        samples=[_fake_sample(ids) for ids in token_ids],
        reward_outputs=SimpleNamespace(outputs=outputs, weights={"syntax": 0.1}),
        advantages=None, returns=None,
    )


def test_algorithm_groups_by_prompt_index_not_position():
    from densecode.rl.grpo import GRPOAlgorithm

    algo = GRPOAlgorithm(GRPOConfig(group_size=2, truncation_masking="none", sequence_reward="sum"))
    # rows interleaved: prompts 0,1,0,1
    batch = _fake_batch([1.0, 5.0, 0.0, 5.0], [0, 1, 0, 1], [False] * 4, [[1, 2], [3], [4, 5, 6], [7]])
    stats = algo.compute_advantages(batch)
    adv = batch.advantages
    assert adv[0, :2].tolist() == pytest.approx([1.0, 1.0], abs=1e-4) and adv[0, 2] == 0  # padding stays 0
    assert adv[2, :3].tolist() == pytest.approx([-1.0] * 3, abs=1e-4)
    assert torch.equal(adv[1], torch.zeros(6)) and torch.equal(adv[3], torch.zeros(6))
    assert stats["grpo/zero_std_groups"] == 1.0
    assert stats["grpo/temperature"] == 0.6 and "diversity/distinct_4" in stats
    with pytest.raises(ValueError, match="responses per prompt"):
        algo.compute_advantages(_fake_batch([1.0, 2.0, 3.0], [0, 0, 1], [False] * 3, [[1], [2], [3]]))


def test_algorithm_masks_only_truncated_not_incorrect():
    from densecode.rl.grpo import GRPOAlgorithm

    # rho = 1: every eligible sample is masked; the truncated-but-syntax-error one keeps its advantage
    algo = GRPOAlgorithm(GRPOConfig(group_size=4, truncation_masking="conditional", truncation_rho=1.0,
                                    sequence_reward="sum"))
    error_on_token_2 = {"rule": "syntax-error", "tokens": [2, 3], "value": -1.0, "message": "invalid syntax"}
    batch = _fake_batch(
        [1.0, 0.0, 0.0, 1.0], [0, 0, 0, 0], [True, True, False, False],
        [[1, 2, 3, 4, 5, 6], [9, 8, 7, 6, 5, 4], [1], [2]],
        syntax_values=[[1] * 6, [1, 1, -1, 0, 0, 0], [1], [1]], syntax_ok=[1, 0, 1, 1],
        syntax_diagnostics=[[], [error_on_token_2], [], []],
    )
    stats = algo.compute_advantages(batch)
    assert torch.equal(batch.advantages[0], torch.zeros(6))  # truncated, not judged incorrect: masked
    assert batch.advantages[1, 0] == pytest.approx(-1.0, abs=1e-4)  # truncated but syntax error: kept
    assert stats["grpo/masked"] == 1.0 and stats["grpo/truncated_incorrect"] == 1.0
    assert stats["grpo/truncated_incorrect_error_before_cut"] == 1.0


def test_algorithm_dense_term_marks_the_failing_token():
    from densecode.rl.grpo import GRPOAlgorithm

    syntax = [[1, 1, 1, 1], [1, -1, 0, 0]]
    kwargs = {"seq_rewards": [0.0, 0.0], "prompt_index": [0, 0], "truncated": [False, False],
              "token_ids": [[1, 2, 3, 4], [5, 6, 7, 8]], "syntax_values": syntax, "syntax_ok": [1, 0], "length": 4}
    plain = _fake_batch(**kwargs)
    GRPOAlgorithm(GRPOConfig(group_size=2, dense=False, sequence_reward="sum")).compute_advantages(plain)
    assert torch.equal(plain.advantages, torch.zeros(2, 4))  # equal rewards: plain GRPO learns nothing
    dense = _fake_batch(**kwargs)
    GRPOAlgorithm(GRPOConfig(group_size=2, dense=True, dense_scale=0.5,
                             sequence_reward="sum")).compute_advantages(dense)
    adv = dense.advantages
    assert adv[1, 1] == adv.min() and adv[1, 1] < 0  # the rejected token gets the lowest advantage
    assert (adv[0] > 0).all()


def test_sequence_reward_mean_is_length_neutral():
    from types import SimpleNamespace

    from densecode.rl.grpo import sequence_rewards

    # +1 on every token: the sum prefers the longer response, the mean does not
    mask = torch.tensor([[1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 0.0, 0.0]])
    batch = SimpleNamespace(rewards=torch.ones(2, 4) * mask, response_mask=mask, sequence_rewards=None)
    assert sequence_rewards(batch, "sum").tolist() == [4.0, 2.0]
    assert sequence_rewards(batch, "mean").tolist() == [1.0, 1.0]
    with pytest.raises(ValueError, match="sequence_reward"):
        sequence_rewards(batch, "max")


@pytest.mark.parametrize("name", ["robotics-microcoder", "codegen-microcoder", "code-grpo"])
def test_grpo_configs_build_microcoder(name):
    from densecode.training import build_algorithm
    from densecode.config import load_config

    cfg = load_config(name)
    algo = build_algorithm(cfg)
    assert algo.name == "grpo" and not algo.needs_value_head and not algo.needs_reference
    g = algo.cfg
    assert g is cfg.algo.grpo  # the config itself, no copy under other names
    assert (g.clip_eps, g.clip_eps_high, algo.kl_coef) == (0.2, 0.28, 0.0)
    assert g.truncation_masking == "conditional" and g.loss_aggregation == "token"
    assert g.sequence_reward == "outcome" and g.repetition_test == "paper" and algo.epochs == 4
    assert g.truncation_evidence == "cut_proof" and g.repetition_window == 64
    assert algo.sampling_temperature(0) == 0.6 and algo.samples_per_prompt == 8
    assert cfg.reward.weights["kl"] == 0.0


def test_algorithm_state_roundtrips_through_json():
    import json

    from densecode.rl.grpo import GRPOAlgorithm
    from densecode.rl.temperature import TemperatureController

    def make():
        ctl = TemperatureController(stages=[0.6, 1.2], switch_steps=[100], floor=0.5, window=3, min_slope=1.0)
        return GRPOAlgorithm(GRPOConfig(group_size=2), controller=ctl, seed=3)

    a = make()
    a.controller.update(0.9)
    a.controller.update(0.8)
    torch.rand(5, generator=a._generator)
    b = make()
    b.load_state_dict(json.loads(json.dumps(a.state_dict())))
    assert list(b.controller.history) == [0.9, 0.8] and b.controller.stage == 0
    assert torch.equal(torch.rand(4, generator=a._generator), torch.rand(4, generator=b._generator))


def test_bad_grpo_settings_are_clear_cli_errors(capsys, tiny_model_dir, tmp_path):
    from densecode.cli import main

    common = ["train", "--config", "robotics-microcoder", "--model", str(tiny_model_dir), "--no-progress",
              "--set", "train.num_threads=1"]  # robotics.yaml's 2 threads would stay set for later tests
    rc = main(common + ["--output-dir", str(tmp_path / "a"), "--set", "algo.grpo.temperature_schedule={stages: [1.2, 0.6]}"])
    assert rc == 2 and "must not decrease" in capsys.readouterr().err
    rc = main(common + ["--output-dir", str(tmp_path / "b"), "--set", "algo.grpo.group_size=1"])
    assert rc == 2 and "group_size must be >= 2" in capsys.readouterr().err


def test_each_algorithm_holds_its_config_and_redeclares_none_of_it(capsys):
    from dataclasses import fields

    from densecode.cli import main
    from densecode.config import PPOConfig, RFTConfig
    from densecode.errors import ConfigError
    from densecode.rl.grpo import GRPOAlgorithm
    from densecode.rl.ppo import PPOAlgorithm
    from densecode.rl.rft import RFTAlgorithm

    for algo_cls, cfg_cls in ((GRPOAlgorithm, GRPOConfig), (PPOAlgorithm, PPOConfig), (RFTAlgorithm, RFTConfig)):
        own = {f.name for f in fields(algo_cls)} - {"cfg"}
        assert own.isdisjoint(f.name for f in fields(cfg_cls)), algo_cls.__name__
    assert GRPOAlgorithm().cfg.repetition_window == 64  # one default, the shipped configs'
    # A choice outside its Literal is a config error naming the key: from Python ...
    with pytest.raises(ConfigError, match="'algo.grpo.truncation_masking' must be one of conditional, all, none"):
        GRPOAlgorithm(GRPOConfig(truncation_masking="al"))
    # ... and from the command line (exit 2, one line).
    assert main(["config", "--set", "algo.grpo.credit=outcome+dens"]) == 2
    err = capsys.readouterr().err
    assert "algo.grpo.credit" in err and "must be one of outcome, outcome+dense, outcome+local" in err
