"""codeio: the literal judge and the departure rule on hand-made cases, the `literal` token reward on hand-built token
spans (the offending token known), values computed in the sandbox, the generator (determinism, hash splits, canonical
answers 100%, the sandbox agreeing with the families' oracles), the real-data loader, and a two-step train."""

from __future__ import annotations

import json
import random
import warnings
from pathlib import Path

import numpy as np
import pytest

from densecode.config import load_config
from densecode.domains import build_domain, build_reward_fn, get_domain_class
from densecode.domains.codegen.generator import select_families, split_of
from densecode.domains.codeio.literal import departure, judge, parse_answer, values_equal
from densecode.domains.codeio.reward import LiteralComponent
from densecode.domains.codeio.tasks import calls_from_asserts, generate_tasks, load_tasks
from densecode.domains.codeio.values import canonical_repr, compute_values
from densecode.errors import DensecodeError
from densecode.rewards import Sample

from tests.domains.helpers import pieces_sample

ROOT = Path(__file__).resolve().parents[2]
FUNCTION_FAMILIES = select_families((), [1, 2, 3], kinds=("function",))


# --------------------------------------------------------------------------- judge


@pytest.mark.parametrize("answer, want, ok", [
    ("[1, 2, 3]", [1, 2, 3], True),
    ("(1, 2, 3)", [1, 2, 3], False),  # a tuple is not a list
    ("{3, 1, 2}", {1, 2, 3}, True),  # sets without order
    ("{'b': 2, 'a': 1}", {"a": 1, "b": 2}, True),  # dicts without order
    ("{'a': 1}", {"a": 1, "b": 2}, False),
    ("0.30000001", 0.1 + 0.2, True),  # float within rel 1e-6 / abs 1e-6
    ("0.3001", 0.1 + 0.2, False),
    ("[0.5, {1.0000001}]", [0.5, {1.0}], True),  # tolerance inside containers
    ("5.0", 5, True),  # numbers compare as numbers
    ("5.000001", 5, False),  # an expected int is matched exactly
    ("1", True, False),  # a bool is not a number
    ("True", True, True),
    ("None", None, True),
    ("'a\\nb'", "a\nb", True),
    ("\"it's\"", "it's", True),
    ("foo", 3, False),  # not a literal
    ("", 3, False),
    ("__import__('os')", 0, False),  # never evaluated
])
def test_judge(answer, want, ok):
    assert judge(answer, want)[0] is ok


def test_judge_outcomes():
    assert judge("[1, 2", [1, 2])[1] == "not_a_literal"
    assert judge("[1, 3]", [1, 2])[1] == "wrong_value"
    assert judge(" [1, 2] ", [1, 2]) == (True, "success")
    assert judge("[" * 100_000, [1])[1] == "not_a_literal"  # over MAX_ANSWER_CHARS: not parsed at all


# --------------------------------------------------------------------------- departure


@pytest.mark.parametrize("answer, want, where", [
    ("[1, 2, 3]", [1, 2, 3], None),
    ("[1, 2, 4]", [1, 2, 3], 7),  # the "4"
    ("[1, 2, 3, 4]", [1, 2, 3], 10),  # the "4": "[1, 2, 3, " is still correct (a trailing comma is allowed)
    ("[1,2,3,]", [1, 2, 3], None),  # a trailing comma and any spacing are correct spellings
    ("(1)", (1,), 2),  # a 1-tuple needs its comma
    ("{3, 1, 3}", {1, 2, 3}, 7),  # the second 3: only 2 is left to write
    ("{'b': 3, 'a': 1}", {"a": 1, "b": 2}, 6),  # any key order, then the wrong value
    ("3.2", 3.14159, 2),  # "3." can still reach 3.14159, "3.2" cannot
    ("3.1416", 3.14159265, 5),  # 3.1416 is 3e-6 off, more than the tolerance
    ("1", True, 0),
    ("Tru", True, 3),  # a correct but unfinished start departs at its end
    ("[1, 2", [1, 2, 3], 5),
    ("{}", set(), 0),  # the empty set is set()
    ("420", 42, 2),
    ("-5", 5, 0),
    ("'abd'", "abc", 3),
    ('"abc\'', "abc", 4),  # closing with the other quote
    ("'a\\x62c'", "abc", None),  # an escape spells the same character
    ("'a\\x63c'", "abc", 5),  # ... but \x63 is c: the departure is at the "3"
    ("1e-07", 1e-7, None),
    ("[[1], [2, 4]]", [[1], [2, 3]], 10),
    (" [1]", [1], None),  # leading whitespace is fine (the prompt ends at "==")
    ("  ", [1], 2),  # only whitespace: departs at its end
    ("", [1], 0),
])
def test_departure(answer, want, where):
    assert departure(answer, want) == where


