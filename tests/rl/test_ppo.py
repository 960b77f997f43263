"""PPO maths against hand-computed values, and where dense rewards land."""

import math

import numpy as np
import pytest
import torch

from densecode.rl.kl import AdaptiveKLController, FixedKLController
from densecode.rl.ppo import (
    clipped_policy_loss,
    clipped_value_loss,
    compute_gae,
    explained_variance,
    whiten,
)


def test_gae_matches_hand_computed_example():
    rewards = torch.tensor([[1.0, 0.0, 2.0], [0.5, 1.0, 9.0]])  # 9.0 sits on padding: must be ignored
    values = torch.tensor([[0.5, 1.0, -1.0], [1.0, 2.0, 7.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    adv, ret = compute_gae(rewards, values, mask, gamma=0.9, lam=0.8)
    # Row 0: d2 = 2 - (-1) = 3; d1 = 0 + .9*(-1) - 1 = -1.9; d0 = 1 + .9*1 - .5 = 1.4
    #        A2 = 3; A1 = -1.9 + .72*3 = 0.26; A0 = 1.4 + .72*0.26 = 1.5872
    # Row 1: d1 = 1 - 2 = -1; d0 = .5 + .9*2 - 1 = 1.3; A1 = -1; A0 = 1.3 - .72 = 0.58
    expected_adv = torch.tensor([[1.5872, 0.26, 3.0], [0.58, -1.0, 0.0]])
    expected_ret = torch.tensor([[2.0872, 1.26, 2.0], [1.58, 1.0, 0.0]])
    assert torch.allclose(adv, expected_adv, atol=1e-5)
    assert torch.allclose(ret, expected_ret, atol=1e-5)


def test_gae_gamma1_lam1_zero_values_is_reward_to_go():
    # A dense reward on token k credits tokens 0..k, never the tokens after it.
    rewards = torch.tensor([[0.0, 0.0, -1.0, 0.0, 0.5]])
    mask = torch.ones_like(rewards)
    adv, _ = compute_gae(rewards, torch.zeros_like(rewards), mask, gamma=1.0, lam=1.0)
    assert adv.tolist() == [[-0.5, -0.5, -0.5, 0.5, 0.5]]


def test_clipped_policy_loss_hand_computed():
    old = torch.zeros(1, 4)
    new = torch.log(torch.tensor([[1.5, 0.5, 1.1, 1.5]]))
    adv = torch.tensor([[1.0, -1.0, 2.0, -1.0]])
    mask = torch.ones(1, 4)
    loss, st = clipped_policy_loss(new, old, adv, mask, clip_eps=0.2)
    # token 0: max(-1.5, -1.2) = -1.2 (clipped); token 1: max(0.5, 0.8) = 0.8 (clipped)
    # token 2: max(-2.2, -2.2) = -2.2; token 3 (A<0, ratio>1+eps): max(1.5, 1.2) = 1.5 (pessimistic, unclipped)
    assert loss.item() == pytest.approx((-1.2 + 0.8 - 2.2 + 1.5) / 4, abs=1e-6)
    assert st["clipfrac"].item() == pytest.approx(0.5)
    r = np.array([1.5, 0.5, 1.1, 1.5])
    assert st["approx_kl"].item() == pytest.approx(float(np.mean((r - 1) - np.log(r))), abs=1e-6)


def test_clip_higher_widens_only_the_upper_bound():
    old = torch.zeros(1, 2)
    new = torch.log(torch.tensor([[1.5, 0.5]]))
    adv = torch.tensor([[1.0, -1.0]])
    loss, _ = clipped_policy_loss(new, old, adv, torch.ones(1, 2), clip_eps=0.2, clip_eps_high=0.28)
    assert loss.item() == pytest.approx((-1.28 + 0.8) / 2, abs=1e-6)


def test_policy_loss_ignores_padding():
    old = torch.zeros(1, 3)
    new = torch.tensor([[0.1, 0.15, 50.0]])
    adv = torch.tensor([[1.0, 1.0, 1e6]])
    mask = torch.tensor([[1.0, 1.0, 0.0]])
    loss, _ = clipped_policy_loss(new, old, adv, mask)
    assert loss.item() == pytest.approx(-(math.exp(0.1) + math.exp(0.15)) / 2, abs=1e-6)


def test_value_clipping_hand_computed():
    old_v = torch.tensor([[0.0, 0.0, 1.0]])
    new_v = torch.tensor([[0.5, -0.1, 2.0]])
    returns = torch.tensor([[1.0, 1.0, 0.0]])
    loss, st = clipped_value_loss(new_v, old_v, returns, torch.ones(1, 3), value_clip=0.3)
    # t0: max(0.25, (0.3-1)^2=0.49) = 0.49; t1: 1.21 both; t2: max(4, (1.3)^2=1.69) = 4
    assert loss.item() == pytest.approx(0.5 * (0.49 + 1.21 + 4.0) / 3, abs=1e-6)
    assert st["vf_clipfrac"].item() == pytest.approx(1 / 3)


def test_value_clipfrac_ignores_float_rounding_inside_the_clip():
    """V_old + (V - V_old) is not always V in floats (V and V_old of opposite signs); an unclipped move must never
    count as a clip."""
    torch.manual_seed(0)
    old_v = torch.randn(20000) * 0.1
    new_v = -1.7 * old_v + 0.05 * torch.randn(20000)
    inside = (new_v - old_v).abs() < 0.3
    old_v, new_v = old_v[inside][None], new_v[inside][None]
    returns = torch.randn_like(new_v)
    rounded = old_v + torch.clamp(new_v - old_v, -0.3, 0.3)
    # The hazard is real on this data: comparing the two losses alone would count these as clips.
    assert ((rounded - returns) ** 2 > (new_v - returns) ** 2).sum() > 100
    _, st = clipped_value_loss(new_v, old_v, returns, torch.ones_like(new_v), value_clip=0.3)
    assert st["vf_clipfrac"].item() == 0.0
