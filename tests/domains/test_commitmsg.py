"""commitmsg: metrics against their published examples, generator, token reward, loader, training."""

from __future__ import annotations

import json

import numpy as np
import pytest

from densecode.domains.commitmsg import CommitmsgDomain
from densecode.domains.commitmsg.edits import MESSAGES, OPERATORS
from densecode.domains.commitmsg.generator import generate_tasks, split_of
from densecode.domains.commitmsg.loader import load_tasks
from densecode.domains.commitmsg.metrics import chrf, rouge_l, words
from densecode.domains.commitmsg.reward import CommitmsgComponent
from densecode.errors import DensecodeError

from tests.domains.helpers import pieces_sample


# ----------------------------------------------------------------------------- metrics


def test_rouge_l_reproduces_rouge_scores_published_example():
    # rouge-score's README: score(target='The quick brown fox jumps over the lazy dog',
    #                             prediction='The quick brown dog jumps on the log.')
    # -> rougeL Score(precision=0.625, recall=0.5555555555555556, fmeasure=0.5882352941176471)
    r = rouge_l("The quick brown dog jumps on the log.", "The quick brown fox jumps over the lazy dog")
    assert r.precision == pytest.approx(0.625) and r.recall == pytest.approx(0.5555555555555556)
    assert r.f1 == pytest.approx(0.5882352941176471)
    assert rouge_l("testing one two", "testing one two").f1 == 1.0
    assert rouge_l("", "x").f1 == 0.0 and rouge_l("a b", "c d").f1 == 0.0


@pytest.mark.parametrize("hyp,ref,expected", [
    # sacrebleu's test/test_chrf.py, test_sentence_level_chrf (eps smoothing): published scores
    ("Co nás nejvíc trápí, protože lékaři si vybírají, kdo bude žít a kdo zemře.",
     "Nejvíce smutní jsme z toho, že musíme rozhodovat o tom, kdo bude žít a kdo zemře.", 39.14078509),
    ("Nebo prostě nemají vybavení, které by jim pomohlo, uvedli lékaři.",
     "A někdy nemáme ani potřebný materiál, abychom jim pomohli, popsali lékaři.", 31.22557079),
    ("Lapali po dechu, jejich životy skončily dřív, než skutečně začaly.",
     "Lapali po dechu a pak jejich život skončil - dřív, než skutečně mohl začít, připomněli.", 57.15704367),
])
def test_chrf_reproduces_sacrebleus_published_examples(hyp, ref, expected):
    assert chrf(hyp, ref, eps_smoothing=True) * 100 == pytest.approx(expected, abs=1e-4)


def test_chrf_bounds_and_words():
    assert chrf("Fix off-by-one in fib", "Fix off-by-one in fib") == pytest.approx(1.0)
    assert chrf("", "Fix") == 0.0
    assert [w.text for w in words("Rename `acc` -> total_x!")] == ["rename", "acc", "total", "x"]


# ----------------------------------------------------------------------------- generator


@pytest.fixture(scope="module")
def test_split_tasks():
    return generate_tasks("test", 300, seed=0)


def test_generator_deterministic_disjoint_levels_and_canonical_scores_one(test_split_tasks):
    a = generate_tasks("train", 300, seed=0)
    assert a == generate_tasks("train", 300, seed=0) and a != generate_tasks("train", 100, seed=1)[:300]
    diffs = {"validation": {t["diff"] for t in generate_tasks("validation", 100, seed=0)},
             "test": {t["diff"] for t in test_split_tasks}}
    train = {t["diff"] for t in a}
    assert len(train) == 300 and not (train & diffs["test"]) and not (train & diffs["validation"])
    assert not (diffs["test"] & diffs["validation"])
    assert all(split_of(t["diff"]) == "train" for t in a)
    assert {t["level"] for t in a} == {1, 2, 3} and {t["op"] for t in a} == set(OPERATORS)
    _check_canonical(test_split_tasks)


def _check_canonical(tasks):
    d = CommitmsgDomain()
    m = d.metrics(d.score(tasks, [d.canonical_response(t) for t in tasks]))
    assert m["success_rate"] == 1.0 and m["rouge_l"] == 1.0 and m["chrf"] == pytest.approx(1.0)


@pytest.mark.slow
def test_canonical_messages_score_one_on_1000_train_tasks():
    _check_canonical(generate_tasks("train", 1000, seed=5))


@pytest.mark.slow
def test_thousands_of_distinct_train_tasks():
    assert len({t["diff"] for t in generate_tasks("train", 3000, seed=9)}) == 3000


def test_every_operator_makes_valid_code_and_its_message_names_the_change():
    tasks = generate_tasks("train", 400, seed=2)
    for t in tasks:
        before = "\n".join(ln[1:] for ln in t["diff"].split("\n")[3:] if ln[:1] in (" ", "-"))
        after = "\n".join(ln[1:] for ln in t["diff"].split("\n")[3:] if ln[:1] in (" ", "+"))
        assert before != after  # (the generator parses both whole functions: a broken edit raises there)
    for level, paraphrases in MESSAGES.values():
        assert level in (1, 2, 3) and len(paraphrases) >= 3


# ----------------------------------------------------------------------------- token reward


TASK = {"reference": "Rename acc to total in count_above"}


