"""The `codeio` domain: given a function and a call, predict the returned value as a Python literal -- or, with
`tasks.direction: input` (or `both`), given the returned value, propose the call's arguments (inputs.py).

Judge: `ast.literal_eval` of the answer equals the value computed by running the code in the sandbox (floats within
a tolerance, sets and dicts without order; literal.py). Reward recipe: the `literal` component (credit up to the first
departing character, the penalty on the token holding it; reward.py) and kl. The answer is data, not code: the code
components (syntax, lint, dfg, tests) do not apply.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, ClassVar

from densecode.domains.base import Domain, DomainOptions, draw_tasks
from densecode.domains.codegen.generator import check_split, select_families
from densecode.domains.registry import register_domain
from densecode.errors import DensecodeError

DIRECTIONS = ("output", "input", "both")


@dataclass
class CodeioOptions(DomainOptions):
    # Real tasks: MBPP / MBPP+ rows (their reference solutions called on their test inputs) or rows with `code` and
    # `call`. Unset: generated from the codegen families' reference functions.
    path: str | None = None
    strict: bool = False  # a rejected real task is an error, not a warning
    max_calls: int = 3  # calls per real row (MBPP: its asserts; MBPP+: its base inputs)
    families: list[str] = field(default_factory=list)  # generator: codegen families (empty = all function families)
    levels: list[int] = field(default_factory=lambda: [1, 2, 3])  # generator: the levels to draw from (1 easy - 3 hard)
    # output: predict the returned value; input: given the returned value, propose the argument(s) (judged by running
    # the function on them in the sandbox); both: each task one or the other, by a hash of its id (about half each)
    direction: str = "output"


@register_domain
class CodeioDomain(Domain):
    name = "codeio"
    description = "predict the value a call returns, as a Python literal; judged against the value run in the sandbox"
    Options = CodeioOptions
    default_weights: ClassVar[dict[str, float]] = {"literal": 1.0, "kl": 0.1}
    components: ClassVar[dict[str, str]] = {"literal": "densecode.domains.codeio.reward:LiteralComponent"}
    default_component_options: ClassVar[dict[str, dict]] = {}
    stop = ["\n"]
    headline_metric = "accuracy"
    sampled_metric_names = ("accuracy", "prefix_fraction")
    # The answer is the reply's first line (reward.py's answer_of), as in completion style: asked for bare.
    chat_instruction = ("Reply with only the text that completes the last line below (a Python literal, or the "
                        "call's arguments and its closing parenthesis, as the comment asks), on one line, without a "
                        "code block or explanation.")

    def __init__(self, options: Any = None, **kwargs):
        super().__init__(options, **kwargs)
        if self.options.max_calls < 1:
            raise DensecodeError(f"tasks.max_calls must be >= 1; got {self.options.max_calls}")
        if self.options.direction not in DIRECTIONS:
            raise DensecodeError(f"tasks.direction must be one of {', '.join(DIRECTIONS)}; "
                                 f"got {self.options.direction!r}")
        self.families = [f for f in select_families(self.options.families, self.options.levels, kinds=("function",))]
        self._real: dict[str, list[dict]] | None = None

    def prepare(self) -> None:
        if self.options.path:
            self._real_tasks()

    def _real_tasks(self) -> dict[str, list[dict]]:
        if self._real is None:
            from densecode.domains.codeio.tasks import load_tasks

            tasks = load_tasks(self.options.path, strict=self.options.strict, max_calls=self.options.max_calls)
            self._real = {s: [t for t in tasks if t["split"] == s] for s in ("train", "validation", "test")}
            if not self._real["train"]:
                raise DensecodeError(f"{self.options.path}: no training tasks in the file")
        return self._real

    def tasks(self, split: str, n: int, seed: int) -> list[dict]:
        check_split(split)
        if self.options.direction == "output":
            return self._output_tasks(split, n, seed)
        from densecode.domains.codeio.tasks import input_task

        # Output-direction draws turned around; a call with a non-literal argument has no input task, so draw more.
        for size in (n, 2 * n, 4 * n, 8 * n):
            out = [self._directed(t, input_task) for t in self._output_tasks(split, size, seed)]
            out = [t for t in out if t is not None]
            if len(out) >= n:
                return out[:n]
        if not out:
            raise DensecodeError(f"codeio: no {split} task has a call with literal arguments, so none has an input "
                                 "direction; use tasks.direction: output")
        return out  # fewer than asked: every call of the file was used

    def _directed(self, task: dict, input_task) -> dict | None:
        if self.options.direction == "input":
            return input_task(task)
        flip = int(hashlib.sha256(task["task_id"].encode()).hexdigest(), 16) % 2  # both: about half each
        return (input_task(task) or task) if flip else task

    def _output_tasks(self, split: str, n: int, seed: int) -> list[dict]:
        if not self.options.path:
            from densecode.domains.codeio.tasks import generate_tasks

            return generate_tasks(split, n, seed, self.families)
        pool = self._real_tasks()[split]
        return draw_tasks(pool, split, n, seed)

    def score(self, tasks: list[dict], responses: list[str]) -> list[dict]:
        from densecode.domains.codeio.inputs import judge_answers
        from densecode.domains.codeio.literal import departure, judge, parse_answer
        from densecode.domains.codeio.reward import answer_of

        inputs = [i for i, t in enumerate(tasks) if t.get("direction") == "input"]
        verdicts = dict(zip(inputs, judge_answers([tasks[i] for i in inputs],
                                                  [answer_of(responses[i]) for i in inputs])))
        records = []
        for k, (task, response) in enumerate(zip(tasks, responses)):
            if k in verdicts:
                v = verdicts[k]
                records.append({"task_id": task.get("task_id"), "level": task.get("level"),
                                "family": task.get("family"), "direction": "input", "outcome": v.outcome,
                                "score": float(v.correct), "prefix_fraction": float(v.correct)})
                continue
            answer = answer_of(response)
            want = parse_answer(task["expected"])
            ok, outcome = judge(answer, want)
            if not answer.strip():
                outcome = "empty"
            d = None if ok else departure(answer, want)
            end = len(answer.rstrip())
            records.append({"task_id": task.get("task_id"), "level": task.get("level"), "family": task.get("family"),
                            "direction": "output", "outcome": outcome, "score": float(ok),
                            "prefix_fraction": 1.0 if ok else ((d if d is not None else end) / end if end else 0.0)})
        return records

    def metrics(self, records: list[dict]) -> dict[str, float]:
        n = max(len(records), 1)
        out = {"accuracy": sum(r["score"] for r in records) / n,
               "prefix_fraction": sum(r["prefix_fraction"] for r in records) / n,
               "n_tasks": float(len(records))}
        out["success_rate"] = out["accuracy"]
        for direction in ("output", "input"):
            at = [r for r in records if r.get("direction") == direction]
            if at and len(at) < len(records):  # both directions in one set: each one's accuracy too
                out[f"accuracy_{direction}"] = sum(r["score"] for r in at) / len(at)
        for level in (1, 2, 3):
            at = [r for r in records if r.get("level") == level]
            if at:
                out[f"accuracy_level{level}"] = sum(r["score"] for r in at) / len(at)
        for outcome in sorted({str(r.get("outcome")) for r in records}):
            out[f"outcome/{outcome}"] = sum(str(r.get("outcome")) == outcome for r in records) / n
        return out
