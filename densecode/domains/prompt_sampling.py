"""Drawing training prompts from a finite pool by how likely they are to carry a learning signal.

Group methods (outcome credit over k samples of a prompt, GRPO) learn only from prompts whose samples disagree: a
prompt every sample fails (or passes) gives every response the same advantage, 0. On a pool where the model passes
few tasks (SmolLM2-135M on MBPP's train split at T=0.5: ~6% of samples in the first steps), most of a step's
samples are such prompts.
`signal` sampling draws a prompt with probability proportional to the chance that its next group of k samples is
mixed, under a Beta posterior of its pass rate p:

    p_i ~ Beta(a0 + passes_i, b0 + fails_i),   a0 = m s,  b0 = (1 - m) s      (m: the pool's pass rate so far)
    w_i = P(group of k mixed) = 1 - E[p^k] - E[(1 - p)^k],   E[p^k] = prod_{j<k} (a + j) / (a + b + j)

An unseen prompt keeps the prior's weight (it is explored), a prompt that failed every sample so far falls below it,
a prompt that has passed once rises above it. It is DAPO's dynamic sampling (keep the groups with a signal) done
before sampling rather than by sampling more and discarding. The counts are the task source's checkpointed state.
"""

from __future__ import annotations

import numpy as np


def mixed_group_probability(passes: np.ndarray, fails: np.ndarray, k: int, prior_mean: float,
                            prior_strength: float) -> np.ndarray:
    """P(k samples of a prompt are not all equal) under each prompt's Beta(a0 + passes, b0 + fails) posterior."""
    m = float(np.clip(prior_mean, 1e-3, 1 - 1e-3))
    a = m * prior_strength + np.asarray(passes, dtype=np.float64)
    b = (1 - m) * prior_strength + np.asarray(fails, dtype=np.float64)
    all_pass = np.ones_like(a)
    all_fail = np.ones_like(a)
    for j in range(max(1, int(k))):
        all_pass *= (a + j) / (a + b + j)
        all_fail *= (b + j) / (a + b + j)
    return np.clip(1.0 - all_pass - all_fail, 0.0, 1.0)


class SignalSampler:
    """Per-prompt pass/fail counts of a pool of `size` prompts, and draws weighted by `mixed_group_probability`."""

    def __init__(self, size: int, prior_strength: float = 2.0):
        self.passes = np.zeros(size, dtype=np.int64)
        self.fails = np.zeros(size, dtype=np.int64)
        self.group_size = 1
        self.prior_strength = float(prior_strength)

    def weights(self) -> np.ndarray:
        seen = self.passes.sum() + self.fails.sum()
        # The pool's pass rate so far (0.5 before any outcome: every prompt then weighs the same).
        mean = (self.passes.sum() + 0.5) / (seen + 1.0)
        w = mixed_group_probability(self.passes, self.fails, max(self.group_size, 2), mean, self.prior_strength)
        return np.maximum(w, 1e-6)  # never 0: every prompt stays drawable

    def draw(self, n: int, seed: int) -> list[int]:
        """n pool indices, distinct while n <= the pool's size, deterministic in `seed`."""
        rng = np.random.default_rng(seed)
        w = self.weights()
        size = len(w)
        picks: list[int] = []
        while len(picks) < n:
            k = min(n - len(picks), size)
            picks += [int(i) for i in rng.choice(size, size=k, replace=False, p=w / w.sum())]
        return picks

    def observe(self, indices: list[int], outcomes: list[float | None], group_size: int) -> None:
        """Count each judged sample of pool prompt indices[i] as a pass (outcome 1) or a fail."""
        self.group_size = int(group_size)
        for i, o in zip(indices, outcomes):
            if i is None or o is None:
                continue
            if o >= 1.0 - 1e-9:
                self.passes[i] += 1
            else:
                self.fails[i] += 1

    def stats(self) -> dict[str, float]:
        seen = (self.passes + self.fails) > 0
        w = self.weights()
        return {"prompts_seen": float(seen.sum()), "prompts_ever_passed": float((self.passes > 0).sum()),
                "weight_max_over_mean": float(w.max() / w.mean())}

    def state_dict(self) -> dict:
        return {"passes": self.passes.tolist(), "fails": self.fails.tolist(), "group_size": self.group_size}

    def load_state_dict(self, state: dict) -> None:
        passes, fails = np.asarray(state["passes"], dtype=np.int64), np.asarray(state["fails"], dtype=np.int64)
        if passes.shape != self.passes.shape or fails.shape != self.fails.shape:
            from densecode.errors import DensecodeError

            raise DensecodeError(f"the checkpoint's prompt counts cover {len(passes)} training prompts, the task "
                                 f"file now has {len(self.passes)}: resume with the tasks file the run started with")
        self.passes, self.fails = passes, fails
        self.group_size = int(state.get("group_size", 1))
