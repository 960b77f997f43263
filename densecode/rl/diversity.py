"""Rollout diversity measures that drive MicroCoder's temperature choice.

The MicroCoder paper uses "output diversity" without defining it. densecode
defines two measures on the generated token ids of each GRPO group (G responses
to one prompt) and averages them over the groups of a step:

* distinct-n (default n = 4): |distinct n-grams in the group| / |n-grams in the
  group|, n-grams taken within each response (never across two). 1.0 when no
  4-gram repeats anywhere in the group, → 1/G when all G responses are the same,
  lower still when responses loop. Responses shorter than n contribute no n-grams;
  a group without any n-gram is skipped. Cheap: this is the controller's signal.
* pairwise edit distance: mean over the G·(G-1)/2 pairs of
  Levenshtein(a, b) / max(|a|, |b|) on token ids (0 = identical, 1 = nothing in
  common); two empty responses have distance 0. Logged alongside.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations

import numpy as np


def distinct_ngram_ratio(group: Sequence[Sequence[int]], n: int = 4) -> float | None:
    """Distinct n-grams / all n-grams over the responses of one group; None if no n-grams."""
    seen: set[tuple[int, ...]] = set()
    total = 0
    for ids in group:
        ids = list(ids)
        for i in range(len(ids) - n + 1):
            seen.add(tuple(ids[i : i + n]))
            total += 1
    return len(seen) / total if total else None


def edit_distance(a: Sequence[int], b: Sequence[int]) -> int:
    """Levenshtein distance on token ids; each DP row is vectorised with numpy.

    Row recurrence: d[i][j] = min(d[i-1][j] + 1, d[i-1][j-1] + (a_i != b_j), d[i][j-1] + 1).
    The first two terms come from the previous row (`tmp`); the left-neighbour term
    unrolls to d[i][j] = min_k<=j (tmp[k] + j - k) = j + cummin(tmp - k).
    """
    a_arr, b_arr = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    if len(a_arr) == 0 or len(b_arr) == 0:
        return int(max(len(a_arr), len(b_arr)))
    cols = np.arange(len(b_arr) + 1)
    prev = cols.copy()
    for i, token in enumerate(a_arr, start=1):
        tmp = np.empty_like(prev)
        tmp[0] = i
        tmp[1:] = np.minimum(prev[1:] + 1, prev[:-1] + (b_arr != token))
        prev = cols + np.minimum.accumulate(tmp - cols)
    return int(prev[-1])


def pairwise_edit_distance(group: Sequence[Sequence[int]]) -> float | None:
    """Mean normalised edit distance over the pairs of one group; None for a group of one."""
    dists = []
    for a, b in combinations(group, 2):
        longest = max(len(a), len(b))
        dists.append(edit_distance(a, b) / longest if longest else 0.0)
    return float(np.mean(dists)) if dists else None


def _mean_over_groups(values: list[float | None]) -> float:
    kept = [v for v in values if v is not None]
    return float(np.mean(kept)) if kept else float("nan")


def rollout_diversity(
    token_ids: Sequence[Sequence[int]], group_size: int, n: int = 4, edit: bool = True
) -> dict[str, float]:
    """Both measures for a step's responses (ordered group by group), averaged over groups."""
    if group_size < 1 or len(token_ids) % group_size != 0:
        raise ValueError(f"{len(token_ids)} responses do not split into groups of {group_size}")
    groups = [token_ids[i : i + group_size] for i in range(0, len(token_ids), group_size)]
    out = {f"distinct_{n}": _mean_over_groups([distinct_ngram_ratio(g, n) for g in groups])}
    if edit:
        out["edit_distance"] = _mean_over_groups([pairwise_edit_distance(g) for g in groups])
    return out
