"""testgen: generator, sandbox judge (coverage against coverage.py, mutants), token reward, MBPP loader, training."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from densecode.domains.testgen import TestgenDomain
from densecode.domains.testgen.analysis import code_shape, coverage_numbers
from densecode.domains.testgen.asserts import parse_asserts
from densecode.domains.testgen.generator import TESTABLE, generate_tasks, split_of
from densecode.domains.testgen.harness import Tracer
from densecode.domains.testgen.judge import judge
from densecode.domains.testgen.library import ACCS, ITEMS
from densecode.domains.testgen.mutants import make_mutants
from densecode.domains.testgen.reward import TestgenComponent
from densecode.errors import DensecodeError
from densecode.rewards import Sample
from densecode.sandbox import SandboxPool


@pytest.fixture(scope="module")
def pool():
    with SandboxPool(max_workers=2) as p:
        yield p


def char_sample(prompt: str, response: str, task: dict) -> Sample:
    """One token per character: a diagnostic's span names exactly its tokens."""
    n = len(response)
    return Sample(prompt=prompt, response=response, token_ids=list(range(n)),
                  token_spans=[(i, i + 1) for i in range(n)], code_regions=[(0, n)], task=task)


SIGN = "def sign(x):\n    if x > 0:\n        return 1\n    elif x < 0:\n        return -1\n    return 0\n"
SIGN_TASK = {"reference": SIGN, "entry_point": "sign", "inputs": ["[3]", "[-2]", "[0]"], "target_coverage": 1.0,
             "prompt": "# tests\n"}


# ----------------------------------------------------------------------------- generator


def test_generator_is_deterministic_with_disjoint_hash_splits():
    a = generate_tasks("train", 40, seed=3)
    assert a == generate_tasks("train", 40, seed=3)
    assert a != generate_tasks("train", 40, seed=4)
    refs = {s: {t["reference"] for t in generate_tasks(s, 40, seed=0)} for s in ("train", "validation", "test")}
    assert not (refs["train"] & refs["test"]) and not (refs["train"] & refs["validation"])
    assert not (refs["validation"] & refs["test"])
    for t in a:
        assert split_of(t["reference"]) == "train" and t["level"] in (1, 2, 3) and t["prompt"].endswith("# Tests\n")
    assert {t["level"] for t in a} == {1, 2, 3}


def test_thousands_of_distinct_train_functions():
    """Every name/constant choice of every testable template, rendered: the train split alone has thousands."""
    sources = set()
    for t in TESTABLE:
        arg_choices = itertools.product(*t.arg_names)
        for fn, args, acc, item, k, m in itertools.product(t.names, arg_choices, ACCS, ITEMS, t.k, t.m):
            params = {"fn": fn, "a": args[0], "b": args[1] if len(args) > 1 else "y", "acc": acc, "item": item,
                      "k": k, "m": m}
            sources.add(t.source.format(**params))
    assert sum(split_of(s) == "train" for s in sources) >= 2000


# ----------------------------------------------------------------------------- canonical answers


def _check_canonical(tasks, pool):
    reports = judge(tasks, [t["canonical"] for t in tasks], pool)
    bad = [(t["task_id"], r.outcome(t["target_coverage"]), r.error) for t, r in zip(tasks, reports)
           if r.outcome(t["target_coverage"]) != "success"]
    assert bad == []
    assert np.mean([r.coverage.total for r in reports]) > 0.95
    return reports


def test_canonical_asserts_pass_their_judge_on_300_test_tasks(pool):
    tasks = generate_tasks("test", 300, seed=0)
    reports = _check_canonical(tasks, pool)
    assert np.mean([r.mutation_score for r in reports]) > 0.5  # the canonical asserts kill most live mutants


