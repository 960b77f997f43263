"""codeio's input direction: parsing proposed arguments (literals only, the first offending character known), the
sandbox judge (any input that gives the target counts, the same equality as the forward direction), the token reward
on hand-built token spans, canonical answers passing their own judge, the option, and `densecode eval --canonical`."""

from __future__ import annotations

import json

import numpy as np
import pytest

from densecode.domains import get_domain_class
from densecode.domains.codeio.inputs import (
    call_arguments,
    judge_answers,
    parse_arguments,
)
from densecode.domains.codeio.reward import LiteralComponent
from densecode.domains.codeio.tasks import input_task
from densecode.errors import DensecodeError
from densecode.rewards import Sample

from tests.domains.helpers import pieces_sample

SQUARE = {"task_id": "t/sq", "code": "def sq(x):\n    return x * x\n", "setup": "", "call": "sq(3)", "expected": "9"}
PAIRS = {"task_id": "t/pairs", "code": "def pairs(xs, k=1):\n    return [(a, b) for a, b in zip(xs, xs[k:])]\n",
         "setup": "", "call": "pairs([1, 2, 3])", "expected": "[(1, 2), (2, 3)]"}
RATIO = {"task_id": "t/ratio", "code": "def ratio(a, b):\n    return a / b\n", "setup": "", "call": "ratio(1, 3)",
         "expected": "0.3333333333333333"}


def _input(task: dict) -> dict:
    out = input_task(task)
    assert out is not None
    return out


# --------------------------------------------------------------------------- parsing


@pytest.mark.parametrize("answer, args, kwargs", [
    ("1, 2)", (1, 2), {}),
    ("[1, 2], k=2)", ([1, 2],), {"k": 2}),
    ("'a', (1,), {2}, None)", ("a", (1,), {2}, None), {}),
    ("-5, +3.5)  ", (-5, 3.5), {}),
    ("set())", (set(),), {}),
])
def test_literal_arguments_parse(answer, args, kwargs):
    parsed = parse_arguments(answer, "f")
    assert parsed.ok and parsed.args == args and parsed.kwargs == kwargs


@pytest.mark.parametrize("answer, where", [
    ("1, x)", 3),  # a name is not a literal
    ("len([1]))", 0),  # nor is a call: never evaluated
    ("__import__('os').system('x'))", 0),
    ("1, *xs)", 3),
    ("[1, x])", 4),  # inside an argument: the name itself
    ("1 + 2)", 0),  # an expression of literals is not a literal: its first character
    ("1) + 2", 2),  # text after the call's closing parenthesis
    ("1)(2)", 2),
    ("1) # note", 2),
    ("[1, 2)", 5),  # the wrong closing bracket
    ("{1: 2, 3)", 8),  # "{1: 2, 3: 4}" could still follow "3": the departure is the ")"
    ("1 2)", 2),  # a missing comma: the second value
    ("1,, 2)", 2),
    ("1, 2", 4),  # the call never closed: departs at the end
    ("[1, 2", 5),
    ("'abc", 4),  # inside an unterminated string: the end
    ("é, 1)", 0),  # a non-ASCII name: columns are characters, not bytes
])
def test_malformed_arguments_depart_at_the_first_offending_character(answer, where):
    parsed = parse_arguments(answer, "f")
    assert not parsed.ok and parsed.departure == where, parsed


def test_call_arguments_only_for_literal_calls():
    assert call_arguments("sq(3)") == ("sq", "3)")
    assert call_arguments("pairs([1, 2, 3], k=2)") == ("pairs", "[1, 2, 3], k=2)")
    assert call_arguments("f(x)") is None and call_arguments("set(f(1))") is None and call_arguments("o.f(1)") is None
    assert call_arguments("f(*[1])") is None and call_arguments("f(**{'a': 1})") is None


# --------------------------------------------------------------------------- judge (sandbox)


def test_any_input_that_gives_the_target_is_correct():
    sq, pairs, ratio = _input(SQUARE), _input(PAIRS), _input(RATIO)
    assert sq["prompt"].endswith("assert 9 == sq(") and sq["canonical"] == "3)"
    cases = [(sq, "3)", "success"), (sq, "-3)", "success"), (sq, "9.0 ** 0.5)", "not_a_call"),
             (sq, "4)", "wrong_value"), (sq, "'a')", "runtime_error"), (sq, "3, 4)", "runtime_error"),
             (sq, "x=3)", "success"), (sq, "", "empty"), (sq, "3", "not_a_call"),
             (pairs, "[1, 2, 3])", "success"), (pairs, "[0, 1, 2, 3], k=1)", "wrong_value"),
             (pairs, "(1, 2, 3))", "success"),  # a tuple gives the same list of pairs: also a right input
             (pairs, "'abc')", "wrong_value"),
             (ratio, "2, 6)", "success"), (ratio, "1.0000001, 3)", "success"),  # the forward direction's tolerance
             (ratio, "1, 0)", "runtime_error")]
    verdicts = judge_answers([t for t, _, _ in cases], [a for _, a, _ in cases])
    assert [(a, v.outcome) for (_, a, _), v in zip(cases, verdicts)] == [(a, o) for _, a, o in cases]