def test_departure_never_blames_a_correct_prefix():
    """For every generated value: the canonical text is complete and correct; corrupting one character at i gives a
    departure at or after i (the prefix before i is correct) -- and not None unless the judge accepts the text."""
    rng = random.Random(0)
    tasks = generate_tasks("validation", 120, seed=5, families=FUNCTION_FAMILIES)
    checked = 0
    for t in tasks:
        want, text = parse_answer(t["expected"]), t["canonical"]
        assert departure(text, want) is None and judge(text, want)[0]
        for _ in range(5):
            i = rng.randrange(len(text))
            bad = text[:i] + rng.choice("0123456789[](){},:'\" aZ-.") + text[i + 1:]
            d = departure(bad, want)
            ok = judge(bad, want)[0]
            assert (d is None) <= ok, (text, bad)
            if not ok:
                assert d is not None and d >= i, (text, bad, d)
            checked += 1
    assert checked == 600


def test_values_equal_is_type_strict_for_containers():
    assert values_equal([1, (2, 3)], [1, (2, 3)]) and not values_equal([1, [2, 3]], [1, (2, 3)])
    assert values_equal({1: "a", 2: "b"}, {2: "b", 1: "a"}) and not values_equal({True: 1}, {1: 1})


# --------------------------------------------------------------------------- the token reward on hand-built tokens


def _sample(pieces: list[str], expected: str, eos: bool = False) -> Sample:
    """Tokens with the given texts (an EOS token with an empty span at the end when `eos`)."""
    return pieces_sample("assert f() == ", pieces, {"expected": expected}, eos)


def test_literal_reward_credits_up_to_the_departing_token():
    comp = LiteralComponent(credit=1.0, penalty=-1.0, correct_bonus=1.0, spread="each")
    # [1, 2, 4] for [1, 2, 3]: "[", "1", ",", " 2", "," credited; " 4" holds the departure; "]" gets nothing.
    out = comp([_sample(["[", "1", ",", " 2", ",", " 4", "]"], "[1, 2, 3]")])[0]
    assert out.values.tolist() == [1, 1, 1, 1, 1, -1, 0]
    assert out.diagnostics[0]["tokens"] == [5, 6] and out.diagnostics[0]["departure"] == 7
    # correct: credit everywhere, the bonus on the last token
    out = comp([_sample(["[", "1", ", 2", ", 3", "]"], "[1, 2, 3]")])[0]
    assert out.values.tolist() == [1, 1, 1, 1, 2] and out.info["correct"] == 1.0
    # an unfinished literal: the penalty on EOS, after the last (correct) character
    out = comp([_sample(["[", "1", ", 2"], "[1, 2, 3]", eos=True)])[0]
    assert out.values.tolist() == [1, 1, 1, -1]
    # the line ends early: the penalty on the newline's token, the next line gets nothing
    out = comp([_sample(["[1", ",", "\n", "x"], "[1, 2]")])[0]
    assert out.values.tolist() == [1, 1, -1, 0]
    # a token straddling the departure is not credited: "3.2" for 3.14159 departs at "2" inside "3.2"
    out = comp([_sample(["3.2", "5"], "3.14159")])[0]
    assert out.values.tolist() == [-1, 0]
    # empty answer: the penalty on the first token
    out = comp([_sample(["\n"], "1")])[0]
    assert out.values.tolist() == [-1]