def test_simple_canonical_asserts_pass_their_judge_and_are_shorter(pool):
    """The embedded model's corpus trains on `simple_canonical`: the shortest holding asserts reaching the canonical
    coverage. They must be judged `success` like the canonical ones, and be shorter."""
    tasks = generate_tasks("train", 300, seed=2)
    reports = judge(tasks, [t["simple_canonical"] for t in tasks], pool)
    bad = [(t["task_id"], r.outcome(t["target_coverage"])) for t, r in zip(tasks, reports)
           if r.outcome(t["target_coverage"]) != "success"]
    assert bad == []
    simple = sum(len(t["simple_canonical"]) for t in tasks)
    assert simple < 0.6 * sum(len(t["canonical"]) for t in tasks)
    assert all(len(t["simple_canonical"].splitlines()) <= len(t["canonical"].splitlines()) + 2 for t in tasks)


def test_simplest_cover_prefers_short_asserts_and_drops_redundant_ones():
    from densecode.domains.testgen.generator import simplest_cover

    asserts = ["assert f([1, 2, 3, 4]) == 4", "assert f([]) == 0", "assert f([5]) == 5", "assert f([2, 1]) == 2",
               "assert f([9, 9]) == 9"]
    units = [{1, 2, 3, 4}, {1}, {1, 2}, {1, 2, 3, 4}, {1, 2, 3}]
    holds = [True, True, True, True, False]
    # Unit 4 needs a long input: the shorter of the two that reach it; then nothing else is needed.
    assert simplest_cover(asserts, units, holds, {1, 2, 3, 4}) == [3]
    assert simplest_cover(asserts, units, holds, {1, 2}) == [2]
    # An assert that does not hold is never chosen; an uncoverable target gives None.
    assert simplest_cover(asserts, units, [False, True, True, False, True], {1, 2, 3, 4}) is None
    assert simplest_cover(asserts, [{1}, {2}, {1, 2}, {3}, set()], [True] * 5, {1, 2, 3}) == [2, 3]


@pytest.mark.slow
def test_canonical_asserts_pass_their_judge_on_1000_train_tasks(pool):
    _check_canonical(generate_tasks("train", 1000, seed=1), pool)


# ----------------------------------------------------------------------------- coverage vs coverage.py

PROGRAMS = [
    (SIGN, "assert sign(3) == 1\nassert sign(0) == 0\n"),
    (("def f(xs, k):\n    out = []\n    for x in xs:\n        if x > k:\n            out.append(x)\n"
      "        elif x == k:\n            continue\n    while k > 0:\n        k -= 2\n    return [y for y in out\n"
      "            if y % 2]\n"), "assert f([1, 5, 2, 7], 2) == [5, 7]\nassert f([], 0) == []\n"),
    (("def g(n):\n    try:\n        return 10 // n\n    except ZeroDivisionError:\n        return None\n"
      "def h(n):\n    return g(n) if n else g(n)\n"), "assert h(2) == 5\nassert h(0) is None\n"),
    ("def gen(n):\n    for i in range(n):\n        yield i * 2\ndef total(n):\n    return sum(gen(n))\n",
     "assert total(3) == 6\n"),
]


@pytest.mark.parametrize("reference,asserts", PROGRAMS)
def test_settrace_tracer_matches_coverage_py(reference, asserts, tmp_path):
    coverage = pytest.importorskip("coverage")
    path = tmp_path / "prog.py"
    source = reference + asserts
    path.write_text(source)
    cov = coverage.Coverage(data_file=None, branch=True, include=[str(path)])
    cov.start()
    try:
        exec(compile(source, str(path), "exec"), {"__name__": "prog"})  # noqa: S102 - our own test program
    finally:
        cov.stop()
    data = cov.get_data()
    tracer = Tracer([str(path)], str(path), budget=10 ** 6)
    with tracer:
        exec(compile(source, str(path), "exec"), {"__name__": "prog"})  # noqa: S102 - our own test program
    assert tracer.lines == set(data.lines(str(path)))
    assert tracer.arcs == set(data.arcs(str(path)))
    # Our numbers with nothing left out are coverage.py's own total.
    shape = code_shape(source)
    lines, arcs = shape.covered(tracer.lines, tracer.arcs)
    ours = coverage_numbers(shape, set(), lines, arcs)
    theirs = cov._analyze(str(path)).numbers
    assert ours.total * 100 == pytest.approx(theirs.pc_covered)
    assert ours.n_statements == theirs.n_statements and ours.n_branches == theirs.n_branches


