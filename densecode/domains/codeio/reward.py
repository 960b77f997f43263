"""`literal`: the codeio token reward -- credit up to the first character that departs from a correct literal.

The answer is the response up to its first newline (the assert line it completes). Judged in the parent against the
task's `expected` value (computed in the sandbox when the task was made; see literal.py for the rules):
- a correct answer: `credit` on every answer token, and `correct_bonus` on its last token;
- a wrong one: `departure` finds the first character no correct literal can have there; tokens wholly before it get
  `credit`, the token holding it gets `penalty`, later tokens nothing. An answer that is a correct but unfinished
  literal departs at its end: the penalty goes to the token after its last character (EOS when present), else to the
  last token. An empty answer puts the penalty on the first token.
`spread: split` (default) makes the credit a share of the answer's tokens (each credited token gets credit / n, so a
correct answer collects `credit` in all and a wrong one the fraction before its departure); `spread: each` puts the
whole `credit` on every credited token; `last` is `split` here (every value is located on the answer's tokens).

Input direction (tasks with `direction: input`, inputs.py): the answer is the argument list `ARGS)`; the function runs
on the arguments in the sandbox (all the batch's answers at once, one program per distinct call):
- arguments for which it returns the target: `credit` on the answer tokens (spread as above) and `correct_bonus` on
  the last one, as for a correct value;
- not a call with literal arguments (or empty): `penalty` on the token holding the first offending character
  (inputs.parse_arguments: a non-literal argument's first character, the first character after the closing
  parenthesis, the parser's error position; an unclosed call departs at its end, like an unfinished literal), and
  nothing on the other tokens: a well-formed prefix of arguments says nothing about whether they are right;
- literal arguments on which the function returns another value, raises or times out: `penalty` on the answer's
  tokens (every token an argument is spelled with caused the value; `split`: penalty / n each, `each`: penalty each).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from densecode.domains.codeio.literal import ABS_TOL, REL_TOL, departure, judge, parse_answer
from densecode.errors import DensecodeError
from densecode.rewards.base import ComponentOutput, RewardComponent, check_spread, diag, spread_over
from densecode.rewards.sample import Sample


def answer_of(response: str) -> str:
    """The answer text: the response up to its first newline."""
    return response.split("\n", 1)[0]


class LiteralComponent(RewardComponent):
    name = "literal"

    def __init__(self, credit: float = 1.0, penalty: float = -1.0, correct_bonus: float = 1.0, spread: str = "split",
                 rel_tol: float = REL_TOL, abs_tol: float = ABS_TOL) -> None:
        self.credit, self.penalty, self.correct_bonus = float(credit), float(penalty), float(correct_bonus)
        self.spread = check_spread("literal", spread)
        self.rel_tol, self.abs_tol = float(rel_tol), float(abs_tol)
        self._expected: dict[str, Any] = {}

    def _want(self, task: dict) -> Any:
        text = task.get("expected")
        if not isinstance(text, str):
            raise DensecodeError("the literal reward needs each task's 'expected' value (a codeio task)")
        if text not in self._expected:
            self._expected[text] = parse_answer(text)
        return self._expected[text]

    def __call__(self, samples: list[Sample]) -> list[ComponentOutput]:
        from densecode.domains.codeio.inputs import judge_answers

        inputs = [i for i, s in enumerate(samples) if (s.task or {}).get("direction") == "input" and s.n_tokens]
        verdicts = dict(zip(inputs, judge_answers([samples[i].task for i in inputs],
                                                  [answer_of(samples[i].response) for i in inputs])))
        outs = [self.score_input(s, verdicts[i]) if i in verdicts else self.score(s) for i, s in enumerate(samples)]
        for out in outs:  # the task's verifiable outcome (GRPO's `sequence_reward: outcome`): execution accuracy
            out.outcome = out.info["outcome"] = out.info["correct"]
        return outs

    def score_input(self, s: Sample, verdict) -> ComponentOutput:
        """The input direction's token reward (module doc) from the sandbox's verdict on the answer's arguments."""
        values = np.zeros(s.n_tokens, dtype=np.float32)
        answer = answer_of(s.response)
        lead = len(answer) - len(answer.lstrip())
        end = len(answer.rstrip())
        answer_tokens = s.tokens_in_range(0, end) if end > 0 else []
        n_answer = max(len(answer_tokens), 1)
        info = {"correct": float(verdict.correct), "prefix_fraction": float(verdict.correct)}
        if verdict.correct:
            values[answer_tokens] += self.credit if self.spread == "each" else self.credit / n_answer
            values[answer_tokens[-1]] += self.correct_bonus
            record = diag("literal", (lead, end), answer_tokens, verdict.message, self.credit + self.correct_bonus,
                          outcome=verdict.outcome)
            return ComponentOutput(values, [record], info)
        if verdict.outcome in ("not_a_call", "empty"):
            d = min(max(verdict.parsed.departure or 0, 0), end)
            before = [i for i in answer_tokens if s.token_spans[i][1] <= d]
            hit = self._departure_token(s, d, before)
            values[hit] += self.penalty
            got = answer[d:d + 12]
            message = (f"{verdict.outcome}: {verdict.parsed.why} at character {d} "
                       + (f"({got!r})" if got else "(the answer stops before the call is closed)"))
            record = diag("literal", (d, d + 1), [hit], message, self.penalty, outcome=verdict.outcome, departure=d)
            return ComponentOutput(values, [record], info)
        blamed = answer_tokens or [s.n_tokens - 1]
        spread_over(values, blamed, self.penalty, self.spread)
        record = diag("literal", (lead, end), blamed, f"{verdict.outcome}: {verdict.message}",
                      self.penalty if self.spread != "each" else self.penalty * len(blamed), outcome=verdict.outcome)
        return ComponentOutput(values, [record], info)

    def score(self, s: Sample) -> ComponentOutput:
        values = np.zeros(s.n_tokens, dtype=np.float32)
        if not s.n_tokens:
            return ComponentOutput(values, [], {"correct": 0.0, "prefix_fraction": 0.0})
        want = self._want(s.task)
        answer = answer_of(s.response)
        lead = len(answer) - len(answer.lstrip())
        end = len(answer.rstrip())
        answer_tokens = s.tokens_in_range(0, end) if end > 0 else []
        n_answer = max(len(answer_tokens), 1)
        unit = self.credit if self.spread == "each" else self.credit / n_answer
        correct, outcome = judge(answer, want, self.rel_tol, self.abs_tol)
        records = []
        if correct:
            values[answer_tokens] += unit
            values[answer_tokens[-1]] += self.correct_bonus
            records.append(diag("literal", (lead, end), answer_tokens, "correct value",
                                self.credit + self.correct_bonus, outcome=outcome))
            return ComponentOutput(values, records, {"correct": 1.0, "prefix_fraction": 1.0})
        d = departure(answer, want, self.rel_tol, self.abs_tol)
        d = end if d is None else d  # a spelling literal_eval rejects but the matcher took: departs at its end
        before = [i for i in answer_tokens if s.token_spans[i][1] <= d]
        spread_over(values, before, unit, "each")
        hit = self._departure_token(s, d, before)
        values[hit] += self.penalty
        got = answer[d:d + 12]
        message = (f"{outcome}: departs from a correct literal at character {d} "
                   + (f"({got!r})" if got else "(the answer stops before the literal is complete)"))
        records.append(diag("literal", (d, d + 1), [hit], message, self.penalty, outcome=outcome, departure=d))
        return ComponentOutput(values, records, {"correct": 0.0, "prefix_fraction": d / end if end else 0.0})

    @staticmethod
    def _departure_token(s: Sample, d: int, before: list[int]) -> int:
        """The token holding character d; at the end of the answer, the next token (EOS) or the last one."""
        hit = s.token_at(d)  # the token holding character d (or the first one after it)
        if hit is not None:
            return hit
        after = [i for i in range(s.n_tokens) if s.token_spans[i][0] >= d and i not in before]  # EOS: empty span
        return after[0] if after else s.n_tokens - 1
