"""Paired comparisons of training arms from per-task eval outcomes: seed-level spread, a bootstrap over seeds AND
tasks, and how many steps one arm needs to reach another's final score.

The data of one arm is an array `values[seed, step, task]`: the held-out eval's per-task value of the headline
metric (eval_tasks.jsonl, written by the trainer at every eval step) for each training seed. Arms are paired: seed s
of every arm trains from the same seed (the same task draws and sampling seeds), and every eval sees the same tasks
in the same order, so `a[s, t, k] - b[s, t, k]` is a paired difference.

The interval of a difference resamples both sources of noise at once (a two-way "pigeonhole" bootstrap, Owen 2007):
each replicate draws S seeds with replacement and K tasks with replacement, the same draws for every arm and every
step, and recomputes the statistic on the resampled seeds x tasks. Resampling tasks covers "a different held-out set
would give another number"; resampling seeds covers "another training run would give another curve". The percentile
interval of the replicates is reported. With few seeds (S = 3..5) the seed part of the interval is somewhat too
narrow (a bootstrap of S values has (S-1)/S of their variance and no t quantile), which the tests measure on
synthetic data (tests/eval/test_paired_bootstrap.py); the task part is a little conservative.

A replicate's mean over the drawn seeds and tasks is `c_s . X . c_k / (S K)` with the draws' multiplicity counts
`c_s`, `c_k`, so B replicates cost two matrix products, not B loops.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from densecode.errors import DensecodeError


@dataclass
class Draws:
    """Multiplicity counts of B bootstrap replicates: seeds [B, S], tasks [B, K] (row sums S and K)."""

    seeds: np.ndarray
    tasks: np.ndarray

    @classmethod
    def make(cls, n_seeds: int, n_tasks: int, n_boot: int, rng: np.random.Generator) -> Draws:
        seeds = rng.multinomial(n_seeds, np.full(n_seeds, 1.0 / n_seeds), size=n_boot).astype(np.float64)
        tasks = rng.multinomial(n_tasks, np.full(n_tasks, 1.0 / n_tasks), size=n_boot).astype(np.float64)
        return cls(seeds, tasks)

    def means(self, values: np.ndarray) -> np.ndarray:
        """[B, T]: each replicate's mean over its drawn seeds and tasks, per step, of values [S, T, K]."""
        values = np.asarray(values, dtype=np.float64)
        n_seeds, _, n_tasks = values.shape
        by_seed = np.einsum("bs,stk->btk", self.seeds, values)
        return np.einsum("btk,bk->bt", by_seed, self.tasks) / (n_seeds * n_tasks)


def check_arms(arms: Mapping[str, np.ndarray]) -> tuple[int, int, int]:
    """(seeds, steps, tasks) shared by every arm; a clear error when the arms cannot be paired."""
    shapes = {name: np.shape(v) for name, v in arms.items()}
    if not shapes:
        raise DensecodeError("no arms to compare")
    bad = [n for n, s in shapes.items() if len(s) != 3]
    if bad:
        raise DensecodeError(f"arm(s) {bad}: per-task values must be [seed, step, task] arrays, got {shapes}")
    if len(set(shapes.values())) != 1:
        raise DensecodeError(f"arms have different [seed, step, task] shapes {shapes}: pair the same seeds, eval "
                             "steps and eval tasks in every arm (rerun the unfinished runs)")
    shape = next(iter(shapes.values()))
    if min(shape) < 1:
        raise DensecodeError(f"arms hold no data: [seed, step, task] shape {shape}")
    return shape


