"""densecode.eval.credit on synthetic rollout records: each diagnostic's number checked by hand."""

import numpy as np
import pytest

from densecode.errors import DensecodeError
from densecode.eval.credit import (
    LAST,
    bucket_of,
    diagnose,
    diagnosis_markdown,
    explained_variance_by_position,
    kl_share,
    offending_tokens,
    outcome_agreement,
    sign_agreement,
    whitening_effect,
)


def record(values, returns, *, step=1, run="r", diagnostics=None, components=None, weights=None, total=None):
    n = len(returns)
    return {"step": step, "run": run, "mode": "dense",
            "total": list(total) if total is not None else [0.0] * n,
            "components": components or {}, "weights": weights or {}, "diagnostics": diagnostics or {},
            "algo": {"values": list(values), "returns": list(returns)}}


def test_bucket_of_puts_the_last_token_apart():
    assert bucket_of(0, 10, 5) == "0-20%"
    assert bucket_of(8, 10, 5) == "80-100%"
    assert bucket_of(9, 10, 5) == LAST
    assert bucket_of(0, 1, 5) == LAST  # a one-token response is all last token


def test_explained_variance_is_high_where_the_critic_tracks_the_return():
    rng = np.random.default_rng(0)
    recs = []
    for _ in range(50):
        ret = rng.normal(0, 1, 10)
        val = ret.copy()
        val[5:] = 0.0  # the critic knows the return in the first half only
        recs.append(record(val, ret))
    ev = explained_variance_by_position(recs, n_buckets=2)
    assert ev["0-50%"]["ev"] == pytest.approx(1.0)  # tokens 0-4 (relative positions 0 .. 4/9)
    assert ev["50-100%"]["ev"] == pytest.approx(0.0, abs=0.05)  # V = 0: no better than a constant
    assert ev[LAST]["ev"] == pytest.approx(0.0, abs=0.05)
    assert ev["0-50%"]["n_tokens"] + ev["50-100%"]["n_tokens"] + ev[LAST]["n_tokens"] == 500


def test_explained_variance_is_undefined_where_the_returns_hardly_vary():
    rng = np.random.default_rng(1)
    recs = []
    for _ in range(50):
        ret = rng.normal(0, 1, 10)
        ret[-1] = rng.normal(0, 1e-3)  # the last token's return about constant (dense rewards, nothing after it)
        val = ret + rng.normal(0, 0.1, 10)
        recs.append(record(val, ret))
    ev = explained_variance_by_position(recs, n_buckets=2)
    assert ev[LAST]["constant_returns"] and ev[LAST]["ev"] is None and ev[LAST]["returns_sd"] < 0.01
    assert not ev["0-50%"]["constant_returns"] and ev["0-50%"]["ev"] > 0.95


def test_explained_variance_of_a_perfect_critic_is_one():
    recs = [record([1.0, 2.0, 3.0], [1.0, 2.0, 3.0]), record([0.0, 5.0, 1.0], [0.0, 5.0, 1.0])]
    ev = explained_variance_by_position(recs, n_buckets=1)
    assert ev["0-100%"]["ev"] == pytest.approx(1.0)


def test_offending_tokens_come_from_negative_diagnostics():
    rec = record([0] * 6, [0] * 6, diagnostics={
        "syntax": [{"tokens": [2, 4], "value": -1.0}],
        "lint": [{"tokens": [0, 1], "value": -0.5}, {"tokens": [5, 6], "value": 0.2}],  # a positive one: no mark
        "sim": [{"tokens": None, "value": -0.1}],  # no token range: nothing to mark
    })
    masks = offending_tokens(rec)
    assert sorted(masks) == ["lint", "syntax"]
    assert masks["syntax"].tolist() == [False, False, True, True, False, False]
    assert masks["lint"].tolist() == [True, False, False, False, False, False]


def test_sign_agreement_and_whitening_flips_on_a_hand_made_batch():
    # One batch (step 1), raw advantages = returns - values (values 0): every token negative, mean -1.
    # Whitening subtracts the mean, so tokens above -1 turn positive, including the marked (offending) one at -0.5.
    a = record([0, 0, 0, 0], [-0.5, -1.0, -1.5, -1.0], diagnostics={"syntax": [{"tokens": [0, 1], "value": -1}]})
    b = record([0, 0, 0, 0], [-2.0, -0.5, -1.0, -0.5], diagnostics={"syntax": [{"tokens": [0, 1], "value": -1}]})
    agree = sign_agreement([a, b])
    assert agree["syntax"]["n_tokens"] == 2
    assert agree["syntax"]["negative_raw"] == 1.0
    assert agree["syntax"]["negative_whitened"] == 0.5  # -0.5 becomes positive, -2.0 stays negative
    assert agree["(unmarked tokens)"]["negative_raw"] == 1.0
    w = whitening_effect([a, b])
    assert w["raw_mean"] == pytest.approx(-1.0)
    # raw -0.5 (x3) turn positive, -1.0 (x3) become 0 (sign 0 != -1): 6 of 8 tokens change sign.
    assert w["sign_flip_share"] == pytest.approx(6 / 8)
    assert w["offending_negative_to_positive"] == pytest.approx(0.5)


