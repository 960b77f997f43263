"""The unbiased pass@k estimator (Chen et al., 2021, "Evaluating Large Language Models Trained on Code").

With n samples of which c are correct, pass@k = 1 - C(n-c, k) / C(n, k): the
chance that k samples drawn without replacement from the n contain at least one
correct one. Computed as a product so large n does not overflow.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def pass_at_k(n: int, c: int, k: int) -> float:
    """pass@k of one problem with `n` samples, `c` of them correct."""
    if not 0 <= c <= n:
        raise ValueError(f"need 0 <= c <= n, got n={n}, c={c}")
    if not 1 <= k <= n:
        raise ValueError(f"need 1 <= k <= n, got n={n}, k={k}")
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def mean_pass_at_k(num_samples: Sequence[int], num_correct: Sequence[int], k: int) -> float:
    """Mean pass@k over problems (problems with fewer than k samples are an error, not skipped)."""
    if len(num_samples) != len(num_correct):
        raise ValueError("num_samples and num_correct must have the same length")
    if not num_samples:
        return 0.0
    return float(np.mean([pass_at_k(int(n), int(c), k) for n, c in zip(num_samples, num_correct)]))


def ks_for(n: int) -> list[int]:
    """The k values worth reporting for n samples per problem: EvalPlus's 1, 10, 100, the 5 of the RoboEval
    tables, and 4 and 16, the headroom RL can sharpen towards (pass@k of the start model, docs/results.md)."""
    return [k for k in (1, 4, 5, 10, 16, 100) if k <= n]