def test_a_looping_input_times_out_alone():
    loop = _input({"task_id": "t/loop", "code": "def down(n):\n    while n != 0:\n        n -= 1\n    return n\n",
                   "setup": "", "call": "down(3)", "expected": "0"})
    from densecode.sandbox import Limits, SandboxPool

    with SandboxPool(max_workers=1, limits=Limits(timeout_s=2.0, cpu_s=1.0)) as pool:
        verdicts = judge_answers([loop, loop], ["-1)", "5)"], pool)
    assert [v.outcome for v in verdicts] == ["timeout", "success"]


# --------------------------------------------------------------------------- token reward


def _sample(pieces: list[str], task: dict, eos: bool = False) -> Sample:
    return pieces_sample(task["prompt"], pieces, task, eos)


def test_input_reward_on_hand_built_tokens():
    sq, pairs = _input(SQUARE), _input(PAIRS)
    comp = LiteralComponent(credit=1.0, penalty=-1.0, correct_bonus=1.0, spread="each")
    outs = comp([
        _sample(["-", "3", ")"], sq),  # another correct input: credit everywhere, the bonus on the last token
        _sample(["[1", ", x", "]", ")"], pairs),  # a name: the penalty on " x"'s token only
        _sample(["4", ")"], sq),  # a wrong value: every answer token shares the blame
        _sample(["[1, 2", "]"], pairs, eos=True),  # never closed: the penalty on EOS
        _sample(["3", ")", " +", " 1"], sq),  # text after the call: the penalty on " +"
        _sample(["\n"], sq),  # empty: the first token
    ])
    assert [o.values.tolist() for o in outs] == [[1, 1, 2], [0, -1, 0, 0], [-1, -1], [0, 0, -1], [0, 0, -1, 0], [-1]]
    assert [o.info["correct"] for o in outs] == [1.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    assert outs[1].diagnostics[0]["departure"] == 4 and outs[2].diagnostics[0]["outcome"] == "wrong_value"
    split = LiteralComponent(credit=1.0, penalty=-1.0, correct_bonus=0.5, spread="split")
    right, wrong = split([_sample(["-", "3", ")"], sq), _sample(["4", ")"], sq)])
    assert right.values.sum() == pytest.approx(1.5) and np.allclose(wrong.values, [-0.5, -0.5])
    # forward-direction tasks in the same batch keep their own rule
    forward = {**SQUARE, "prompt": "assert sq(3) =="}
    [out] = comp([_sample([" 9"], forward)])
    assert out.values.tolist() == [2.0]


# --------------------------------------------------------------------------- domain


def test_canonical_inputs_pass_their_own_judge_on_300_test_tasks():
    domain = get_domain_class("codeio")({"direction": "input"})
    tasks = domain.tasks("test", 300, seed=0)
    assert len(tasks) == 300 and all(t["direction"] == "input" and t["prompt"].endswith("(") for t in tasks)
    records = domain.score(tasks, [domain.canonical_response(t) for t in tasks])
    assert [r["outcome"] for r in records] == ["success"] * 300
    wrong = domain.score(tasks[:3], [")", "[[", "'x', 'y', 'z', 'w', 'v')"])
    assert [r["outcome"] for r in wrong] != ["success"] * 3 and all(r["score"] == 0.0 for r in wrong)


@pytest.mark.slow
def test_canonical_inputs_pass_their_own_judge_on_1000_train_tasks():
    domain = get_domain_class("codeio")({"direction": "input"})
    tasks = domain.tasks("train", 1000, seed=3)
    assert len(tasks) == 1000
    assert all(r["outcome"] == "success" for r in domain.score(tasks, [t["canonical"] for t in tasks]))


def test_both_directions_mix_and_the_option_is_checked():
    domain = get_domain_class("codeio")({"direction": "both"})
    tasks = domain.tasks("validation", 60, seed=1)
    kinds = [t.get("direction", "output") for t in tasks]
    assert 10 < kinds.count("input") < 50 and tasks == domain.tasks("validation", 60, seed=1)
    metrics = domain.metrics(domain.score(tasks, [t["canonical"] for t in tasks]))
    assert metrics["accuracy_input"] == metrics["accuracy_output"] == 1.0
    with pytest.raises(DensecodeError, match="tasks.direction"):
        get_domain_class("codeio")({"direction": "sideways"})


def test_eval_canonical_input_direction(tmp_path):
    from densecode.cli import main

    out = tmp_path / "canonical"
    assert main(["eval", "--domain", "codeio", "--canonical", "--tasks", "40", "--set", "tasks.direction=input",
                 "--out", str(out)]) == 0
    scores = json.loads((out / "results.json").read_text())["scores"]
    assert scores["accuracy"] == 1.0 and scores["n_tasks"] == 40.0


def test_codeio_both_directions_train_two_steps_and_explain(tiny_model_dir, tmp_path):
    from densecode.cli import main

    run = tmp_path / "run"
    assert main(["train", "--domain", "codeio", "--model", str(tiny_model_dir), "--output-dir", str(run), "--steps",
                 "2", "--no-progress", "--set", "train.batch_size=4", "--set", "train.eval_tasks=8", "--set",
                 "generation.max_new_tokens=8", "--set", "tasks.direction=both"]) == 0
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert "eval/accuracy_input" in next(r for r in rows if r["kind"] == "eval")
    assert [r["step"] for r in rows if r["kind"] == "train"] == [1, 2]
    page = tmp_path / "explain.html"
    assert main(["explain", "--in", str(run / "rollouts.jsonl"), "--out", str(page)]) == 0
    assert "literal" in page.read_text(encoding="utf-8")
