"""codegen: the generator (families, determinism, hash splits, levels), canonical answers pass in the sandbox, the
real-data loader (MBPP / MBPP+ / prompt+tests rows, file:line errors, rejection of failing canonical answers), the
token rewards on hand-built responses, and a two-step `densecode train --domain codegen`."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest

from densecode.config import load_config
from densecode.domains import build_domain, build_reward_fn, get_domain_class
from densecode.domains.codegen.families import CATEGORIES, FAMILIES
from densecode.domains.codegen.generator import generate_tasks, select_families, split_of
from densecode.domains.codegen.loader import load_tasks
from densecode.errors import DensecodeError
from densecode.rewards import Sample
from densecode.sandbox import AssertJob, get_default_pool

ROOT = Path(__file__).resolve().parents[2]


def _judge_canonical(tasks: list[dict]) -> list:
    return get_default_pool().run([AssertJob(t["reference"], t["tests"], setup=t["setup"]) for t in tasks])


# --------------------------------------------------------------------------- generator


def test_families_span_the_required_categories_and_levels():
    assert len(FAMILIES) >= 20
    assert {f.category for f in FAMILIES} == set(CATEGORIES)
    assert {f.level for f in FAMILIES} == {1, 2, 3}
    assert len({f.name for f in FAMILIES}) == len(FAMILIES)


def test_generator_is_deterministic_and_seeds_differ():
    a, b = generate_tasks("train", 50, seed=3), generate_tasks("train", 50, seed=3)
    assert a == b
    c = generate_tasks("train", 50, seed=4)
    assert [t["prompt"] for t in a] != [t["prompt"] for t in c]


def test_splits_are_disjoint_and_fixed_by_the_function_hash():
    keys = {}
    for split in ("train", "validation", "test"):
        tasks = generate_tasks(split, 400, seed=0)
        assert all(t["split"] == split == split_of(t["split_key"]) for t in tasks)
        keys[split] = {t["split_key"] for t in tasks}
    assert not keys["train"] & keys["validation"] and not keys["train"] & keys["test"]
    assert not keys["validation"] & keys["test"]
    assert len(keys["test"]) >= 200  # many distinct functions in the held-out splits, not a handful


def test_every_family_has_functions_in_every_split():
    import random

    from densecode.domains.codegen.generator import draw_spec

    for fam in FAMILIES:
        rng = random.Random(0)
        splits = {split_of(draw_spec(rng, [fam]).key) for _ in range(2000)}
        assert splits == {"train", "validation", "test"}, fam.name


def test_thousands_of_distinct_training_tasks_at_every_level():
    tasks = generate_tasks("train", 3000, seed=0)
    assert len({t["prompt"] for t in tasks}) >= 2500
    assert len({t["split_key"] for t in tasks}) >= 1000  # distinct functions, not only distinct inputs
    assert {t["level"] for t in tasks} == {1, 2, 3}
    only_easy = generate_tasks("train", 50, seed=0, families=select_families((), [1]))
    assert {t["level"] for t in only_easy} == {1}
    with pytest.raises(DensecodeError, match="unknown family 'nope'"):
        select_families(["nope"])
    with pytest.raises(DensecodeError, match="tasks.levels"):
        select_families((), [4])


def test_canonical_answers_pass_on_300_test_tasks():
    """Through the domain's scoring path (what `--canonical` evals use). The reference text and the families' oracles
    are independent implementations: a wrong template or oracle fails here."""
    domain = get_domain_class("codegen")()
    tasks = domain.tasks("test", 300, seed=0)
    records = domain.score(tasks, [domain.canonical_response(t) for t in tasks])
    failed = [(t["task_id"], r["outcome"]) for t, r in zip(tasks, records) if r["outcome"] != "success"]
    assert failed == []
    assert {t["family"] for t in tasks} == {f.name for f in FAMILIES}


@pytest.mark.slow
def test_canonical_answers_pass_on_1000_train_tasks():
    domain = get_domain_class("codegen")()
    tasks = domain.tasks("train", 1000, seed=1)
    records = domain.score(tasks, [domain.canonical_response(t) for t in tasks])
    assert [(t["task_id"], r["outcome"]) for t, r in zip(tasks, records) if r["outcome"] != "success"] == []


def test_a_constant_body_fails_its_tests():
    """Every task's tests see at least two different results, so no constant answer passes them all."""
    tasks = generate_tasks("test", 100, seed=2)
    assert all(len(set(t["tests"])) == len(t["tests"]) for t in tasks)
    for const in ("None", "0", "[]", "''", "True"):
        broken = [{**t, "reference": t["prompt"] + f"    return {const}\n"} for t in tasks
                  if t["family"] not in ("container", "account")]
        assert all(r.outcome != "passed" for r in _judge_canonical(broken)), const