def test_whitening_is_per_run_and_step_batch():
    # Two runs at the same step with different advantage levels: each is whitened on its own.
    a = record([0, 0], [-1.0, -3.0], run="x")
    b = record([0, 0], [5.0, 7.0], run="y")
    w = whitening_effect([a, b])
    # Per batch: x -> (+, -), y -> (-, +): x's first token and y's first token flip.
    assert w["sign_flip_share"] == pytest.approx(0.5)


def test_outcome_agreement_compares_each_token_with_its_batch_mean_outcome():
    # One batch: a passing response (pass_rate 1) and a failing one (0); mean outcome 0.5. Raw advantages: the
    # passing response +1 then -1 (its last token pushed down), the failing one -1 -1. Whitened (mean -0.5): the
    # passing response's tokens keep signs (+, -), the failing one's stay negative: agreement 2 of 2 at the first
    # token, 1 of 2 at the last.
    win = dict(record([0, 0], [1.0, -1.0]), verdicts={"tests": {"outcome": 1.0}})
    lose = dict(record([0, 0], [-1.0, -1.0]), verdicts={"tests": {"outcome": 0.0}})
    no_outcome = record([0, 0], [3.0, 3.0], run="other")  # no verdicts: left out
    oa = outcome_agreement([win, lose, no_outcome], n_buckets=1)
    assert oa["n_responses"] == 2
    assert oa["by_bucket"]["0-100%"] == {"n_tokens": 2, "agree": 1.0}
    assert oa["by_bucket"][LAST] == {"n_tokens": 2, "agree": 0.5}
    # A batch whose responses all have the mean outcome says nothing about sign agreement.
    tie = dict(record([0, 0], [1.0, 1.0], run="t"), verdicts={"sim": {"outcome": 0.5}, "lint": {"outcome": None}})
    assert outcome_agreement([tie, dict(tie)], n_buckets=1)["by_bucket"][LAST]["n_tokens"] == 0


def test_kl_share_from_weighted_parts():
    recs = [
        record([0, 0], [0, 0], components={"sim": [0.5, 0.5], "kl": [-0.1, -0.1]}, weights={"sim": 1.0, "kl": 0.5},
               total=[0.45, 0.45]),
        record([0, 0], [0, 0], components={"sim": [0.0, 0.0], "kl": [-0.3, -0.1]}, weights={"sim": 1.0, "kl": 0.5},
               total=[-0.15, -0.05]),
    ]
    k = kl_share(recs)
    # KL parts -0.1 and -0.2; sim parts 1.0 and 0.0: abs share = mean(0.1, 0.2) / mean(1.1, 0.2)
    assert k["abs_share"] == pytest.approx(0.15 / 0.65)
    # Var(kl parts) / Var(totals 0.9, -0.2)
    assert k["variance_share"] == pytest.approx(np.var([-0.1, -0.2]) / np.var([0.9, -0.2]))
    assert kl_share([record([0], [0], components={"sim": [1.0]})])["abs_share"] is None  # no KL component


def test_diagnose_needs_the_algo_arrays_and_renders_markdown():
    rec = record([0.0, 0.5], [0.2, 0.4], diagnostics={"lint": [{"tokens": [0, 1], "value": -0.1}]},
                 components={"lint": [-0.1, 0.0], "kl": [0.0, -0.01]}, weights={"lint": 0.1, "kl": 0.2})
    d = diagnose([rec, dict(rec, step=2)])
    assert set(d["per_step"]) == {"1", "2"}
    md = diagnosis_markdown(d, "t")
    assert "| lint | 2 |" in md and "last token" in md
    assert "against the response's outcome" not in md  # no record reports an outcome: the table is left out
    bare = {k: v for k, v in rec.items() if k != "algo"}
    with pytest.raises(DensecodeError, match="retrain"):
        diagnose([bare])
