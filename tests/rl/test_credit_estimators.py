"""Credit estimators outcome+dense (PRIME-style) and outcome+local (RLTF-style), densecode/rl/credit.py."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from densecode.config import PPOConfig, load_config
from densecode.errors import ConfigError
from densecode.rl.credit import (
    CREDITS,
    FINDINGS_SPREAD,
    dense_return_term,
    findings_token_rewards,
    local_term,
    outcome_advantages,
)
from densecode.rl.ppo import PPOAlgorithm


def _outputs(diags_per_sample, weights=None, name="sim"):
    """A RewardBatch-like object: one component whose samples carry these diagnostics."""
    outs = [SimpleNamespace(diagnostics=d, values=None, info={}) for d in diags_per_sample]
    return SimpleNamespace(outputs={name: outs}, weights=weights or {name: 1.0})


def _finding(first, last_plus_one, value):
    return {"rule": "x", "tokens": [first, last_plus_one], "value": value}


def test_findings_read_located_diagnostics_only_weighted_and_spread():
    rb = _outputs([[_finding(1, 3, -0.4), {"rule": "tests", "tokens": None, "value": 0.5}], []],
                  weights={"sim": 0.5})
    split = findings_token_rewards(rb, 2, 5, "split")["sim"]
    each = findings_token_rewards(rb, 2, 5, "each")["sim"]
    assert torch.allclose(split[0], torch.tensor([0.0, -0.1, -0.1, 0.0, 0.0]))  # 0.5 x -0.4 over 2 tokens
    assert torch.allclose(each[0], torch.tensor([0.0, -0.2, -0.2, 0.0, 0.0]))
    assert torch.all(split[1] == 0)  # the whole-response record (no token range) is not a finding
    kl = SimpleNamespace(outputs={"kl": [SimpleNamespace(diagnostics=[_finding(0, 1, -1.0)])]}, weights={"kl": 1.0})
    assert findings_token_rewards(kl, 1, 2) == {}
    with pytest.raises(ValueError, match="split or each"):
        findings_token_rewards(rb, 2, 5, "last")


def test_dense_term_blames_the_tokens_up_to_a_finding_against_the_others_baseline():
    mask = torch.ones(4, 4)
    groups = torch.tensor([0, 0, 0, 0])
    f = torch.zeros(4, 4)
    f[0, 2] = -1.0  # response 0 has a finding on its third token; the others are clean
    term, st = dense_return_term({"sim": f}, groups, mask)
    # Tokens 0..2 of response 0 carry the finding; token 3 (after it) and clean responses only -b.
    assert term[0, 0] == term[0, 2] and term[0, 2] < term[0, 3]
    assert term[0, 3] == 0  # its baseline (the others' total) is 0
    assert torch.allclose(term[1], term[1, :1].expand(4)) and term[1, 0] > 0  # beat a sibling's -1
    assert torch.allclose(term[0], torch.tensor([-1.0, -1.0, -1.0, 0.0]))  # b = 0
    assert torch.allclose(term[1], torch.full((4,), 1 / 3))  # b = the mean of -1, 0, 0
    assert st["dense_sim_sum_mean"] == -0.25
    # Every response with the same finding: the same credit for all (no contrast between responses); within
    # each, the finding's token is blamed relative to the tokens after it.
    same, _ = dense_return_term({"lint": torch.nn.functional.pad(torch.full((4, 1), -0.25), (0, 3))}, groups, mask)
    assert torch.allclose(same, torch.tensor([0.0, 0.25, 0.25, 0.25]).expand(4, 4))


def test_local_term_is_the_finding_on_its_tokens_only():
    mask = torch.ones(2, 4)
    f = torch.zeros(2, 4)
    f[0, 1] = -0.2
    f[0, 2] = -0.2
    f[1, 3] = -0.4
    term, st = local_term({"sim": f, "lint": torch.zeros(2, 4)}, mask)
    assert torch.allclose(term, f)
    assert st["local_tokens_share"] == pytest.approx(3 / 8)
    # In the advantage: β·ℓ_t/σ on the finding's tokens, nothing elsewhere.
    outcomes, groups = torch.tensor([1.0, 0.0]), torch.tensor([0, 0])
    plain, _ = outcome_advantages(outcomes, groups, mask)
    adv, _ = outcome_advantages(outcomes, groups, mask, credit="outcome+local", findings={"sim": f},
                                dense_scale=0.5)
    assert torch.allclose(adv - plain, 0.5 * f / 1.0, atol=1e-5)  # σ of (+1, -1) = 1


@pytest.mark.parametrize("credit", ["outcome", "outcome+dense", "outcome+local"])
def test_every_estimator_is_length_neutral(credit):
    """Appending tokens without findings (same outcome) leaves every original token's advantage unchanged, the
    appended tokens get what a finding-free token of the same response gets, and a longer finding-free response
    is not paid more per token than a shorter one with the same outcome."""
    outcomes, groups = torch.tensor([1.0, 0.0, 1.0, 0.0]), torch.tensor([0, 0, 0, 0])
    short = torch.tensor([[1, 1, 1, 0, 0, 0], [1, 1, 1, 1, 0, 0], [1, 1, 0, 0, 0, 0], [1, 1, 1, 0, 0, 0]],
                         dtype=torch.float32)
    long = short.clone()
    long[0, 3:] = 1  # response 0 padded by three neutral tokens
    long[3, 3:] = 1  # response 3 (which has a finding) too
    spread = FINDINGS_SPREAD.get(credit, "split")
    rb = _outputs([[], [_finding(1, 3, -0.5)], [], [_finding(0, 1, -0.3)]])
    f_short = findings_token_rewards(rb, 4, 6, spread)
    f_long = findings_token_rewards(rb, 4, 6, spread)
    a_s, _ = outcome_advantages(outcomes, groups, short, credit=credit, findings=f_short)
    a_l, _ = outcome_advantages(outcomes, groups, long, credit=credit, findings=f_long)
    for row in range(4):
        n = int(short[row].sum())
        assert torch.allclose(a_l[row, :n], a_s[row, :n]), (credit, row)
    # Padded tokens get the response's finding-free value (its last token's, which has no finding).
    assert torch.allclose(a_l[0, 3:], a_s[0, 2].expand(3))
    assert torch.allclose(a_l[3, 3:], a_s[3, 2].expand(3))
    # Responses 0 and 2: same outcome, no findings, lengths 3 and 2: the same advantage on every token.
    assert torch.allclose(a_s[0, :3], a_s[2, :1].expand(3))
    if credit == "outcome+local":  # nothing spread: the padding's token term is exactly 0
        plain, _ = outcome_advantages(outcomes, groups, long, credit="outcome")
        assert torch.allclose(a_l[0], plain[0]) and torch.allclose(a_l[3, 3:], plain[3, 3:])


def test_a_finding_never_raises_its_response_tokens_advantage():
    outcomes, groups = torch.tensor([0.0, 0.0]), torch.tensor([0, 0])
    mask = torch.ones(2, 4)
    clean = findings_token_rewards(_outputs([[], []]), 2, 4, "split")
    for credit in ("outcome+dense", "outcome+local"):
        spread = FINDINGS_SPREAD[credit]
        found = findings_token_rewards(_outputs([[_finding(2, 3, -0.5)], []]), 2, 4, spread)
        a_clean, _ = outcome_advantages(outcomes, groups, mask, credit=credit, findings=clean)
        a_found, _ = outcome_advantages(outcomes, groups, mask, credit=credit, findings=found)
        assert torch.all(a_found[0] <= a_clean[0] + 1e-6), credit
        assert a_found[0, 2] < a_clean[0, 2]


def test_ppo_and_grpo_take_the_estimators_from_config():
    assert set(CREDITS) == {"gae", "outcome", "outcome+dense", "outcome+local"}
    cfg = load_config(None, ["algo.ppo.credit=outcome+local", "algo.ppo.dense_scale=0.25",
                             "algo.ppo.samples_per_prompt=4"])
    algo = PPOAlgorithm.from_config(cfg.algo, cfg.generation)
    assert algo.cfg is cfg.algo.ppo and algo.cfg.credit == "outcome+local" and algo.cfg.dense_scale == 0.25
    assert not algo.needs_value_head
    from densecode.rl.grpo import GRPOAlgorithm

    g = load_config(None, ["algo.name=grpo", "algo.grpo.credit=outcome+dense"])
    assert GRPOAlgorithm.from_config(g.algo, g.generation).cfg.credit == "outcome+dense"
    with pytest.raises(ConfigError, match="algo.grpo.credit"):
        load_config(None, ["algo.name=grpo", "algo.grpo.credit=gae"])
    with pytest.raises(ValueError, match="value_warmup_steps needs credit: gae"):
        PPOAlgorithm(PPOConfig(credit="outcome", value_warmup_steps=2))


def test_value_warmup_zeroes_the_policy_advantages_for_its_steps():
    algo = PPOAlgorithm(PPOConfig(credit="gae", value_warmup_steps=2))
    mask = torch.ones(2, 3)
    rewards = torch.tensor([[0.0, 0.0, 1.0], [0.0, 0.0, -1.0]])
    for step, warm in ((0, True), (1, True), (2, False)):
        batch = SimpleNamespace(response_mask=mask, rewards=rewards, values=torch.zeros(2, 3), step=step)
        st = algo.compute_advantages(batch)
        assert st["ppo/value_warmup"] == float(warm)
        assert bool(torch.all(batch.advantages == 0)) == warm
        assert batch.returns.abs().sum() > 0  # the critic still has its targets
