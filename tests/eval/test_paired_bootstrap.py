"""densecode.eval.paired_bootstrap: steps-to-reach on hand-made curves, the seeds x tasks bootstrap on synthetic data."""

import math

import numpy as np
import pytest

from densecode.errors import DensecodeError
from densecode.eval.paired_bootstrap import (Draws, compare_arms, compare_at_equal_time, percentile_interval,
                                            steps_to_reach)


def test_steps_to_reach_interpolates_between_eval_steps():
    steps = [0, 10, 20, 30]
    curve = [0.10, 0.20, 0.40, 0.50]
    assert steps_to_reach(curve, steps, 0.30) == pytest.approx(15.0)  # halfway from 0.20 (step 10) to 0.40 (20)
    assert steps_to_reach(curve, steps, 0.20) == pytest.approx(10.0)  # hit exactly at an eval step
    assert steps_to_reach(curve, steps, 0.05) == 0.0  # already there at the start
    assert steps_to_reach(curve, steps, 0.50) == pytest.approx(30.0)
    assert math.isinf(steps_to_reach(curve, steps, 0.51))  # never reached


def test_steps_to_reach_takes_the_first_crossing_of_a_noisy_curve():
    # Up, down, up again: the first step at which the target is reached counts.
    assert steps_to_reach([0.1, 0.35, 0.2, 0.4], [0, 10, 20, 30], 0.3) == pytest.approx(8.0)


def test_steps_to_reach_rejects_mismatched_lengths():
    with pytest.raises(DensecodeError, match="3 curve values for 2 steps"):
        steps_to_reach([0.1, 0.2, 0.3], [0, 10], 0.2)


def test_percentile_interval_orders_inf_last_without_nan():
    reps = np.array([1.0, 2.0, 3.0, math.inf, math.inf])
    lo, hi = percentile_interval(reps, 0.5)
    assert lo == 2.0 and math.isinf(hi)


def test_bootstrap_means_equal_explicit_resampling():
    rng = np.random.default_rng(3)
    values = rng.random((3, 2, 5))
    draws = Draws.make(3, 5, 4, rng)
    got = draws.means(values)
    for b in range(4):
        seeds = np.repeat(np.arange(3), draws.seeds[b].astype(int))
        tasks = np.repeat(np.arange(5), draws.tasks[b].astype(int))
        assert np.allclose(got[b], values[seeds][:, :, tasks].mean(axis=(0, 2)))


def test_compare_arms_on_a_constant_difference():
    rng = np.random.default_rng(0)
    sparse = rng.random((3, 2, 40))
    dense = sparse + 0.1
    out = compare_arms({"dense": dense, "sparse": sparse}, [0, 10], baseline="sparse", n_boot=200)
    d = out["differences"]["dense"]
    assert d["mean"] == pytest.approx([0.1, 0.1])
    assert d["lo"] == pytest.approx([0.1, 0.1]) and d["hi"] == pytest.approx([0.1, 0.1])
    assert d["excludes_zero"] == [True, True]
    a = out["arms"]["sparse"]
    assert a["mean"] == pytest.approx(sparse.mean(axis=(0, 2)).tolist())
    assert a["seed_sd"] == pytest.approx(sparse.mean(axis=2).std(axis=0, ddof=1).tolist())


def test_steps_to_reach_is_flagged_when_the_baseline_did_not_improve():
    steps = [0, 10, 20]
    falling = np.array([[[1, 1, 0, 0], [1, 0, 0, 0], [1, 0, 0, 0]]], dtype=float)  # 0.5 -> 0.25
    rising = np.array([[[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0]]], dtype=float)  # 0.25 -> 0.75
    out = compare_arms({"dense": rising, "sparse": falling}, steps, baseline="sparse", n_boot=50)
    r = out["steps_to_reach"]["dense"]
    assert r["baseline_improved"] is False and r["start"] == 0.5 and r["target"] == 0.25
    out = compare_arms({"dense": falling, "sparse": rising}, steps, baseline="sparse", n_boot=50)
    r = out["steps_to_reach"]["dense"]
    assert r["baseline_improved"] is True and r["steps"] is None  # dense falls: never reaches 0.75


def test_compare_arms_needs_paired_shapes_and_a_known_baseline():
    with pytest.raises(DensecodeError, match="different"):
        compare_arms({"a": np.zeros((2, 1, 3)), "b": np.zeros((3, 1, 3))}, [0], baseline="b")
    with pytest.raises(DensecodeError, match="baseline arm 'c'"):
        compare_arms({"a": np.zeros((2, 1, 3)), "b": np.zeros((2, 1, 3))}, [0], baseline="c")