def percentile_interval(replicates: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    """The central `level` percentile interval of replicates that may be inf ("never reached" sorts last): the
    order statistics just outside the interval (no interpolation, which an inf would turn into nan)."""
    ordered = np.sort(np.asarray(replicates, dtype=np.float64))
    if ordered.size == 0:
        raise DensecodeError("percentile_interval: no replicates")
    alpha = (1.0 - level) / 2.0
    last = ordered.size - 1
    return float(ordered[int(math.floor(alpha * last))]), float(ordered[int(math.ceil((1.0 - alpha) * last))])


def steps_to_reach(curve: Sequence[float], steps: Sequence[int], target: float) -> float:
    """The first step at which `curve` (its value at each eval step) reaches `target`, linearly interpolated
    between the eval step before and the one at which it is reached; inf when it never does.

    A curve that starts at or above the target reaches it at its first step."""
    curve = np.asarray(curve, dtype=np.float64)
    steps = np.asarray(steps, dtype=np.float64)
    if curve.shape != steps.shape or curve.size == 0:
        raise DensecodeError(f"steps_to_reach: {curve.size} curve values for {steps.size} steps")
    hit = np.flatnonzero(curve >= target)
    if hit.size == 0:
        return math.inf
    i = int(hit[0])
    if i == 0:
        return float(steps[0])
    y0, y1 = curve[i - 1], curve[i]
    frac = (target - y0) / (y1 - y0)  # y0 < target <= y1
    return float(steps[i - 1] + frac * (steps[i] - steps[i - 1]))


def _finite_or_none(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def compare_arms(arms: Mapping[str, np.ndarray], steps: Sequence[int], *, baseline: str,
                 n_boot: int = 2000, level: float = 0.95, seed: int = 0) -> dict:
    """Everything the dense-vs-sparse report needs, JSON-safe.

    Per arm and step: the mean over seeds and tasks and the seed-level sd (sd over seeds of each seed's task mean).
    Per non-baseline arm and step: the paired difference arm - baseline with its bootstrap interval. Per
    non-baseline arm: the steps it needs to reach the baseline's final score (the baseline's mean at its last eval
    step), with its bootstrap interval; inf (None in the JSON) = not reached within the run, and `reach_fraction`
    = those steps / the last eval step; `baseline_improved` False when that final score is not above the
    baseline's first one (then the steps say nothing about learning speed).
    """
    if baseline not in arms:
        raise DensecodeError(f"baseline arm {baseline!r} is not among the arms {sorted(arms)}")
    n_seeds, n_steps, n_tasks = check_arms(arms)
    steps = [int(s) for s in steps]
    if len(steps) != n_steps:
        raise DensecodeError(f"{len(steps)} eval steps given for arrays with {n_steps}")
    rng = np.random.default_rng(seed)
    draws = Draws.make(n_seeds, n_tasks, n_boot, rng)
    values = {name: np.asarray(v, dtype=np.float64) for name, v in arms.items()}
    boot = {name: draws.means(v) for name, v in values.items()}  # [B, T]
    out: dict = {"steps": steps, "n_seeds": n_seeds, "n_tasks": n_tasks, "n_boot": n_boot, "level": level,
                 "baseline": baseline, "arms": {}, "differences": {}, "steps_to_reach": {}}
    for name, v in values.items():
        per_seed = v.mean(axis=2)  # [S, T]
        sd = per_seed.std(axis=0, ddof=1) if n_seeds > 1 else np.zeros(n_steps)
        out["arms"][name] = {"mean": per_seed.mean(axis=0).tolist(), "seed_sd": sd.tolist(),
                             "per_seed": per_seed.tolist()}
    base = values[baseline]
    target = float(base[:, -1, :].mean())
    # "Steps to reach the baseline's final score" measures speed of learning only when the baseline learned: a
    # final score at or below the first eval's is reached at step 0 by any arm that starts where it started.
    start = float(base[:, 0, :].mean())
    target_boot = boot[baseline][:, -1]
    for name, v in values.items():
        if name == baseline:
            continue
        diff = (v - base).mean(axis=(0, 2))
        diff_boot = boot[name] - boot[baseline]
        intervals = [percentile_interval(diff_boot[:, t], level) for t in range(n_steps)]
        out["differences"][name] = {
            "mean": diff.tolist(), "lo": [lo for lo, _ in intervals], "hi": [hi for _, hi in intervals],
            "excludes_zero": [bool(lo > 0 or hi < 0) for lo, hi in intervals]}
        point = steps_to_reach(v.mean(axis=(0, 2)), steps, target)
        reps = np.array([steps_to_reach(boot[name][b], steps, target_boot[b]) for b in range(n_boot)])
        lo, hi = percentile_interval(reps, level)
        last = steps[-1]
        out["steps_to_reach"][name] = {
            "target": target, "start": start, "baseline_improved": bool(target > start),
            "steps": _finite_or_none(point), "lo": _finite_or_none(lo), "hi": _finite_or_none(hi),
            "reach_fraction": _finite_or_none(point / last) if last > 0 else None,
            "reach_fraction_hi": _finite_or_none(hi / last) if last > 0 else None,
            "never_reached_share": float(np.mean(~np.isfinite(reps)))}
    return out


def compare_at_equal_time(arms: Mapping[str, np.ndarray], seconds: Mapping[str, Sequence[float]], *,
                          baseline: str, n_boot: int = 2000, level: float = 0.95, seed: int = 0) -> dict:
    """Each non-baseline arm at the baseline's final wall time: equal compute instead of equal samples.

    `seconds[arm][t]` is the arm's wall time at eval step t (mean over its seeds). An arm is read at its last eval
    whose time is at most the baseline's final time (what it had reached when the baseline finished; its first eval
    if even that came later), and compared with the baseline's final eval: the paired difference over the same seeds
    and tasks, with the bootstrap interval of `compare_arms` (the same draws for both arms)."""
    if baseline not in arms:
        raise DensecodeError(f"baseline arm {baseline!r} is not among the arms {sorted(arms)}")
    n_seeds, n_steps, n_tasks = check_arms(arms)
    for name in arms:
        if len(seconds.get(name, ())) != n_steps:
            raise DensecodeError(f"arm {name!r}: {len(seconds.get(name, ()))} eval times for {n_steps} eval steps")
    draws = Draws.make(n_seeds, n_tasks, n_boot, np.random.default_rng(seed))
    values = {name: np.asarray(v, dtype=np.float64) for name, v in arms.items()}
    budget = float(seconds[baseline][-1])
    base_final = values[baseline][:, -1:, :]
    base_boot = draws.means(base_final)[:, 0]
    out = {"baseline": baseline, "baseline_seconds": budget, "level": level, "arms": {}}
    for name, v in values.items():
        if name == baseline:
            continue
        within = [t for t, s in enumerate(seconds[name]) if float(s) <= budget]
        t = within[-1] if within else 0
        diff_boot = draws.means(v[:, t:t + 1, :])[:, 0] - base_boot
        lo, hi = percentile_interval(diff_boot, level)
        out["arms"][name] = {"index": t, "seconds": float(seconds[name][t]), "mean": float(v[:, t, :].mean()),
                             "baseline_mean": float(base_final.mean()),
                             "difference": float((v[:, t, :] - base_final[:, 0, :]).mean()), "lo": lo, "hi": hi,
                             "excludes_zero": bool(lo > 0 or hi < 0)}
    return out
