"""`commitmsg`: the token reward of a commit message, on the words it shares in order with the reference.

The message is the response's first non-empty line. Its sequence score is
    S = rouge_weight x ROUGE-L F1 + chrf_weight x chrF          (metrics.py; both in [0, 1])
and S goes to the tokens that overlap a word of the longest common subsequence with the reference (`split`, the
default: shared evenly, so the response's sum is S; `each`: every such token gets S). Every other token gets
nothing: a word outside the LCS, punctuation, anything after the first line. A message that shares no word gets
nothing at all (its chrF alone has no token to land on); an empty message gets `empty_penalty` on the last token.
"""

from __future__ import annotations

import numpy as np

from densecode.domains.commitmsg.metrics import chrf, rouge_l, words
from densecode.rewards.base import ComponentOutput, RewardComponent, check_spread, diag, spread_over
from densecode.rewards.sample import Sample


def message_span(response: str) -> tuple[int, int]:
    """Characters of the response's first non-empty line, stripped."""
    pos = 0
    for line in response.split("\n"):
        if line.strip():
            start = pos + len(line) - len(line.lstrip())
            return start, pos + len(line.rstrip())
        pos += len(line) + 1
    return len(response), len(response)


def judge_message(response: str, reference: str) -> dict:
    """The scores of a response (its first line) against the reference message."""
    start, end = message_span(response)
    message = response[start:end]
    rl = rouge_l(message, reference)
    c = chrf(message, reference) if message else 0.0
    hyp_words = words(message)
    matched = [(start + hyp_words[i].start, start + hyp_words[i].end) for i in rl.matched]
    return {"message": message, "rouge_l": rl.f1, "rouge_l_precision": rl.precision, "rouge_l_recall": rl.recall,
            "chrf": c, "matched_spans": matched, "exact": float(message.strip().lower() == reference.strip().lower())}


class CommitmsgComponent(RewardComponent):
    name = "commitmsg"

    def __init__(self, rouge_weight: float = 0.5, chrf_weight: float = 0.5, empty_penalty: float = -0.5,
                 spread: str = "split") -> None:
        self.rouge_weight = float(rouge_weight)
        self.chrf_weight = float(chrf_weight)
        self.empty_penalty = float(empty_penalty)
        self.spread = check_spread("commitmsg", spread)

    def __call__(self, samples: list[Sample]) -> list[ComponentOutput]:
        return [self.score(s) for s in samples]

    def score(self, sample: Sample) -> ComponentOutput:
        reference = sample.task.get("reference")
        if not isinstance(reference, str):
            return ComponentOutput.zeros(sample, has_task=0.0)
        values = np.zeros(sample.n_tokens, dtype=np.float32)
        j = judge_message(sample.response, reference)
        s = self.rouge_weight * j["rouge_l"] + self.chrf_weight * j["chrf"]
        records = []
        if not j["message"]:
            if sample.n_tokens:
                values[-1] += self.empty_penalty
            records.append(diag("commitmsg_empty", None, [sample.n_tokens - 1] if sample.n_tokens else [],
                                "no commit message", self.empty_penalty))
        else:
            tokens = sorted({t for a, b in j["matched_spans"] for t in sample.tokens_in_range(a, b)})
            if tokens and s:
                spread_over(values, tokens, s, self.spread)
            matched_words = [sample.response[a:b] for a, b in j["matched_spans"]]
            given = s if tokens else 0.0  # no shared word: the chrF alone has no token to land on
            records.append(diag("commitmsg_lcs", (j["matched_spans"][0][0], j["matched_spans"][-1][1])
                                if j["matched_spans"] else None, tokens,
                                f"ROUGE-L F1 {j['rouge_l']:.2f}, chrF {j['chrf']:.2f}; shared words: "
                                f"{' '.join(matched_words) or '(none: nothing given)'}", given))
        # `outcome`: the task's verifiable outcome (GRPO's `sequence_reward: outcome`), the text similarity score.
        info = {"rouge_l": j["rouge_l"], "chrf": j["chrf"], "score": s, "exact": j["exact"], "has_task": 1.0,
                "outcome": s}
        return ComponentOutput(values, records, info, outcome=s)