def test_domain_scores_canonical_and_wrong_answers():
    domain = get_domain_class("codegen")()
    tasks = domain.tasks("validation", 12, seed=0)
    records = domain.score(tasks + tasks[:2], [domain.canonical_response(t) for t in tasks] +
                           ["    return undefined_name\n", "    pass\n"])
    assert [r["outcome"] for r in records[:12]] == ["success"] * 12
    assert records[12]["outcome"] == "runtime_error" and records[12]["exception"] == 1.0
    assert records[13]["outcome"] != "success"
    metrics = domain.metrics(records)
    assert metrics["pass_rate"] == pytest.approx(12 / 14) and metrics["n_tasks"] == 14


def test_config_types_the_options():
    cfg = load_config(ROOT / "configs" / "codegen.yaml", ["tasks.families=[caesar, kth]", "tasks.levels=[2]"])
    domain = build_domain(cfg)
    assert [f.name for f in domain.families] == ["caesar", "kth"]
    assert {t["family"] for t in domain.tasks("train", 20, 0)} <= {"caesar", "kth"}
    with pytest.raises(DensecodeError, match="tasks.format"):
        get_domain_class("codegen")({"format": "csv"})


# --------------------------------------------------------------------------- real data


def _write(path: Path, rows: list) -> Path:
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return path


MBPP_ROW = {"task_id": 601, "text": "Write a function to add two numbers.", "code": "def add(a, b):\n    return a + b",
            "test_setup_code": "", "test_list": ["assert add(1, 2) == 3", "assert add(-1, 1) == 0"]}


def test_loader_reads_mbpp_and_prompt_rows_and_rejects_failing_canonicals(tmp_path):
    bad = {**MBPP_ROW, "task_id": 602, "code": "def add(a, b):\n    return a - b"}
    prompt_row = {"prompt": "def double(x):\n", "canonical": "    return 2 * x\n", "tests": ["assert double(4) == 8"]}
    path = _write(tmp_path / "t.jsonl", [MBPP_ROW, bad, prompt_row])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tasks = load_tasks(path)
    assert [t["task_id"] for t in tasks] == ["601", tasks[1]["task_id"]]
    assert tasks[0]["split"] == "train" and tasks[1]["split"] == split_of(prompt_row["prompt"])
    messages = [str(w.message) for w in caught if "rejected" in str(w.message)]
    assert len(messages) == 1 and f"{path}:2: task 602 rejected" in messages[0]
    with pytest.raises(DensecodeError, match=rf"{path}:2: task 602 rejected.*tasks.strict"):
        load_tasks(path, strict=True)


def test_loader_errors_name_file_and_line(tmp_path):
    path = _write(tmp_path / "bad.jsonl", [MBPP_ROW, "{not json"])
    with pytest.raises(DensecodeError, match=rf"{path}:2: not valid JSON"):
        load_tasks(path)
    path = _write(tmp_path / "bad2.jsonl", [MBPP_ROW, {"prompt": "def f():\n"}])
    with pytest.raises(DensecodeError, match=rf"{path}:2: a task row needs 'prompt' and 'tests'"):
        load_tasks(path)
    path = _write(tmp_path / "bad3.jsonl", [{"prompt": "def f():\n", "tests": ["assert f() == 1"]}])
    with pytest.raises(DensecodeError, match=rf"{path}:1: no canonical answer"):
        load_tasks(path)


def test_loader_reads_real_mbpp_and_mbppplus_rows(shared_data, tmp_path):
    mbpp = [json.loads(line) for line in Path(shared_data, "mbpp", "mbpp.jsonl").read_text().splitlines()[600:606]]
    plus = [json.loads(line) for line in
            Path(shared_data, "mbppplus", "MbppPlus-v0.2.0.derived.jsonl").read_text().splitlines()[:12]]
    plus = [r for r in plus if int(r["task_id"].split("/")[1]) > 10][:4]  # 1-10 are MBPP's few-shot prompts
    tasks = load_tasks(_write(tmp_path / "m.jsonl", mbpp + plus), strict=True, max_inputs=4)
    assert len(tasks) == 10
    assert all(t["split"] == "train" for t in tasks[:6]) and all(t["split"] == "test" for t in tasks[6:])
    assert all(len(t["inputs"]) == 4 and t["entry_point"] for t in tasks[6:])