def test_token_reward_lands_on_lcs_words_only():
    pieces = [" Rename", " the", " acc", " variable", " in", " count", "_above", "\n", " junk"]
    sample = pieces_sample("Commit message:", pieces, TASK)
    [out] = CommitmsgComponent(spread="split")([sample])
    credited = [i for i, v in enumerate(out.values) if v > 0]
    # LCS with the reference: rename acc in count above -> tokens 0, 2, 4, 5, 6; "the", "variable" and
    # everything after the first line get nothing
    assert credited == [0, 2, 4, 5, 6]
    r = rouge_l("Rename the acc variable in count_above", TASK["reference"])
    c = chrf("Rename the acc variable in count_above", TASK["reference"])
    assert out.values.sum() == pytest.approx(0.5 * r.f1 + 0.5 * c, abs=1e-6)
    assert np.allclose(out.values[credited], out.values[credited][0])  # split evenly
    each = CommitmsgComponent(spread="each")([sample])[0]
    assert np.allclose(each.values[credited], 0.5 * r.f1 + 0.5 * c)


def test_token_reward_empty_and_no_shared_word():
    empty, miss = CommitmsgComponent()([pieces_sample("p", ["\n", " "], TASK), pieces_sample("p", [" Update", " docs"], TASK)])
    assert empty.values.tolist() == [0.0, -0.5]
    assert miss.values.tolist() == [0.0, 0.0] and miss.info["rouge_l"] == 0.0


def test_sparse_mode_moves_commitmsg_to_the_last_token():
    from densecode.config import RewardConfig
    from densecode.rewards import build_assembler

    sample = pieces_sample("p", [" Rename", " acc", " now"], TASK)
    weights = {"commitmsg": 1.0, "kl": 0.0}
    dense = build_assembler(RewardConfig(weights=weights), CommitmsgDomain())([sample])
    sparse = build_assembler(RewardConfig(mode="sparse", weights=weights), CommitmsgDomain())([sample])
    assert dense.total[0][2] == 0 and np.count_nonzero(sparse.total[0][:-1]) == 0
    assert sparse.total[0].sum() == pytest.approx(dense.total[0].sum())


# ----------------------------------------------------------------------------- real data


def test_loader_reads_both_row_shapes_and_rejects_bad_rows(tmp_path):
    path = tmp_path / "commits.jsonl"
    rows = [{"before": "def f():\n    return 1\n", "after": "def f():\n    return 2\n", "message": "Return 2\n\nbody"},
            {"diff": "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b", "message": "Replace a with b"},
            {"before": "x = 1\n", "after": "x = 1\n", "message": "Nothing"},  # no change: rejected
            {"diff": "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b", "message": "..."}]  # no word: rejected
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    accepted, rejected = load_tasks(path, log=None)
    assert [t["reference"] for t in accepted] == ["Return 2", "Replace a with b"]
    assert "-    return 1\n+    return 2" in accepted[0]["diff"]
    assert rejected == [f"{path}:3: rejected: the diff changes no line",
                        f"{path}:4: rejected: the message has no word to score against"]
    path.write_text(json.dumps(rows[0]) + "\n" + json.dumps({"diff": "x"}) + "\n")
    with pytest.raises(DensecodeError, match=r"commits.jsonl:2: a commitmsg row needs 'message'"):
        load_tasks(path, log=None)
    path.write_text(json.dumps({"message": "m", "before": "a"}) + "\n")
    with pytest.raises(DensecodeError, match=r"commits.jsonl:1: a commitmsg row needs 'diff'"):
        load_tasks(path, log=None)


def test_domain_with_real_file_splits_by_hash(tmp_path):
    path = tmp_path / "commits.jsonl"
    rows = [{"before": f"x = {i}\n", "after": f"x = {i + 1}\n", "message": f"Bump x to {i + 1}"} for i in range(60)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    d = CommitmsgDomain({"path": str(path)})
    test = d.tasks("test", 0, seed=0)
    train = d.tasks("train", 20, seed=0)
    assert test and not ({t["diff"] for t in test} & {t["diff"] for t in train})


# ----------------------------------------------------------------------------- training and explain


def test_commitmsg_trains_two_steps_and_explains(tiny_model_dir, tmp_path):
    from densecode.cli import main

    run = tmp_path / "run"
    rc = main(["train", "--domain", "commitmsg", "--model", str(tiny_model_dir), "--output-dir", str(run), "--steps",
               "2", "--no-progress", "--set", "train.batch_size=4", "--set", "train.eval_tasks=4", "--set",
               "generation.max_new_tokens=8", "--set", "train.rollouts_every=1"])
    assert rc == 0
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in rows if r["kind"] == "train"]
    assert [r["step"] for r in train] == [1, 2] and "reward/commitmsg/rouge_l" in train[0]
    assert any("eval/rouge_l" in r for r in rows if r["kind"] == "eval")
    out = tmp_path / "explain.html"
    assert main(["explain", "--in", str(run / "rollouts.jsonl"), "--out", str(out)]) == 0
    assert "commitmsg" in out.read_text(encoding="utf-8")


def test_eval_domain_canonical_and_model(tiny_model_dir, tmp_path):
    from densecode.cli import main

    out = tmp_path / "canonical"
    assert main(["eval", "--domain", "commitmsg", "--canonical", "--tasks", "20", "--out", str(out)]) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["scores"]["success_rate"] == 1.0 and results["scores"]["rouge_l"] == 1.0
    out = tmp_path / "model"
    assert main(["eval", "--domain", "commitmsg", "--model", str(tiny_model_dir), "--tasks", "3", "--max-new-tokens",
                 "8", "--out", str(out)]) == 0
    results = json.loads((out / "results.json").read_text())
    assert len(results["tasks"]) == 3 and set(results["outcomes"]) <= {"success", "partial", "miss", "empty"}
