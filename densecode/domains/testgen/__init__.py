"""The testgen domain: given a function, write `assert` lines that test it.

Only asserts that hold on the reference count; the score is the line + branch coverage of the reference by the
holding asserts (coverage.py's definitions, traced in the sandbox), and the mutation score (the share of
non-equivalent mutants the asserts kill) is reported beside it. Tasks: generated from densecode's function library
(`generator.py`), or MBPP's functions with MBPP's asserts as canonical answers (`tasks.path`, `loader.py`).
Reward recipe: testgen 1.0 (its token reward, reward.py), syntax 0.1, kl 0.1.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from densecode.domains.base import DomainOptions
from densecode.domains.generated import GeneratedOrFileDomain
from densecode.domains.registry import register_domain

OUTCOMES = ("success", "incomplete", "failing_assert", "no_asserts", "judge_error")


@dataclass
class TestgenOptions(DomainOptions):
    __test__ = False  # not a pytest class

    # Real data: an MBPP jsonl (reference `code` + `test_list`); empty = generated tasks.
    path: str | None = None
    limit: int = 0  # use only the first N rows of `path` (0 = all)
    levels: list[int] = field(default_factory=lambda: [1, 2, 3])  # generated tasks: difficulty levels drawn


@register_domain
class TestgenDomain(GeneratedOrFileDomain):
    __test__ = False  # not a pytest class
    name = "testgen"
    description = "assert statements for a function, scored by the coverage and mutants they reach (sandbox)"
    Options = TestgenOptions
    default_weights: ClassVar[dict[str, float]] = {"testgen": 1.0, "syntax": 0.1, "kl": 0.1}
    # syntax split: with `each` its +1 per valid token (x 0.1) would outweigh the coverage reward on a long answer
    # and pay for asserts that test nothing.
    default_component_options: ClassVar[dict[str, dict]] = {"syntax": {"spread": "split"}}
    components: ClassVar[dict[str, str]] = {"testgen": "densecode.domains.testgen.reward:TestgenComponent"}
    stop: ClassVar[list[str]] = ["\n\n", "\ndef ", "\nclass ", "\n#", "\n```", "\nif __name__", "\n<|"]
    headline_metric = "coverage"
    sampled_metric_names = ("success_rate", "coverage", "mutation_score")
    chat_instruction = ("Write assert statements that test the function below, as its comment asks: one "
                        "`assert <call> == <expected value>` per line. Reply with only the asserts in one ```python "
                        "code block.")

    task_generator = "densecode.domains.testgen.generator:generate_tasks"
    task_loader = "densecode.domains.testgen.loader:load_tasks"
    split_key_text = "a hash of each task"

    def score(self, tasks: list[dict], responses: list[str]) -> list[dict]:
        from densecode.domains.code import text_sample
        from densecode.domains.testgen.judge import judge
        from densecode.domains.testgen.reward import response_code
        from densecode.prompts import is_chat_task

        # A chat answer's asserts are its code (its ```python block, else all of it), as the reward reads them.
        codes = [response_code(text_sample(t["prompt"], r, t))[0] if is_chat_task(t) else r
                 for t, r in zip(tasks, responses)]
        records = []
        for task, report in zip(tasks, judge(tasks, codes)):
            cov = report.coverage
            n_tests = report.n_holding + report.n_failing
            records.append({"task_id": task.get("task_id"), "outcome": report.outcome(task.get("target_coverage", 1.0)),
                            "score": cov.total if cov else 0.0, "coverage": cov.total if cov else 0.0,
                            "line_coverage": cov.line if cov else 0.0, "branch_coverage": cov.branch if cov else 0.0,
                            "mutation_score": report.mutation_score, "n_asserts": n_tests,
                            "hold_rate": report.n_holding / n_tests if n_tests else 0.0, "level": task.get("level"),
                            "error": report.error})
        return records

    def metrics(self, records: list[dict]) -> dict[str, float]:
        n = max(len(records), 1)
        out = {"n_tasks": float(len(records)),
               "success_rate": sum(r["outcome"] == "success" for r in records) / n}
        for key in ("coverage", "line_coverage", "branch_coverage", "mutation_score", "hold_rate", "n_asserts"):
            out[key] = sum(float(r[key]) for r in records) / n
        out["score"] = out["coverage"]
        for outcome in OUTCOMES:
            out[f"outcome/{outcome}"] = sum(r["outcome"] == outcome for r in records) / n
        return out