def test_literal_reward_split_sums_to_the_share_before_the_departure():
    comp = LiteralComponent(credit=1.0, penalty=-1.0, correct_bonus=0.5, spread="split")
    out = comp([_sample(["[", "1", ",", " 2", ",", " 4", "]"], "[1, 2, 3]")])[0]
    assert np.allclose(out.values, [1 / 7] * 5 + [-1, 0])
    out = comp([_sample(["[", "1", ", 2", ", 3", "]"], "[1, 2, 3]")])[0]
    assert out.values.sum() == pytest.approx(1.5)


def test_literal_reward_in_the_assembler_dense_and_sparse():
    domain = get_domain_class("codeio")()
    samples = [_sample(["[", "1", ",", " 2", ",", " 4", "]"], "[1, 2, 3]")]
    dense = build_reward_fn(load_config(ROOT / "configs" / "codeio.yaml", ["reward.weights.kl=0"]), domain)(samples)
    sparse = build_reward_fn(load_config(ROOT / "configs" / "codeio.yaml",
                                         ["reward.weights.kl=0", "reward.mode=sparse"]), domain)(samples)
    assert dense.total[0][5] < 0 < dense.total[0][0]
    assert np.count_nonzero(sparse.total[0][:-1]) == 0
    assert float(sparse.total[0].sum()) == pytest.approx(float(dense.total[0].sum()))
    with pytest.raises(DensecodeError, match="spread"):
        LiteralComponent(spread="all")


# --------------------------------------------------------------------------- values from the sandbox


def test_values_are_computed_in_the_sandbox_and_kept_only_if_literal():
    code = ("def f(x):\n    print('noise')\n    return {'b' + x, 'a' + x}\n"
            "def g():\n    return object()\n"
            "def h():\n    return float('nan')\n"
            "def k():\n    raise ValueError('no')\n"
            "def m():\n    return list(range(1000))\n"
            "import os\ndef p():\n    return os.getpid() != __import__('os').getppid()\n")
    out = compute_values([("", code, c) for c in ("f('x')", "g()", "h()", "k()", "m()", "p()")], max_chars=300)
    assert out[0].ok and out[0].text == "{'ax', 'bx'}" and out[0].value == {"ax", "bx"}  # sorted: the same everywhere
    assert not out[1].ok and "not a Python literal" in out[1].text
    assert not out[2].ok and "'nan' is not a Python literal" in out[2].text
    assert not out[3].ok and "ValueError" in out[3].text
    assert not out[4].ok and "limit 300" in out[4].text
    assert out[5].ok and out[5].value is True  # the call really runs in another process


def test_batched_values_match_single_runs_and_survive_a_crash():
    from densecode.domains.codeio import values

    code = "def f(x):\n    return [x] * 2\n"
    items = [("", code, f"f({i})") for i in range(5)] + [("", "def g():\n    return 1 / 0\n", "g()"),
                                                          ("", "def h():\n    import os\n    os._exit(3)\n", "h()"),
                                                          ("", code, "f('z')"),
                                                          ("", "def r(n):\n    return 1 if n < 2 else r(n - 1) * n\n",
                                                           "r(5)")]
    values._CACHE.clear()
    batched = compute_values(items, batch=4)
    values._CACHE.clear()
    single = compute_values(items, batch=1)
    assert [(c.ok, c.text) for c in batched] == [(c.ok, c.text) for c in single]
    assert batched[0].text == "[0, 0]" and batched[7].text == "['z', 'z']" and batched[8].text == "120"
    assert not batched[5].ok and "ZeroDivisionError" in batched[5].text
    assert not batched[6].ok  # os._exit ended its batch: it was run alone, and the others still got their values