# ----------------------------------------------------------------------------- judge and mutants


def test_mutants_cover_each_kind_and_equivalent_ones_are_dropped(pool):
    kinds = {m["kind"] for m in make_mutants(SIGN + "def twice(x):\n    return x * 2 == x + x\n", limit=50)}
    assert kinds == {"operator", "off_by_one", "constant", "return"}
    # x * 1 -> x // 1 behaves the same on ints: equivalent on the sample, dropped.
    task = {"reference": "def one(x):\n    return x * 1\n", "entry_point": "one", "inputs": ["[2]", "[-3]"],
            "target_coverage": 1.0}
    [report] = judge([task], ["assert one(2) == 2\n"], pool)
    assert report.n_equivalent >= 1 and report.n_mutants >= 1 and report.mutation_score == 1.0


def test_judge_coverage_and_kills(pool):
    partial, full = judge([SIGN_TASK, SIGN_TASK], ["assert sign(5) == 1\n",
                                                   "assert sign(5) == 1\nassert sign(-1) == -1\nassert sign(0) == 0\n"],
                          pool)
    assert partial.outcome(1.0) == "incomplete" and full.outcome(1.0) == "success"
    assert partial.coverage.line == pytest.approx(2 / 5)  # `if x > 0` and `return 1` of 5 body statements
    assert full.coverage.total == 1.0 and full.mutation_score > partial.mutation_score


def test_hostile_asserts_are_rejected_or_bounded(pool):
    loop = {"reference": "def spin(n):\n    while n != 0:\n        n -= 2\n    return n\n", "entry_point": "spin",
            "inputs": ["[4]"], "target_coverage": 1.0}
    response = ("assert spin.__globals__ is not None\nassert print('x') is None\nassert __import__('os')\n"
                "assert (lambda: 1)()\nassert spin(3) == 0\nassert spin(4) == 0\nassert spin(10 ** 10 ** 6) == 0\n"
                "assert len([0] * 10 ** 10) == 1\n")
    [report] = judge([loop], [response], pool)
    statuses = [a.status for a in report.asserts]
    assert statuses == ["rejected"] * 4 + ["fails", "holds", "fails", "fails"]
    assert "_Budget" in report.asserts[4].message  # the step budget stopped the endless loop
    assert "_Budget" in report.asserts[6].message  # the CPU budget stopped the loop on a million-digit number
    assert "MemoryError" in report.asserts[7].message  # the sandbox's memory limit


# ----------------------------------------------------------------------------- token reward


def test_token_reward_lands_on_the_assert_that_caused_it(pool):
    response = ("assert sign(5) == 1\n"  # holds, covers the positive path
                "assert sign(5) == 2\n"  # fails on the reference: penalised on its own line
                "assert sign(5) == 1\n"  # holds, adds nothing
                "assert sign(-1) == -1\n"  # holds, adds the negative path
                "x = 1\n")  # not an assert: nothing
    sample = char_sample("# tests\n", response, SIGN_TASK)
    comp = TestgenComponent(sandbox=pool, fail_penalty=-0.5, coverage_weight=1.0, kill_weight=0.5, spread="split")
    [out] = comp([sample])
    lines = response.split("\n")
    bounds, pos = [], 0
    for ln in lines[:5]:
        bounds.append((pos, pos + len(ln)))
        pos += len(ln) + 1
    per_line = [float(out.values[a:b].sum()) for a, b in bounds]
    assert per_line[0] > 0 and per_line[3] > 0
    assert per_line[1] == pytest.approx(-0.5)
    assert per_line[2] == 0.0 and per_line[4] == 0.0
    newline_tokens = [b for _, b in bounds]
    assert all(out.values[i] == 0 for i in newline_tokens)
    # the sum is coverage_weight * coverage + kill_weight * mutation score + the penalty
    info = out.info
    assert out.values.sum() == pytest.approx(info["coverage"] + 0.5 * info["mutation_score"] - 0.5, abs=1e-5)
    rules = [d["rule"] for d in out.diagnostics]
    assert rules == ["testgen_holds", "testgen_fails", "testgen_holds", "testgen_holds", "testgen_not_assert"]


