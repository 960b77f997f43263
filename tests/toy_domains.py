"""Two toy domains for the `multi` domain's tests, registered on import as toy-a and toy-b: prompts ask for a word
(tasks.options.<task>.word), the response scores 1 when it contains it; the `word` component grades it on the last
token."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from densecode.domains import Domain, DomainOptions, register_domain


@dataclass
class WordOptions(DomainOptions):
    word: str = "a"


class _WordDomain(Domain):
    """Prompts ask for a word (a per-prompt variant); score 1 when the response contains it."""

    Options = WordOptions
    default_weights: ClassVar[dict[str, float]] = {"word": 1.0, "kl": 0.05}
    components: ClassVar[dict[str, str]] = {"word": f"{__name__}:WordComponent"}

    def tasks(self, split, n, seed):
        rng = np.random.default_rng(seed)
        return [{"prompt": f"say {self.options.word}{k}: ", "word": self.options.word, "task_id": f"{split}-{seed}-{i}"}
                for i, k in enumerate(rng.integers(0, 9, size=n))]

    def score(self, tasks, responses):
        return [{"outcome": "success" if t["word"] in r else "failure", "score": float(t["word"] in r)}
                for t, r in zip(tasks, responses)]


@register_domain
class ToyA(_WordDomain):
    name = "toy-a"


@register_domain
class ToyB(_WordDomain):
    name = "toy-b"
    default_weights: ClassVar[dict[str, float]] = {"word": 1.0, "kl": 0.2}


class WordComponent:
    name = "word"

    def __call__(self, samples):
        from densecode.rewards.base import ComponentOutput

        outs = []
        for s in samples:
            values = np.zeros(s.n_tokens, dtype=np.float32)
            hit = s.task["word"] in s.response
            if s.n_tokens:
                values[-1] = float(hit) + 0.01 * len(s.response)  # graded, so rewards vary
            outs.append(ComponentOutput(values, [], {"hit": float(hit)}, outcome=float(hit)))
        return outs