def test_canonical_repr_is_stable():
    assert canonical_repr({"b", "a"}) == "{'a', 'b'}" and canonical_repr(set()) == "set()"
    assert canonical_repr((1,)) == "(1,)" and canonical_repr({"k": [1, (2,)]}) == "{'k': [1, (2,)]}"


# --------------------------------------------------------------------------- generator


def test_generator_is_deterministic_with_hash_splits():
    a = generate_tasks("train", 30, seed=1, families=FUNCTION_FAMILIES)
    assert a == generate_tasks("train", 30, seed=1, families=FUNCTION_FAMILIES)
    assert a != generate_tasks("train", 30, seed=2, families=FUNCTION_FAMILIES)
    held = generate_tasks("test", 60, seed=0, families=FUNCTION_FAMILIES)
    assert all(split_of(t["split_key"]) == "train" for t in a)
    assert all(split_of(t["split_key"]) == "test" for t in held)
    assert not {t["split_key"] for t in a} & {t["split_key"] for t in held}
    assert all(t["prompt"].endswith(" ==") and t["prompt"].count("\nassert ") == 1 for t in a)
    assert all(t["canonical"] == " " + t["expected"] for t in a)  # the answer brings its leading space
    assert {t["level"] for t in held} == {1, 2, 3}


def test_canonical_answers_score_100_percent_on_300_test_tasks():
    """Values from the sandbox; generation also checks each against the family's oracle (an error if they differ)."""
    domain = get_domain_class("codeio")()
    tasks = domain.tasks("test", 300, seed=0)
    records = domain.score(tasks, [domain.canonical_response(t) for t in tasks])
    assert [r["outcome"] for r in records] == ["success"] * 300
    assert len({t["family"] for t in tasks}) == len(FUNCTION_FAMILIES)
    assert domain.metrics(records)["accuracy"] == 1.0


@pytest.mark.slow
def test_canonical_answers_score_100_percent_on_1000_train_tasks():
    domain = get_domain_class("codeio")()
    tasks = domain.tasks("train", 1000, seed=3)
    assert all(r["outcome"] == "success" for r in domain.score(tasks, [t["canonical"] for t in tasks]))


def test_many_distinct_training_tasks():
    tasks = generate_tasks("train", 1500, seed=0, families=FUNCTION_FAMILIES)
    assert len({t["prompt"] for t in tasks}) >= 1400


def test_domain_scores_wrong_answers_and_options_are_typed():
    domain = get_domain_class("codeio")()
    t = domain.tasks("validation", 1, seed=0)[0]
    records = domain.score([t, t, t], [t["canonical"] + "\nmore", "???", ""])
    assert [r["outcome"] for r in records] == ["success", "not_a_literal", "empty"]
    cfg = load_config(ROOT / "configs" / "codeio.yaml", ["tasks.families=[polynomial]"])
    assert {x["family"] for x in build_domain(cfg).tasks("train", 5, 0)} == {"polynomial"}
    with pytest.raises(DensecodeError, match="tasks.families"):
        get_domain_class("codeio")({"families": ["container"]})  # class families have no single call


# --------------------------------------------------------------------------- real data


def _write(path: Path, rows: list) -> Path:
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return path


def test_calls_from_asserts():
    assert calls_from_asserts(["assert f(1, [2]) == [3]", "assert g(x)==y", "assert math.isclose(f(1), 2)",
                               "assert set(f(1)) == {1}", "not python("]) == [("f(1, [2])", "[3]"), ("g(x)", None),
                                                                               ("set(f(1))", "{1}")]


