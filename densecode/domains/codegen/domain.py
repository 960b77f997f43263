"""The `codegen` domain: write a function (or a small class) from its description and signature; hidden asserts judge
it in the sandbox. Tasks come from the generator (32 families, levels 1-3) or a real-data file (`tasks.path`).

Reward recipe: the code domain's reference weights: lint 0.1, syntax 0.1, dfg 0.1, tests 0.7, kl 0.1 -- the existing
components, unchanged: `tests` puts the pass rate on every code token and the exception penalty on the line that
raised; `syntax` the parser's penalty on the offending token; `lint` each finding on its tokens; `dfg` the data-flow
match with the reference on the tokens of the matched/unmatched edges.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from densecode.domains.base import Domain, DomainOptions, draw_tasks
from densecode.domains.code import CODE_CHAT_INSTRUCTION, code_chat_request
from densecode.domains.codegen.generator import (
    check_split,
    generate_tasks,
    select_families,
)
from densecode.domains.registry import register_domain
from densecode.errors import DensecodeError

FORMATS = ("auto", "mbpp", "mbppplus", "prompt")
STOP = ["\ndef ", "\nclass ", "\nassert", "\nprint(", "\nif __name__", "\n```", "\n# Test", "\n<|", '\n"""']


@dataclass
class CodegenOptions(DomainOptions):
    # Real tasks: a JSONL of MBPP, MBPP+ or prompt+tests rows (paths relative to the working directory).
    # Unset: the generator.
    path: str | None = None
    format: str = "auto"  # auto | mbpp | mbppplus | prompt
    check_canonical: bool = True  # run each real task's canonical answer at load; a failing task is rejected
    strict: bool = False  # a rejected real task is an error, not a warning
    max_inputs: int = 16  # MBPP+ rows: test on the first N of base_input + plus_input (0 = all)
    families: list[str] = field(default_factory=list)  # generator: the families to draw from (empty = all 32)
    levels: list[int] = field(default_factory=lambda: [1, 2, 3])  # generator: the levels to draw from (1 easy - 3 hard)
    n_tests: int = 4  # generator: asserted calls per task (one more call is the docstring's example)


def score_with_tests(tasks: list[dict], responses: list[str], sandbox: Any = None) -> list[dict]:
    """One outcome record per response, judged by the tests component in the sandbox."""
    from densecode.domains.code import text_sample
    from densecode.prompts import is_chat_task
    from densecode.rewards.unit_tests import TestsComponent

    # Completion mode: every codegen prompt (a signature + docstring, or MBPP's docstring) is code the response
    # continues; "auto" would guess from the response's first line and miss e.g. `lo, hi = 0, len(xs)`.
    # A chat answer is judged by its own code (its ```python block, else all of it).
    samples = [text_sample(t["prompt"], r, t, code_regions="chat" if is_chat_task(t) else "completion")
               for t, r in zip(tasks, responses)]
    records = []
    for task, out in zip(tasks, TestsComponent(sandbox=sandbox)(samples)):
        passed = float(out.outcome == 1.0)  # the typed verdict: the pass rate (None: no tests)
        judged = next((d.get("outcome") for d in out.diagnostics if d.get("rule") == "tests"), None)
        records.append({"task_id": task.get("task_id"), "level": task.get("level"), "family": task.get("family"),
                        "outcome": "success" if passed else str(judged or "failure"),
                        "score": out.outcome or 0.0, "all_passed": passed,
                        "pass_rate": out.outcome or 0.0,
                        "exception": float(out.ran_cleanly is False)})
    return records


@register_domain
class CodegenDomain(Domain):
    name = "codegen"
    description = "write a function or small class from its description and signature; hidden asserts judge it"
    Options = CodegenOptions
    default_weights: ClassVar[dict[str, float]] = {"lint": 0.1, "syntax": 0.1, "dfg": 0.1, "tests": 0.7, "kl": 0.1}
    stop = STOP
    headline_metric = "pass_rate"
    sampled_metric_names = ("pass_rate",)
    chat_instruction = CODE_CHAT_INSTRUCTION

    def __init__(self, options: Any = None, **kwargs):
        super().__init__(options, **kwargs)
        opts = self.options
        if opts.format not in FORMATS:
            raise DensecodeError(f"tasks.format must be one of {', '.join(FORMATS)}; got {opts.format!r}")
        if opts.n_tests < 1:
            raise DensecodeError(f"tasks.n_tests must be >= 1; got {opts.n_tests}")
        self.families = select_families(opts.families, opts.levels)
        self._real: dict[str, list[dict]] | None = None

    # ------------------------------------------------------------------ tasks

    def prepare(self) -> None:
        if self.options.path:
            self._real_tasks()

    def _real_tasks(self) -> dict[str, list[dict]]:
        if self._real is None:
            from densecode.domains.codegen.loader import load_tasks

            opts = self.options
            tasks = load_tasks(opts.path, opts.format, check=opts.check_canonical, strict=opts.strict,
                               max_inputs=opts.max_inputs)
            self._real = {s: [t for t in tasks if t["split"] == s] for s in ("train", "validation", "test")}
            if not self._real["train"]:
                raise DensecodeError(f"{opts.path}: no training tasks in the file (MBPP numbers 601-974, or rows "
                                     "whose prompt hashes to the train split)")
        return self._real

    def tasks(self, split: str, n: int, seed: int) -> list[dict]:
        check_split(split)
        if not self.options.path:
            return generate_tasks(split, n, seed, self.families, self.options.n_tests)
        pool = self._real_tasks()[split]
        return draw_tasks(pool, split, n, seed)

    def chat_request(self, task: dict) -> str:
        return code_chat_request(task)

    # ------------------------------------------------------------------ eval

    def score(self, tasks: list[dict], responses: list[str]) -> list[dict]:
        return score_with_tests(tasks, responses)

    def metrics(self, records: list[dict]) -> dict[str, float]:
        n = max(len(records), 1)
        out = {
            "pass_rate": sum(r["all_passed"] for r in records) / n,
            "test_pass_fraction": sum(r["pass_rate"] for r in records) / n,
            "executability": sum(1.0 - r["exception"] for r in records) / n,
            "n_tasks": float(len(records)),
        }
        for level in (1, 2, 3):
            at = [r for r in records if r.get("level") == level]
            if at:
                out[f"pass_rate_level{level}"] = sum(r["all_passed"] for r in at) / len(at)
        for outcome in sorted({str(r.get("outcome")) for r in records}):
            out[f"outcome/{outcome}"] = sum(str(r.get("outcome")) == outcome for r in records) / n
        return out