# --------------------------------------------------------------------------- token rewards on hand-built responses


def _char_sample(prompt: str, response: str, task: dict) -> Sample:
    """One token per character: the token index of a character is its position."""
    from densecode.rewards.sample import find_code_regions

    regions, mode = find_code_regions(prompt, response, "completion")
    n = len(response)
    return Sample(prompt=prompt, response=response, token_ids=list(range(n)),
                  token_spans=[(i, i + 1) for i in range(n)], code_regions=regions,
                  task={k: v for k, v in task.items() if k != "prompt"}, region_mode=mode)


def test_token_rewards_land_on_the_offending_line_and_token():
    cfg = load_config(ROOT / "configs" / "codegen.yaml", ["reward.weights.kl=0", "reward.weights.dfg=0"])
    domain = build_domain(cfg)
    reward_fn = build_reward_fn(cfg, domain)
    task = next(t for t in domain.tasks("test", 30, seed=0) if t["family"] != "container")
    good = domain.canonical_response(task)
    raises = "    x = 1\n    return undefined_name + x\n"
    broken = "    return (1 +\n"
    batch = reward_fn([_char_sample(task["prompt"], r, task) for r in (good, raises, broken)])
    tests = batch.raw["tests"]
    # spread: split (the config): the all-pass value 1.0 is divided evenly among the code tokens
    on_code = tests[0][[i for i, c in enumerate(good) if not c.isspace()]]
    assert np.all(on_code == pytest.approx(on_code[0])) and on_code[0] > 0
    assert float(tests[0].sum()) == pytest.approx(1.0)
    line2 = raises.index("return")
    exc = [d for d in batch.outputs["tests"][1].diagnostics if d["rule"] == "NameError"]
    assert exc and exc[0]["span"][0] == line2
    assert tests[1][line2] < tests[1][raises.index("x = 1")]  # the raising line carries the exception penalty
    syntax = batch.raw["syntax"][2]
    assert syntax.min() < 0 and broken[int(np.argmin(syntax))] in "(+\n"  # the parser's complaint, not the indent
    sparse_cfg = load_config(ROOT / "configs" / "codegen.yaml",
                             ["reward.mode=sparse", "reward.weights.kl=0", "reward.weights.dfg=0"])
    sparse = build_reward_fn(sparse_cfg, domain)
    sb = sparse([_char_sample(task["prompt"], raises, task)])
    assert np.count_nonzero(sb.total[0][:-1]) == 0
    assert float(sb.total[0].sum()) == pytest.approx(float(batch.total[1].sum()), abs=1e-4)


# --------------------------------------------------------------------------- end to end


def test_codegen_trains_two_steps_and_explains(tiny_model_dir, tmp_path):
    from densecode.cli import main

    run = tmp_path / "run"
    rc = main(["train", "--domain", "codegen", "--model", str(tiny_model_dir), "--output-dir", str(run), "--steps", "2",
               "--no-progress", "--set", "train.batch_size=4", "--set", "train.eval_tasks=4", "--set",
               "generation.max_new_tokens=8"])
    assert rc == 0
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in rows if r["kind"] == "train"]
    assert [r["step"] for r in train] == [1, 2] and "reward/tests/pass_rate" in train[0]
    assert "eval/pass_rate" in [r for r in rows if r["kind"] == "eval"][0]
    page = tmp_path / "explain.html"
    assert main(["explain", "--in", str(run / "rollouts.jsonl"), "--out", str(page)]) == 0
    text = page.read_text(encoding="utf-8")
    assert all(name in text for name in ("tests", "syntax", "lint"))


def test_eval_domain_canonical_and_model(tiny_model_dir, tmp_path):
    """`densecode eval --domain codegen`: canonical answers score 100%; a model's run writes the usual files."""
    from densecode.cli import main

    out = tmp_path / "canonical"
    assert main(["eval", "--domain", "codegen", "--canonical", "--tasks", "60", "--out", str(out)]) == 0
    scores = json.loads((out / "results.json").read_text())["scores"]
    assert scores["pass_rate"] == 1.0 and scores["n_tasks"] == 60.0
    out = tmp_path / "model"
    assert main(["eval", "--benchmark", "codegen", "--model", str(tiny_model_dir), "--tasks", "4",
                 "--max-new-tokens", "8", "--out", str(out)]) == 0
    assert {p.name for p in out.iterdir()} >= {"results.json", "report.md", "chart.png"}
