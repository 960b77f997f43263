"""Every code task reports its verifiable outcome in its reward component's info (GRPO's `sequence_reward: outcome`
reads it): codeio execution accuracy, testgen the coverage of its holding asserts, commitmsg the similarity score —
each equal to the domain's own score for the same answer."""

from __future__ import annotations

import pytest

from densecode.domains.registry import get_domain_class
from densecode.rewards import Sample
from densecode.rl.grpo import outcome_of


def char_sample(prompt: str, response: str, task: dict) -> Sample:
    n = len(response)
    return Sample(prompt=prompt, response=response, token_ids=list(range(n)),
                  token_spans=[(i, i + 1) for i in range(n)], code_regions=[(0, n)], task=task)


def component(name: str):
    if name == "codeio":
        from densecode.domains.codeio.reward import LiteralComponent
        return LiteralComponent()
    if name == "testgen":
        from densecode.domains.testgen.reward import TestgenComponent
        return TestgenComponent()
    from densecode.domains.commitmsg.reward import CommitmsgComponent
    return CommitmsgComponent()


WRONG = {"codeio": [" 'not the value'", " [1, 2", " -9999"],
         "testgen": ["assert 1 == 2\n", "pass\n"],
         "commitmsg": [" Update the code", " "]}


@pytest.mark.parametrize("name", ["codeio", "testgen", "commitmsg"])
def test_the_components_outcome_equals_the_domains_score(name):
    domain = get_domain_class(name)()
    tasks = domain.tasks("validation", 4, 0)
    pairs = [(t, domain.canonical_response(t)) for t in tasks]
    pairs += [(t, wrong) for t in tasks[:2] for wrong in WRONG[name]]
    if name == "testgen":  # a partial answer: the first canonical assert only
        pairs += [(t, domain.canonical_response(t).splitlines()[0] + "\n") for t in tasks[:2]]
    records = domain.score([t for t, _ in pairs], [r for _, r in pairs])
    outputs = component(name)([char_sample(t["prompt"], r, t) for t, r in pairs])
    outcomes = [outcome_of({name: out}) for out in outputs]
    assert outcomes == pytest.approx([float(r["score"]) for r in records], abs=1e-6)
    assert all(0.0 <= o <= 1.0 for o in outcomes)
    assert max(outcomes) == pytest.approx(1.0) and min(outcomes) < 1.0