def test_token_reward_no_asserts_and_rejected(pool):
    comp = TestgenComponent(sandbox=pool, spread="each")
    empty, hostile = comp([char_sample("p", "pass\n", SIGN_TASK),
                           char_sample("p", "assert sign.__code__ is not None\n", SIGN_TASK)])
    assert empty.values[-1] == pytest.approx(-0.5) and empty.values[:-1].sum() == 0
    # spread each: every token of the rejected assert carries the whole penalty
    n = len("assert sign.__code__ is not None")
    assert np.allclose(hostile.values[:n], -0.5) and hostile.values[n] == 0


def test_sparse_mode_moves_testgen_to_the_last_token(pool):
    from densecode.config import RewardConfig
    from densecode.rewards import build_assembler

    sample = char_sample("# tests\n", "assert sign(1) == 1\nassert sign(1) == 3\n", SIGN_TASK)
    comp = TestgenComponent(sandbox=pool)
    dense = build_assembler(RewardConfig(weights={"testgen": 1.0, "syntax": 0.0, "kl": 0.0}), TestgenDomain(),
                            components={"testgen": comp})([sample])
    sparse = build_assembler(RewardConfig(mode="sparse", weights={"testgen": 1.0, "syntax": 0.0, "kl": 0.0}),
                             TestgenDomain(), components={"testgen": comp})([sample])
    assert np.count_nonzero(sparse.total[0][:-1]) == 0
    assert sparse.total[0].sum() == pytest.approx(dense.total[0].sum(), abs=1e-5)


def test_asserts_parse_line_by_line_after_a_syntax_error():
    parsed = parse_asserts("assert sign(1) == 1\nassert sign(2 ==\nassert sign(-1) == -1\n", SIGN)
    assert [p.source for p in parsed] == ["assert sign(1) == 1", "assert sign(-1) == -1"]
    assert all(p.valid for p in parsed)


# ----------------------------------------------------------------------------- real data


def _mbpp_row(task_id, code, tests, setup=""):
    return {"task_id": task_id, "text": "t", "code": code, "test_list": tests, "test_setup_code": setup}


def test_mbpp_loader_rejects_tasks_whose_asserts_fail(tmp_path, pool):
    from densecode.domains.testgen.loader import load_tasks

    path = tmp_path / "mbpp.jsonl"
    rows = [_mbpp_row(1, "def add(a, b):\r\n    return a + b", ["assert add(1, 2) == 3", "assert add(0, 0) == 0"]),
            _mbpp_row(2, "def neg(a):\n    return -a", ["assert neg(1) == 1"]),  # wrong test: rejected
            _mbpp_row(3, "import math\ndef root(x):\n    return math.sqrt(x)", ["assert math.isclose(root(4), 2.0)"])]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    accepted, rejected = load_tasks(path, pool=pool, log=None)
    assert [t["entry_point"] for t in accepted] == ["add", "root"]
    assert accepted[0]["inputs"][:2] == ["[1, 2]", "[0, 0]"] and len(accepted[0]["inputs"]) > 2  # + perturbed
    assert accepted[0]["target_coverage"] == 1.0 and accepted[0]["level"] == 1
    assert len(rejected) == 1 and rejected[0].startswith(f"{path}:2: canonical asserts rejected")
    path.write_text(json.dumps(rows[0]) + "\n" + json.dumps({"code": "def f(): pass"}) + "\n")
    with pytest.raises(DensecodeError, match=r"mbpp.jsonl:2: a testgen row needs 'code'"):
        load_tasks(path, pool=pool, log=None)


