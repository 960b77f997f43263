"""missing_eos: -1 on the last token of a response the length limit cut off (it never chose to stop).

Its weight (`reward.weights.missing_eos`, default 0 = off) is the size of the penalty. It is a component like the
others so the reward is assembled in one place: sparse mode, explain pages and the logged component sums see it.
"""

from __future__ import annotations

import numpy as np

from densecode.rewards.base import ComponentOutput, RewardComponent, diag
from densecode.rewards.sample import Sample


class MissingEosComponent(RewardComponent):
    name = "missing_eos"

    def __call__(self, samples: list[Sample]) -> list[ComponentOutput]:
        outs = []
        for s in samples:
            values = np.zeros(s.n_tokens, dtype=np.float32)
            records = []
            if s.truncated and s.n_tokens:
                values[-1] = -1.0
                records.append(diag("missing_eos", None, [s.n_tokens - 1], "cut by the length limit (no EOS)", -1.0))
            outs.append(ComponentOutput(values, records, {"truncated": float(bool(s.truncated))}))
        return outs