def _synthetic(rng, n_seeds, n_tasks, steps, seed_sd, slope_dense, slope_sparse):
    """Bernoulli task outcomes: p = task difficulty + slope x step + a training seed's offset (each run its own)."""
    base = rng.uniform(0.15, 0.45, n_tasks)
    steps = np.asarray(steps, dtype=float)

    def arm(slope):
        p = base[None, None, :] + slope * steps[None, :, None] + rng.normal(0, seed_sd, (n_seeds, 1, 1))
        return (rng.random((n_seeds, len(steps), n_tasks)) < np.clip(p, 0, 1)).astype(float)

    return arm(slope_dense), arm(slope_sparse)


@pytest.mark.parametrize("seed_sd, low, high", [
    # Seed noise comparable to the task noise (the robotics runs: seed sd ~0.03): about the nominal 95%.
    (0.03, 0.90, 0.99),
    # Only per-task noise: the two-way bootstrap counts it more than once and is conservative.
    (0.0, 0.95, 1.0),
])
def test_interval_covers_the_true_difference_at_about_the_nominal_rate(seed_sd, low, high):
    rng = np.random.default_rng(2026)
    true_diff = 0.05 * 1  # slopes 0.05 vs 0 per unit step, evaluated at step 1
    reps, hits = 200, 0
    for r in range(reps):
        dense, sparse = _synthetic(rng, 5, 300, [1], seed_sd, 0.05, 0.0)
        out = compare_arms({"dense": dense, "sparse": sparse}, [1], baseline="sparse", n_boot=400, seed=r)
        d = out["differences"]["dense"]
        hits += d["lo"][0] <= true_diff <= d["hi"][0]
    assert low <= hits / reps <= high


def test_steps_to_reach_interval_covers_the_true_crossing():
    # Sparse gains 0.002 per step over 80 steps (final 0.30 above its start); dense gains 0.004 per step, so it
    # reaches sparse's final score at step 40 (half the steps).
    rng = np.random.default_rng(7)
    steps = list(range(0, 81, 10))
    reps, hits, fractions = 60, 0, []
    for r in range(reps):
        dense, sparse = _synthetic(rng, 5, 400, steps, 0.01, 0.004, 0.002)
        out = compare_arms({"dense": dense, "sparse": sparse}, steps, baseline="sparse", n_boot=300, seed=r)
        s = out["steps_to_reach"]["dense"]
        hits += s["lo"] is not None and s["hi"] is not None and s["lo"] <= 40 <= s["hi"]
        fractions.append(s["reach_fraction"])
    assert hits / reps >= 0.85
    assert np.median(fractions) == pytest.approx(0.5, abs=0.08)


def test_equal_time_reads_each_arm_where_the_baseline_s_time_ran_out():
    """An arm as good per step but twice as slow is read at its middle eval: at equal time it is behind; a faster
    arm is read at its last eval within the baseline's time."""
    rng = np.random.default_rng(0)
    curve = np.array([0.2, 0.4, 0.6])  # success probability at eval steps 0, 50, 100
    tasks = 400
    draw = lambda: (rng.random((3, 3, tasks)) < curve[None, :, None]).astype(float)
    base, slow, fast = draw(), draw(), draw()
    seconds = {"sparse": [0, 50, 100], "slow": [0, 100, 200], "fast": [0, 40, 80]}
    res = compare_at_equal_time({"sparse": base, "slow": slow, "fast": fast}, seconds, baseline="sparse", n_boot=500)
    assert res["baseline_seconds"] == 100.0
    s, f = res["arms"]["slow"], res["arms"]["fast"]
    assert (s["index"], s["seconds"]) == (1, 100.0) and (f["index"], f["seconds"]) == (2, 80.0)
    assert s["difference"] == pytest.approx(slow[:, 1].mean() - base[:, 2].mean())
    assert s["hi"] < 0 and s["excludes_zero"]  # 0.4 vs 0.6 on 3 x 400 draws
    assert f["lo"] < 0 < f["hi"] and not f["excludes_zero"]  # the same curve, read at its end
    with pytest.raises(DensecodeError, match="eval times"):
        compare_at_equal_time({"sparse": base, "slow": slow}, {"sparse": [0, 1], "slow": [0, 1, 2]}, baseline="sparse")