def test_mbpp_real_data_loads(shared_data, pool):
    from densecode.domains.testgen.loader import load_tasks

    accepted, rejected = load_tasks(f"{shared_data}/mbpp/mbpp.jsonl", limit=40, pool=pool, log=None)
    assert len(accepted) >= 30 and len(accepted) + len(rejected) == 40
    assert {t["level"] for t in accepted} == {1, 2, 3}
    reports = judge(accepted, [t["canonical"] for t in accepted], pool)
    assert all(r.outcome(t["target_coverage"]) == "success" for t, r in zip(accepted, reports))


# ----------------------------------------------------------------------------- domain, training, explain


def test_domain_score_and_metrics():
    d = TestgenDomain()
    tasks = d.tasks("test", 6, seed=0)
    records = d.score(tasks, [d.canonical_response(t) for t in tasks] )
    m = d.metrics(records)
    assert m["success_rate"] == 1.0 and m["coverage"] > 0.9 and m["outcome/success"] == 1.0
    bad = d.metrics(d.score(tasks[:2], ["", "assert 1 == 2\n"]))
    assert bad["outcome/no_asserts"] == 0.5 and bad["outcome/failing_assert"] == 0.5 and bad["success_rate"] == 0
    assert bad["coverage"] == bad["line_coverage"] == bad["branch_coverage"] == 0.0  # no holding assert: nothing


def test_testgen_trains_two_steps_and_explains(tiny_model_dir, tmp_path):
    from densecode.cli import main

    run = tmp_path / "run"
    rc = main(["train", "--domain", "testgen", "--model", str(tiny_model_dir), "--output-dir", str(run), "--steps",
               "2", "--no-progress", "--set", "train.batch_size=4", "--set", "train.eval_tasks=4", "--set",
               "generation.max_new_tokens=16", "--set", "train.rollouts_every=1"])
    assert rc == 0
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in rows if r["kind"] == "train"]
    assert [r["step"] for r in train] == [1, 2]
    assert "reward/testgen/coverage" in train[0] and "reward/testgen/mutation_score" in train[0]
    assert any("eval/coverage" in r for r in rows if r["kind"] == "eval")
    out = tmp_path / "explain.html"
    assert main(["explain", "--in", str(run / "rollouts.jsonl"), "--out", str(out)]) == 0
    assert "testgen" in out.read_text(encoding="utf-8")


def test_eval_domain_canonical_and_model(tiny_model_dir, tmp_path):
    from densecode.cli import main

    out = tmp_path / "canonical"
    assert main(["eval", "--domain", "testgen", "--canonical", "--tasks", "20", "--out", str(out)]) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["scores"]["success_rate"] == 1.0 and results["scores"]["coverage"] == 1.0
    assert {"report.md", "chart.png"} <= {p.name for p in out.iterdir()}
    out = tmp_path / "model"
    assert main(["eval", "--domain", "testgen", "--model", str(tiny_model_dir), "--tasks", "3", "--max-new-tokens",
                 "8", "--out", str(out)]) == 0
    results = json.loads((out / "results.json").read_text())
    assert len(results["tasks"]) == 3 and set(results["outcomes"]) <= {
        "success", "incomplete", "failing_assert", "no_asserts", "judge_error"}


def test_shared_task_finds_its_mutants_once_with_the_same_verdicts(pool):
    from densecode.domains.testgen import judge as judge_mod

    responses = ["assert sign(5) == 1\n", "assert sign(5) == 1\nassert sign(-1) == -1\nassert sign(0) == 0\n"]
    judge_mod._STATUS_CACHE.clear()
    alone = [judge([SIGN_TASK], [r], pool)[0] for r in responses]
    judge_mod._STATUS_CACHE.clear()
    grouped = judge([SIGN_TASK, SIGN_TASK], responses, pool)  # one equivalence-only run, then both responses
    assert len(judge_mod._STATUS_CACHE) == 1
    for a, g in zip(alone, grouped):
        assert (a.mutation_score, a.n_mutants, a.n_equivalent, a.coverage) == (
            g.mutation_score, g.n_mutants, g.n_equivalent, g.coverage)
