"""densecode compare: two eval runs made by `densecode eval`, two train runs, and bad input."""

from __future__ import annotations

import json
import os

import pytest

from densecode.cli import main
from densecode.errors import DensecodeError
from densecode.eval.compare import compare_runs


@pytest.fixture(scope="module")
def two_mbpp_runs(tiny_model_dir, shared_data, tmp_path_factory):
    """A: the tiny random model on 3 MBPP test tasks; B: the canonical solutions of the same 3 tasks."""
    root = tmp_path_factory.mktemp("runs")
    data = os.path.join(shared_data, "mbpp", "mbpp.jsonl")
    common = ["eval", "--benchmark", "mbpp", "--data", data, "--limit", "3"]
    assert main([*common, "--model", str(tiny_model_dir), "--max-new-tokens", "24", "--out", str(root / "tiny")]) == 0
    assert main([*common, "--canonical", "--out", str(root / "canonical")]) == 0
    return root / "tiny", root / "canonical"


def test_eval_run_files_from_real_code_path(two_mbpp_runs):
    tiny, canonical = two_mbpp_runs
    results = json.loads((tiny / "results.json").read_text())
    assert results["scores"]["tasks"] == 3 and [t["task_id"] for t in results["tasks"]] == ["11", "12", "13"]
    for task in results["tasks"]:
        assert {"prompt", "completion", "verdict", "outcome", "error"} <= set(task)
    assert results["timing"]["generated_tokens"] > 0
    assert json.loads((canonical / "results.json").read_text())["scores"]["MBPP pass@1"] == 1.0


def test_compare_two_eval_runs(two_mbpp_runs, tmp_path, capsys):
    tiny, canonical = two_mbpp_runs
    assert main(["compare", str(tiny), str(canonical), "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "| MBPP pass@1 | 0.000 | 1.000 | +1.000 |" in printed
    assert "| fixed (B solves, A does not) | 3 | 11, 12, 13 |" in printed
    assert (tmp_path / "compare.md").read_text() in printed
    assert (tmp_path / "compare.png").read_bytes()[:4] == b"\x89PNG"
    # reversed: the same tasks are "broken"
    text, _ = compare_runs(canonical, tiny, tmp_path / "rev")
    assert "| broken (A solves, B does not) | 3 | 11, 12, 13 |" in text


def _metrics(path, losses, successes):
    path.mkdir(parents=True)
    lines = [json.dumps({"step": i + 1, "loss": loss, "eval/success": s}) for i, (loss, s) in enumerate(zip(losses, successes))]
    (path / "metrics.jsonl").write_text("\n".join(lines) + "\n{\"step\": 9, \"loss\"")  # killed mid-write
    return path


def test_compare_two_train_runs(tmp_path):
    a = _metrics(tmp_path / "dense", [1.0, 0.5, 0.7], [0.1, 0.3, 0.4])
    b = _metrics(tmp_path / "sparse", [1.0, 0.9, 0.8], [0.1, 0.1, 0.2])
    text, paths = compare_runs(a, b, tmp_path / "out")
    # last, delta, best (min loss / max success), first
    assert "| loss | 0.700 | 0.800 | +0.100 | 0.500 | 0.800 | 1 | 1 |" in text.replace("1.000", "1")
    assert "| eval/success | 0.400 | 0.200 | -0.200 | 0.400 | 0.200 |" in text
    assert paths["chart"].read_bytes()[:4] == b"\x89PNG"


def test_compare_rejects_mixed_or_missing_runs(tmp_path):
    train = _metrics(tmp_path / "train", [1.0], [0.0])
    evaldir = tmp_path / "eval"
    evaldir.mkdir()
    (evaldir / "results.json").write_text(json.dumps({"benchmark": "mbpp", "scores": {"MBPP pass@1": 0.1}}))
    with pytest.raises(DensecodeError, match="cannot compare"):
        compare_runs(train, evaldir, tmp_path / "o")
    with pytest.raises(DensecodeError, match="run not found"):
        compare_runs(tmp_path / "nowhere", evaldir, tmp_path / "o")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DensecodeError, match="neither results.json"):
        compare_runs(tmp_path / "empty", evaldir, tmp_path / "o")


def test_best_direction_per_metric():
    from densecode.eval.compare import _lower_is_better

    assert _lower_is_better("loss/policy") and _lower_is_better("time/step_s") and _lower_is_better("elapsed_s")
    assert not _lower_is_better("perf/tokens_per_s") and not _lower_is_better("eval/success_rate")


def _results(verdicts, n=1):
    """A minimal results.json dict: task i solved by verdicts[i] of its n samples."""
    return {"benchmark": "mbpp", "model": "m", "scores": {},
            "tasks": [{"task_id": str(i), "n": n, "n_correct": c} for i, c in enumerate(verdicts)]}


def test_paired_change_interval_over_shared_tasks():
    from densecode.eval.compare import compare_eval, paired_change

    a = _results([0, 0, 1, 1, 0, 1, 0, 0])
    b = _results([1, 1, 1, 0, 0, 1, 1, 0])
    mean, lo, hi, n = paired_change(a, b)
    # differences 1,1,0,-1,0,0,1,0: mean 0.25, sample sd 0.7071, half width 1.96 * sd / sqrt(8) = 0.49
    assert n == 8 and mean == pytest.approx(0.25)
    assert (lo, hi) == pytest.approx((0.25 - 0.49, 0.25 + 0.49), abs=1e-3)
    text, summary = compare_eval(a, b, "before", "after")
    assert "B - A = +0.250, paired 95% interval [-0.240, +0.740] over tasks (spans 0)" in text
    assert summary["paired_change"][3] == 8
    # sampled runs: a task's pass@1 is its passing share; only the tasks both runs hold count
    c = _results([2, 4, 0], n=4)
    d = {**_results([4, 4], n=4)}
    mean, lo, hi, n = paired_change(c, d)
    assert n == 2 and mean == pytest.approx(0.25)
    assert paired_change(_results([1]), _results([0])) is None
