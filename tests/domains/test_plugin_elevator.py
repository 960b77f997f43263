"""The elevator example (examples/elevator) as a new user runs it: check, 2-step train, eval, explain.

Nothing here sets PYTHONPATH or changes directory to the example: its module and `base:` resolve from the config.
"""

import json
from pathlib import Path

import numpy as np
import pytest

from densecode.cli import main

CONFIG = Path(__file__).resolve().parents[2] / "examples" / "elevator" / "elevator.yaml"


@pytest.fixture(scope="module")
def checked_tasks(tmp_path_factory):
    out = tmp_path_factory.mktemp("elevator") / "tasks.jsonl"
    assert main(["check", "--config", str(CONFIG), "--tasks", "6", "--write-tasks", str(out)]) == 0
    tasks = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(tasks) == 18 and all(t["prompt"].endswith("def task_program():\n") for t in tasks)
    return out, tasks


def test_check_passes_and_covers_every_api_function(checked_tasks, capsys):
    assert main(["check", "--config", str(CONFIG), "--tasks", "6"]) == 0
    out = capsys.readouterr().out
    assert "reference runs: success 18" in out and "env checker: passed" in out
    assert "not called by any reference" not in out  # every binding was tried on a real step


def test_lint_knows_the_plugins_api(checked_tasks):
    """tasks.api names are builtins for lint: a correct reference gets no F821 'undefined name' penalty."""
    from densecode.eval.explain import score_generations

    _, tasks = checked_tasks
    rows = [{"prompt": t["prompt"], "completion": t["reference"], "task": t} for t in tasks[:6]]
    records = score_generations(rows, "densecode-tiny", str(CONFIG), [])
    for rec in records:
        assert rec["info"]["sim"]["sim_score"] == 1.0  # the elevator judged it on its own task's building
        assert not any(rec["components"]["lint"]), rec["diagnostics"]["lint"]


def test_explain_uses_the_elevator_simulator(checked_tasks, tmp_path):
    from densecode.eval.explain import score_generations

    _, tasks = checked_tasks
    task = next(t for t in tasks if "pick_up" in t["reference"])
    wrong = '    pick_up("Ana")\n'  # the doors are closed: the elevator's own robot error, on line 1 of the body
    rec = score_generations([{"prompt": task["prompt"], "completion": wrong, "task": task}], "densecode-tiny",
                            str(CONFIG), [])[0]
    reasons = [d.get("message") or str(d) for d in rec["diagnostics"]["sim"]]
    assert any("robot error in pick_up: the doors are closed" in r for r in reasons), reasons
    assert min(rec["components"]["sim"]) < 0


def test_eval_canonical_writes_the_usual_report(tmp_path):
    out = tmp_path / "ev"
    assert main(["eval", "--config", str(CONFIG), "--canonical", "--tasks", "6", "--out", str(out)]) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["benchmark"] == "elevator" and results["scores"]["success"] == 1.0
    assert (out / "report.md").is_file() and (out / "chart.png").is_file()


def test_train_two_steps_then_eval_generate_and_explain(tiny_model_dir, checked_tasks, tmp_path):
    tasks_file, _ = checked_tasks
    run = tmp_path / "run"
    assert main(["train", "--config", str(CONFIG), "--model", str(tiny_model_dir), "--steps", "2", "--no-progress",
                 "--output-dir", str(run), "--set", "train.batch_size=4", "--set", "train.eval_every=2",
                 "--set", "train.eval_tasks=4", "--set", "train.save_every=2"]) == 0
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if r["kind"] == "train"] == [1, 2]
    assert "reward/sim/token_mean" in rows[0] or any("reward/sim/token_mean" in r for r in rows)
    assert any("eval/success" in r for r in rows if r["kind"] == "eval")

    ev = tmp_path / "ev"
    assert main(["eval", "--config", str(CONFIG), "--model", str(run), "--tasks", "4", "--max-new-tokens", "24",
                 "--out", str(ev)]) == 0
    results = json.loads((ev / "results.json").read_text())
    assert len(results["tasks"]) == 4 and (ev / "report.md").is_file() and (ev / "chart.png").is_file()

    gen = tmp_path / "gen.jsonl"
    assert main(["generate", "--config", str(CONFIG), "--model", str(tiny_model_dir), "--prompts", str(tasks_file),
                 "--out", str(gen), "--max-new-tokens", "16", "--no-progress"]) == 0
    generated = [json.loads(line) for line in gen.read_text().splitlines()]
    assert generated[0]["task"]["task_id"].startswith("elevator-")  # the task travels with its completion
    page = tmp_path / "r.html"
    assert main(["explain", "--in", str(gen), "--model", str(tiny_model_dir), "--config", str(CONFIG),
                 "--limit", "4", "--out", str(page)]) == 0
    assert "<html" in page.read_text().lower()


def test_metrics_count_simulator_errors():
    from densecode.domains.plugin import PluginDomain

    records = [{"outcome": o} for o in ("success", "simulator_error", "robot_error", "success")]
    m = PluginDomain.metrics(None, records)
    assert m["success"] == 0.5 and m["simulator_error"] == 0.25 and m["no_robot_error"] == 0.75
    assert np.isclose(m["parses"], 1.0)


def test_check_runs_a_builtin_domains_references_too(capsys):
    assert main(["check", "--config", "robotics", "--tasks", "3", "--split", "test"]) == 0
    out = capsys.readouterr().out
    assert "domain 'robotics'" in out and "reference runs: success 3" in out
