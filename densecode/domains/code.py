"""The code domain: write a function from a prompt; hidden unit tests judge it (MBPP-style jsonl, any prompt+tests rows).

Rows: MBPP fields (`text`, `code`, `test_list`, `test_setup_code`) or any rows with `prompt` + `tests` (a list of
assert strings; optional `setup`, `reference`, `entry_point`). An MBPP file trains on MBPP's train split (task ids
601-974) and evaluates on its validation split (511-600) unless `mbpp_splits: false`; otherwise, without `eval_path`,
the last `eval_fraction` of the rows (in file order) is held out.
Reward recipe (the dense-reward paper's reference weights; docs/rewards.md): lint 0.1, syntax 0.1, dfg 0.1, tests 0.7, kl 0.1.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from densecode.domains.base import Domain, DomainOptions
from densecode.domains.registry import register_domain
from densecode.errors import DensecodeError
from densecode.jsonl import numbered, read_jsonl
from densecode.prompts import fenced

# text_sample lives with Sample (densecode.rewards.sample); imported from here too.
from densecode.rewards.sample import text_sample

FORMATS = ("auto", "mbpp", "prompt")
TRAIN_SAMPLING = ("uniform", "signal")
POOL_INDEX = "_pool_index"  # a training task's index in the pool (train_sampling: signal counts its outcomes)


@dataclass
class CodeOptions(DomainOptions):
    # A jsonl of tasks: MBPP rows or prompt+tests rows (relative paths from the working directory).
    path: str | None = None
    eval_path: str | None = None  # held-out tasks; default: MBPP's validation split, else the file's tail
    eval_fraction: float = 0.2  # without eval_path or MBPP splits: the share of rows (from the end) held out
    limit: int = 0  # use only the first N training tasks (0 = all)
    format: str = "auto"  # auto | mbpp | prompt
    mbpp_splits: bool = True  # an MBPP file: train on 601-974, evaluate on 511-600
    # How training prompts are drawn: uniform (with replacement), or signal: weighted by the chance that a prompt's
    # next group of samples is mixed (pass and fail), from its pass/fail counts so far, so prompts that every sample
    # fails are drawn less once seen (densecode/domains/prompt_sampling.py). For group credit (outcome, GRPO).
    train_sampling: str = "uniform"


def code_task_from_row(row: dict, where: str, fmt: str = "auto") -> tuple[str, dict]:
    """(prompt, task dict for the reward components) from an MBPP-style or prompt+tests row."""
    if fmt == "mbpp" or (fmt == "auto" and "text" in row and "test_list" in row):
        from densecode.eval.mbpp import completion_prompt, mbpp_task_from_record

        t = mbpp_task_from_record(row, where)
        task = {"task_id": t.task_id, "tests": list(t.tests), "setup": t.setup, "reference": t.canonical,
                "entry_point": t.entry_point}
        return completion_prompt(t, []), task
    if "prompt" not in row or not ("tests" in row or "test_list" in row):
        raise DensecodeError(f"{where}: a task row needs 'prompt' and 'tests' (a list of assert statements), "
                             f"or MBPP fields 'text', 'code', 'test_list'; got keys {sorted(row)}")
    tests = row.get("tests", row.get("test_list"))
    if isinstance(tests, str):
        tests = [tests]
    if not isinstance(tests, list) or not all(isinstance(t, str) for t in tests):
        raise DensecodeError(f"{where}: 'tests' must be a list of assert statements (strings)")
    task = {k: row[k] for k in ("task_id", "setup", "reference", "entry_point", "inputs", "expected", "atol")
            if k in row}
    task["tests"] = tests
    return str(row["prompt"]), task


def _mbpp_number(row: dict) -> int | None:
    if "text" not in row or "test_list" not in row:
        return None
    try:
        return int(str(row.get("task_id")).rsplit("/", 1)[-1])
    except ValueError:
        return None


def _read_items(path: Path, fmt: str) -> tuple[list[tuple[str, dict]], list[dict]]:
    rows = read_jsonl(path, what="tasks", hint="MBPP rows or prompt+tests rows, e.g. "
                                               "--set tasks.path=../shared/data/mbpp/mbpp.jsonl")
    return [code_task_from_row(r, where, fmt) for where, r in numbered(path, rows)], rows


CODE_CHAT_INSTRUCTION = ("Complete the Python code below: write the whole function (or class) with the same name and "
                         "parameters, doing what its docstring says. Reply with the code in one ```python code block.")


def code_chat_request(task: dict) -> str:
    """The chat user turn of a write-a-function task (code, codegen). A prompt that shows the signature is asked
    for as it stands; an MBPP-style statement gets MBPP's chat request, which names the signature the tests call
    (taken from the reference), since the tests fail with NameError under any other name."""
    prompt, entry = task["prompt"], task.get("entry_point")
    if entry and not re.search(rf"^\s*(async\s+def|def|class)\s+{re.escape(entry)}\b", prompt, flags=re.MULTILINE):
        from densecode.eval.mbpp import chat_user_message

        return chat_user_message(prompt, task.get("reference") or "", entry)
    return f"{CODE_CHAT_INSTRUCTION}\n\n{fenced(prompt)}"


@register_domain
class CodeDomain(Domain):
    name = "code"
    description = "functions from a prompt, judged by unit tests in the sandbox (MBPP-style jsonl)"
    Options = CodeOptions
    default_weights: ClassVar[dict[str, float]] = {"lint": 0.1, "syntax": 0.1, "dfg": 0.1, "tests": 0.7, "kl": 0.1}
    stop: ClassVar[list[str]] = ["\nassert", "\n\"\"\"", "\nprint(", "\nif __name__", "\n```", "\n# Test", "\n<|"]
    headline_metric = "pass_rate"
    sampled_metric_names = ("pass_rate",)
    chat_instruction = CODE_CHAT_INSTRUCTION

    def __init__(self, options: Any = None, **kwargs):
        super().__init__(options, **kwargs)
        if self.options.format not in FORMATS:
            raise DensecodeError(f"tasks.format must be one of {', '.join(FORMATS)}; got {self.options.format!r}")
        if self.options.train_sampling not in TRAIN_SAMPLING:
            raise DensecodeError(f"tasks.train_sampling must be one of {', '.join(TRAIN_SAMPLING)}; got "
                                 f"{self.options.train_sampling!r}")
        self._split_items: tuple[list, list] | None = None
        self._sampler = None  # SignalSampler over the training items (train_sampling: signal)

    def prepare(self) -> None:
        self._items()

    def _items(self) -> tuple[list, list]:
        """(train, eval) items, read on first use (explaining or scoring text needs no task file)."""
        if self._split_items is not None:
            return self._split_items
        opts = self.options
        if not opts.path:
            raise DensecodeError("the code domain needs a tasks file: set tasks.path (YAML) or "
                                 "--set tasks.path=FILE.jsonl (MBPP-style or prompt+tests rows)")
        path = Path(opts.path)
        items, rows = _read_items(path, opts.format)
        mbpp_ids = [_mbpp_number(r) for r in rows]
        if opts.mbpp_splits and not opts.eval_path and all(n is not None for n in mbpp_ids):
            # MBPP's conventional splits: train on 601-974, hold out validation 511-600 (never the test split).
            from densecode.eval.mbpp import MBPP_SPLITS

            train = [it for it, n in zip(items, mbpp_ids) if n in MBPP_SPLITS["train"]]
            held_out = [it for it, n in zip(items, mbpp_ids) if n in MBPP_SPLITS["validation"]]
        elif opts.eval_path:
            held_out, _ = _read_items(Path(opts.eval_path), opts.format)
            train = items
        else:
            k = max(1, round(len(items) * float(opts.eval_fraction))) if len(items) > 1 else 0
            train, held_out = items[: len(items) - k], items[len(items) - k:]
        if opts.limit:
            train = train[: opts.limit]
        if not train:
            raise DensecodeError(f"{path}: no training tasks left after holding out the eval split")
        self._split_items = (train, held_out)
        return self._split_items

    def tasks(self, split: str, n: int, seed: int) -> list[dict]:
        train, held_out = self._items()
        if split == "train":
            rng = random.Random(seed)
            picks = [train[rng.randrange(len(train))] for _ in range(n)]
        else:
            picks = held_out[:n] if n > 0 else list(held_out)
        return [{**t, "prompt": p} for p, t in picks]

    def train_batch(self, n: int, seed: int) -> tuple[list[str], list[dict]]:
        seed = seed + int(self.options.train_seed)
        if self.options.train_sampling == "signal":
            train = self._items()[0]
            picks = self._signal_sampler().draw(n, seed)
            tasks = [{**train[i][1], "prompt": train[i][0], POOL_INDEX: i} for i in picks]
        else:
            tasks = self.tasks("train", n, seed)
        tasks = self.style_tasks(tasks)
        return [t.pop("prompt") for t in tasks], tasks

    def _signal_sampler(self):
        from densecode.domains.prompt_sampling import SignalSampler

        if self._sampler is None:
            self._sampler = SignalSampler(len(self._items()[0]))
        return self._sampler

    def on_step_end(self, view, batch, stats: dict) -> dict[str, float]:
        if self.options.train_sampling != "signal":
            return {}
        from densecode.rl.grpo import outcome_of, sample_outputs

        outcomes = [outcome_of(o) for o in sample_outputs(batch.reward_outputs, len(batch.tasks))]
        sampler = self._signal_sampler()
        sampler.observe([t.get(POOL_INDEX) for t in batch.tasks], outcomes, view.samples_per_prompt)
        return {f"tasks/{k}": v for k, v in sampler.stats().items()}

    def state_dict(self) -> dict | None:
        return {"signal_sampler": self._sampler.state_dict()} if self._sampler is not None else None

    def load_state_dict(self, state: dict) -> None:
        if state and "signal_sampler" in state:
            self._signal_sampler().load_state_dict(state["signal_sampler"])

    def chat_request(self, task: dict) -> str:
        return code_chat_request(task)

    def canonical_response(self, task: dict) -> str | None:
        return task.get("reference")

    def score(self, tasks: list[dict], responses: list[str]) -> list[dict]:
        from densecode.rewards.unit_tests import TestsComponent

        samples = [text_sample(t["prompt"], r, t) for t, r in zip(tasks, responses)]
        records = []
        for out in TestsComponent()(samples):
            passed = float(out.outcome == 1.0)  # the typed verdict: the pass rate (None: no tests)
            judged = next((d.get("outcome") for d in out.diagnostics if d.get("rule") == "tests"), None)
            records.append({"outcome": "success" if passed else str(judged or "failure"),
                            "score": out.outcome or 0.0, "all_passed": passed,
                            "pass_rate": out.outcome or 0.0,
                            "exception": float(out.ran_cleanly is False)})
        return records

    def metrics(self, records: list[dict]) -> dict[str, float]:
        n = max(len(records), 1)
        return {
            "pass_rate": sum(r["all_passed"] for r in records) / n,
            "test_pass_fraction": sum(r["pass_rate"] for r in records) / n,
            "executability": sum(1.0 - r["exception"] for r in records) / n,
            "n_tasks": float(len(records)),
        }
