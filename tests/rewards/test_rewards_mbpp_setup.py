"""MBPP's test_setup_code runs after the candidate's definitions, before the asserts: in eval and reward alike."""

from __future__ import annotations

import os

import numpy as np
import pytest

from densecode.eval.mbpp import load_tasks, mbpp_job
from densecode.rewards import make_sample
from densecode.rewards.mutations import load_mbpp
from densecode.rewards.unit_tests import TestsComponent, _make_job
from densecode.sandbox import Limits, SandboxPool
from densecode.sandbox.asserts import program_with_setup

SETUP_TASKS = (367, 927)  # the two tasks whose test_setup_code uses the solution's own `Node` class


@pytest.fixture(scope="module")
def tok(tiny_model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_dir)


@pytest.fixture(scope="module")
def pool():
    with SandboxPool(max_workers=2, limits=Limits(timeout_s=60.0, cpu_s=60.0)) as p:
        yield p


def _rows(shared_data):
    return load_mbpp(os.path.join(shared_data, "mbpp", "mbpp.jsonl"))


def test_program_with_setup_order():
    assert program_with_setup("class Node: pass", "root = Node()\r\n") == "class Node: pass\nroot = Node()\n"
    assert program_with_setup("x = 1\n", "  \n") == "x = 1\n"
    # The candidate's line numbers are unchanged: tracebacks still point into its own code.
    assert program_with_setup("a\nb\n", "c").splitlines()[:2] == ["a", "b"]


def test_eval_and_reward_build_the_same_program(shared_data, tok):
    data = os.path.join(shared_data, "mbpp", "mbpp.jsonl")
    tasks = {t.number: t for t in load_tasks("mbpp", data, split="all")}
    rows = {r["task_id"]: r for r in _rows(shared_data)}
    for number in SETUP_TASKS:
        task, row = tasks[number], rows[number]
        code = row["code"].replace("\r\n", "\n")
        sample = make_sample("Write it.\n```python\n", tok(code, add_special_tokens=False)["input_ids"], tok,
                             {"tests": row["test_list"], "setup": row["test_setup_code"]})
        reward_job = _make_job(sample, sample.response, None)
        eval_job = mbpp_job(task, sample.response, None)
        assert reward_job.code == eval_job.code and reward_job.setup == eval_job.setup == ""
        assert reward_job.code.index("class Node") < reward_job.code.index("root = Node(1)")


def test_setup_tasks_reference_gets_full_tests_reward(shared_data, tok, pool):
    rows = [r for r in _rows(shared_data) if r["task_id"] in SETUP_TASKS]
    samples = [make_sample("Write it.\n```python\n", tok(r["code"], add_special_tokens=False)["input_ids"], tok,
                           {"tests": r["test_list"], "setup": r["test_setup_code"]}) for r in rows]
    outs = TestsComponent(sandbox=pool)(samples)
    for r, out in zip(rows, outs):
        assert out.info["all_passed"] == 1.0, (r["task_id"], out.diagnostics)
        assert out.values.min() >= 0 and out.values.max() == 1.0
    # A candidate without the `Node` class the setup needs fails all its tests (no crash, no token blamed
    # for the setup's own line).
    broken = make_sample("Write it.\n```python\n", tok("def is_tree_balanced(root):\n    return True\n",
                                                       add_special_tokens=False)["input_ids"], tok,
                         {"tests": rows[0]["test_list"], "setup": rows[0]["test_setup_code"]})
    out = TestsComponent(sandbox=pool)([broken])[0]
    assert out.info["pass_rate"] == 0.0
    assert np.all(out.values == pytest.approx(-0.3))


@pytest.mark.slow
def test_every_mbpp_reference_gets_no_negative_tests_token(shared_data, tok, pool):
    """All 974 references, as the tests reward sees them: every one passes all its asserts."""
    rows = _rows(shared_data)
    samples = [make_sample("Write it.\n```python\n", tok(r["code"], add_special_tokens=False)["input_ids"], tok,
                           {"tests": r["test_list"], "setup": r["test_setup_code"]}) for r in rows]
    outs = TestsComponent(sandbox=pool)(samples)
    failed = [r["task_id"] for r, o in zip(rows, outs) if o.info["all_passed"] != 1.0 or o.values.min() < 0]
    assert failed == []
