"""The generated robotics task suite: format, splits, and every reference passing its checks."""

import ast
import collections
import json

import pytest
from densecode_robosim.checks import judge
from densecode_robosim.tasks import (
    FAMILIES,
    OBJECTS,
    PEOPLE,
    ROOMS,
    STOP_STRINGS,
    RoboTask,
    format_prompt,
    generate_tasks,
)
from densecode_robosim.world import API_NAMES, PERSON_WORDS, RobotError, World


class _CallBudget(Exception):
    pass


def run_reference_in_process(program: str, state: dict, max_calls: int = 300):
    """Trusted in-process driver for OUR generated references only (never model output)."""
    world = World.from_dict(state)
    calls = [0]

    def bind(name):
        def call(*args, **kwargs):
            calls[0] += 1
            if calls[0] > max_calls:
                raise _CallBudget()
            return world.call(name, args, kwargs)

        return call

    namespace = {name: bind(name) for name in API_NAMES}
    exec(compile(program, "<reference>", "exec"), namespace)
    try:
        namespace["task_program"]()
        outcome = "ok"
    except _CallBudget:
        outcome = "timeout"
    except RobotError as exc:
        outcome = f"robot_error: {exc}"
    return outcome, world


def test_prompt_format_is_fixed():
    assert format_prompt("Go to the lobby.") == "# Instruction: Go to the lobby.\ndef task_program():\n"
    assert STOP_STRINGS == ["\n#", "\ndef ", "\nclass ", "\n```", "\nif __name__"]


def test_at_least_20_families_and_vocabulary_has_no_substring_clashes():
    assert len(FAMILIES) >= 20
    names = [w.lower() for w in ROOMS + OBJECTS + PEOPLE] + list(PERSON_WORDS)
    clashes = [(a, b) for a in names for b in names if a != b and a in b]
    assert clashes == []


@pytest.mark.parametrize("split,n", [("train", 520), ("validation", 260), ("test", 300)])
def test_every_reference_passes_its_checks(split, n):
    failures = []
    for task in generate_tasks(split, n=n, seed=0):
        for i, world in enumerate(task.worlds):
            outcome, final = run_reference_in_process(task.program, world["state"])
            expected = "timeout" if world["timeout"] else "ok"
            verdicts = judge(task.checks + world["checks"], final.trace, final, world["state"]["robot"])
            failed = [text for text, ok in verdicts if not ok]
            if outcome != expected or failed:
                failures.append((task.task_id, i, outcome, failed))
    assert failures == []


def test_checks_reject_an_empty_program():
    accepted = []
    for task in generate_tasks("test", n=260, seed=0):
        results = []
        for world in task.worlds:
            outcome, final = run_reference_in_process("def task_program():\n    pass\n", world["state"])
            verdicts = judge(task.checks + world["checks"], final.trace, final, world["state"]["robot"])
            results.append(outcome == ("timeout" if world["timeout"] else "ok") and all(ok for _, ok in verdicts))
        if all(results):
            accepted.append(task.task_id)
    assert accepted == []


def test_references_are_short_regular_python_bodies():
    for task in generate_tasks("train", n=300, seed=1):
        body = task.reference
        assert body.endswith("\n") and body.startswith("    ")
        lines = body.splitlines()
        assert len(lines) <= 15, task.task_id
        for line in lines:
            indent = len(line) - len(line.lstrip(" "))
            assert indent % 4 == 0 and indent >= 4 and "\t" not in line
        assert "'" not in body.replace("n't", ""), task.reference  # double-quoted strings only
        ast.parse(task.program)
        assert task.prompt == format_prompt(task.instruction)
        assert not any(stop in body for stop in STOP_STRINGS)


def test_splits_are_deterministic_disjoint_and_cover_all_families():
    test_a = generate_tasks("test", seed=0)
    test_b = generate_tasks("test", seed=0)
    assert [t.to_dict() for t in test_a] == [t.to_dict() for t in test_b]
    assert len(test_a) >= 200
    assert set(t.family for t in test_a) == set(FAMILIES)
    train = generate_tasks("train", n=2000, seed=0)
    val = generate_tasks("validation", n=200, seed=0)
    pairs = lambda ts: {(t.instruction, t.reference) for t in ts}
    assert not pairs(train) & pairs(test_a)
    assert not pairs(train) & pairs(val)
    assert not pairs(val) & pairs(test_a)
    assert generate_tasks("train", n=50, seed=1)[0].to_dict() != train[0].to_dict()
    counts = collections.Counter(t.family for t in train)
    assert min(counts.values()) >= 2000 // len(FAMILIES) - 1


def test_task_round_trips_through_json():
    task = generate_tasks("validation", n=3, seed=0)[2]
    data = json.loads(json.dumps(task.to_dict()))
    assert RoboTask.from_dict(data) == task
    minimal = RoboTask.from_dict({"task_id": "x", "instruction": "Say hi."})
    assert minimal.prompt == format_prompt("Say hi.") and minimal.worlds == []
    with pytest.raises(ValueError, match="instruction"):
        RoboTask.from_dict({"task_id": "x"})
