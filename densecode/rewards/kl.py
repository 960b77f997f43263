"""`kl`: minus the per-token KL to the frozen reference policy.

From the log-probs the learner supplies for the sampled tokens
(`sample.logprobs` = log pi(a_t), `sample.ref_logprobs` = log pi_ref(a_t)),
with x = ref_logprob - logprob:
- k1: -x (unbiased, can be negative per token);
- k3: (e^x - 1) - x (unbiased, always >= 0; the reference implementation's choice).
The component returns -KL (rewards convention); the assembler weight is the KL
coefficient (PPO's adaptive controller changes it with `assembler.set_weight`).
`ComponentOutput.kl` is the sequence KL (what the adaptive KL controller is fed).
Samples without log-probs get zeros, no `kl`, and `info["kl_missing"] = 1`.
"""

from __future__ import annotations

import numpy as np

from densecode.errors import DensecodeError
from densecode.rewards.base import ComponentOutput, RewardComponent
from densecode.rewards.sample import Sample


def kl_per_token(logprobs: np.ndarray, ref_logprobs: np.ndarray, estimator: str = "k3") -> np.ndarray:
    x = np.asarray(ref_logprobs, dtype=np.float64) - np.asarray(logprobs, dtype=np.float64)
    if estimator == "k1":
        return (-x).astype(np.float32)
    if estimator == "k3":
        return (np.expm1(x) - x).astype(np.float32)
    raise DensecodeError(f"KL estimator must be 'k1' or 'k3'; got {estimator!r}")


class KLComponent(RewardComponent):
    name = "kl"

    def __init__(self, estimator: str = "k3") -> None:
        if estimator not in ("k1", "k3"):
            raise DensecodeError(f"reward.components.kl.estimator must be 'k1' or 'k3'; got {estimator!r}")
        self.estimator = estimator

    def __call__(self, samples: list[Sample]) -> list[ComponentOutput]:
        outs = []
        for s in samples:
            if s.logprobs is None or s.ref_logprobs is None:
                outs.append(ComponentOutput.zeros(s, kl_missing=1.0))
                continue
            if len(s.logprobs) != s.n_tokens or len(s.ref_logprobs) != s.n_tokens:
                raise DensecodeError(
                    f"kl: sample has {s.n_tokens} tokens but {len(s.logprobs)} logprobs / "
                    f"{len(s.ref_logprobs)} ref_logprobs (one per response token expected)"
                )
            kl = kl_per_token(s.logprobs, s.ref_logprobs, self.estimator)
            outs.append(ComponentOutput(-kl, [], {"kl": float(kl.sum()), "kl_mean": float(kl.mean()) if len(kl) else 0.0},
                                        kl=float(kl.sum())))
        return outs
