"""benchmarks/experiments/recipe_sweep.py: arms resume, archive and restore by their settings."""

import importlib
import json
import shutil
import sys

import pytest

from densecode.errors import DensecodeError


def _finished_run(run_dir, steps=100):
    run_dir.mkdir(parents=True)
    (run_dir / "config.yaml").write_text(f"train:\n  steps: {steps}\n")
    rows = [{"kind": "train", "step": s, "rollout/task_success": 0.2 + s / 1000, "objective/kl": 0.1,
             "ppo/entropy": 0.12, "elapsed_s": 6.0 * s} for s in range(1, steps + 1)]
    rows += [{"kind": "eval", "step": s, "eval/success_rate": 0.5} for s in (0, steps)]
    (run_dir / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    # The domain's headline metric per task (here a coverage-like degree) and each task's outcome class: the
    # table reports task success, read from the outcomes.
    tasks = [{"pass": p, "step": s, "temperature": t, "metric": "coverage", "values": [0.5 + x / 4 for x in v],
              "outcomes": ["success" if x else "failing_assert" for x in v]}
             for p, t in (("greedy", 0.0), ("sampled", 1.0))
             for s, v in ((0, [0, 1, 0, 0]), (steps, [1, 1, 0, 1]))]
    (run_dir / "eval_tasks.jsonl").write_text("\n".join(json.dumps(r) for r in tasks) + "\n")


def test_an_arm_is_archived_restored_and_refused_under_other_overrides(tmp_path, monkeypatch):
    bench = importlib.import_module("benchmarks.experiments.recipe_sweep")

    def no_training(cmd, **kwargs):
        raise AssertionError(f"trained although the arm is finished or archived: {cmd}")

    monkeypatch.setattr(bench.subprocess, "Popen", no_training)
    work, archive = tmp_path / "work", tmp_path / "archive"
    _finished_run(work / "neg0-lr6e-5")
    argv = ["recipe_sweep.py", "--arms", "neg0-lr6e-5", "--workdir", str(work), "--archive", str(archive),
            "--json", str(tmp_path / "rows.json")]
    monkeypatch.setattr(sys, "argv", argv)
    assert bench.main() == 0
    assert (archive / "neg0-lr6e-5.tar.xz").is_file()
    first = json.loads((tmp_path / "rows.json").read_text())

    shutil.rmtree(work)  # the next machine holds only the archive
    assert bench.main() == 0
    assert json.loads((tmp_path / "rows.json").read_text()) == first
    assert first[0]["greedy"]["after"] == 0.75

    shutil.rmtree(work)
    monkeypatch.setitem(bench.DOMAIN_ARMS["robotics"], "neg0-lr6e-5", [*bench.NEG0, "train.lr=7e-5"])
    with pytest.raises(DensecodeError, match="other settings"):
        bench.main()


def test_an_arms_settings_are_its_command_overrides():
    bench = importlib.import_module("benchmarks.experiments.recipe_sweep")
    from pathlib import Path

    cmd = bench.command("neg0-lr1e-4", Path("/nonexistent/run"), 0)
    sets = [cmd[i + 1] for i, c in enumerate(cmd) if c == "--set"]
    assert sets == bench.settings("neg0-lr1e-4", 0)["overrides"]
    assert sets[-1] == "train.seed=0" and "train.lr=1e-4" in sets