def test_loader_computes_values_and_rejects_rows_whose_reference_fails(tmp_path):
    good = {"task_id": 601, "text": "Add.", "code": "def add(a, b):\r\n    return a + b", "test_setup_code": "",
            "test_list": ["assert add(1, 2) == 3", "assert add(1, -1) == 0"]}
    wrong = {"task_id": 602, "text": "Sub.", "code": "def sub(a, b):\n    return a + b", "test_setup_code": "",
             "test_list": ["assert sub(3, 1) == 2"]}
    plain = {"code": "def sq(x):\n    return x * x\n", "call": "sq(7)"}
    path = _write(tmp_path / "t.jsonl", [good, wrong, plain])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tasks = load_tasks(path)
    assert [t["expected"] for t in tasks] == ["3", "0", "49"]
    assert tasks[0]["split"] == "train" and tasks[2]["split"] == split_of(plain["code"])
    assert "\r" not in tasks[0]["prompt"] and tasks[0]["prompt"].endswith("assert add(1, 2) ==")
    rejected = [str(w.message) for w in caught if "rejected" in str(w.message)]
    assert len(rejected) == 1 and f"{path}:2: task 602/0 (sub(3, 1)) rejected: the reference returns 4" in rejected[0]
    with pytest.raises(DensecodeError, match=rf"{path}:2: task 602/0"):
        load_tasks(path, strict=True)
    bad = _write(tmp_path / "bad.jsonl", [plain, {"text": "no code"}])
    with pytest.raises(DensecodeError, match=rf"{bad}:2: a codeio row needs 'code' and 'call'"):
        load_tasks(bad)


def test_loader_reads_real_mbpp_and_mbppplus(shared_data, tmp_path):
    mbpp = [json.loads(x) for x in Path(shared_data, "mbpp", "mbpp.jsonl").read_text().splitlines()[600:605]]
    plus = [json.loads(x) for x in Path(shared_data, "mbppplus", "MbppPlus-v0.2.0.derived.jsonl")
            .read_text().splitlines()[:12]]
    plus = [r for r in plus if int(r["task_id"].split("/")[1]) > 10][:3]
    tasks = load_tasks(_write(tmp_path / "m.jsonl", mbpp + plus), max_calls=2)
    assert len(tasks) >= 14
    domain = get_domain_class("codeio")()
    assert all(r["outcome"] == "success" for r in domain.score(tasks, [t["canonical"] for t in tasks]))


# --------------------------------------------------------------------------- end to end


def test_codeio_trains_two_steps_and_explains(tiny_model_dir, tmp_path):
    from densecode.cli import main

    run = tmp_path / "run"
    rc = main(["train", "--domain", "codeio", "--model", str(tiny_model_dir), "--output-dir", str(run), "--steps", "2",
               "--no-progress", "--set", "train.batch_size=4", "--set", "train.eval_tasks=4", "--set",
               "generation.max_new_tokens=8"])
    assert rc == 0
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in rows if r["kind"] == "train"]
    assert [r["step"] for r in train] == [1, 2] and "reward/literal/prefix_fraction" in train[0]
    assert "eval/accuracy" in [r for r in rows if r["kind"] == "eval"][0]
    page = tmp_path / "explain.html"
    assert main(["explain", "--in", str(run / "rollouts.jsonl"), "--out", str(page)]) == 0
    assert "literal" in page.read_text(encoding="utf-8")


def test_eval_domain_canonical_and_model(tiny_model_dir, tmp_path):
    """`densecode eval --domain codeio`: canonical answers score 100%; a model's run writes the usual files."""
    from densecode.cli import main

    out = tmp_path / "canonical"
    assert main(["eval", "--domain", "codeio", "--canonical", "--tasks", "60", "--out", str(out)]) == 0
    scores = json.loads((out / "results.json").read_text())["scores"]
    assert scores["accuracy"] == 1.0 and scores["n_tasks"] == 60.0
    out = tmp_path / "model"
    assert main(["eval", "--benchmark", "codeio", "--model", str(tiny_model_dir), "--tasks", "4",
                 "--max-new-tokens", "8", "--out", str(out)]) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["scores"]["n_tasks"] == 4.0 and (out / "chart.png").is_file()
