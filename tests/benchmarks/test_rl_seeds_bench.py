"""benchmarks/experiments/rl_seeds.py: the independent check scores the model the runs started from."""

import importlib


def load_bench():
    return importlib.import_module("benchmarks.experiments.rl_seeds")


def test_base_model_follows_the_model_override():
    bench = load_bench()
    assert bench.base_model([]) == "densecode-tiny"
    assert bench.base_model(["train.lr=1e-5"]) == "densecode-tiny"
    assert bench.base_model(["model.name_or_path=/tmp/tiny", "train.lr=1e-5"]) == "/tmp/tiny"
    assert bench.base_model(["model.name_or_path=/a", "model.name_or_path = /b"]) == "/b"


def test_before_after_reads_codegens_pass_rate(tmp_path):
    import json

    bench = load_bench()
    evals = [{"kind": "eval", "step": 0, "eval/pass_rate": 0.40, "eval/sampled_pass_rate": 0.30},
             {"kind": "train", "step": 1, "reward/sequence_mean": 0.3},
             {"kind": "eval", "step": 40, "eval/pass_rate": 0.45, "eval/sampled_pass_rate": 0.36}]
    (tmp_path / "metrics.jsonl").write_text("\n".join(json.dumps(e) for e in evals) + "\n")
    row = bench.before_after(tmp_path)
    assert (row["step_before"], row["step_after"]) == (0, 40)
    assert (row["pass_rate_before"], row["pass_rate_after"]) == (0.40, 0.45)
    assert (row["sampled_pass_rate_before"], row["sampled_pass_rate_after"]) == (0.30, 0.36)
    assert "success_before" not in row


def test_an_unfinished_run_is_resumed_not_restarted(tmp_path, monkeypatch):
    bench = load_bench()
    calls = []

    class FakePopen:
        def __init__(self, cmd, **kwargs):
            calls.append(cmd)

    monkeypatch.setattr(bench.subprocess, "Popen", FakePopen)
    fresh, killed = tmp_path / "seed0", tmp_path / "seed1"
    fresh.mkdir()
    killed.mkdir()
    (killed / "config.yaml").write_text("train:\n  steps: 40\n")
    (killed / "metrics.jsonl").write_text("")
    bench.train("robotics", 0, fresh, [], None)
    bench.train("robotics", 1, killed, [], None)
    assert "--resume" not in calls[0]
    assert calls[1][calls[1].index("--resume") + 1] == str(killed)
    assert not bench.finished(killed)


def _finished_run(run_dir, steps=2):
    import json

    run_dir.mkdir(parents=True)
    (run_dir / "config.yaml").write_text(f"train:\n  steps: {steps}\n")
    evals = [{"kind": "eval", "step": 0, "eval/success_rate": 0.25}, {"kind": "eval", "step": steps,
                                                                        "eval/success_rate": 0.5}]
    (run_dir / "metrics.jsonl").write_text("\n".join(json.dumps(e) for e in evals) + "\n")
    rows = [{"pass": "greedy", "step": s, "values": v} for s, v in ((0, [0, 1, 0, 0]), (steps, [1, 1, 0, 0]))]
    (run_dir / "eval_tasks.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")


def test_finished_runs_are_archived_and_restored_on_a_machine_without_them(tmp_path, monkeypatch):
    import shutil
    import sys

    import pytest

    from densecode.errors import DensecodeError

    bench = load_bench()

    def no_training(cmd, **kwargs):
        raise AssertionError(f"trained although the run is finished or archived: {cmd}")

    monkeypatch.setattr(bench.subprocess, "Popen", no_training)
    work, archive = tmp_path / "work", tmp_path / "archive"
    _finished_run(work / "seed0")
    argv = ["rl_seeds.py", "--seeds", "0", "--workdir", str(work), "--archive", str(archive),
            "--set", "algo.ppo.negative_scale=0"]
    monkeypatch.setattr(sys, "argv", argv)
    assert bench.main() == 0
    assert (archive / "seed0.tar.xz").is_file()

    shutil.rmtree(work)  # the next machine: no run folders, only the archive kept with the project
    assert bench.main() == 0
    assert bench.before_after(work / "seed0")["success_after"] == 0.5

    shutil.rmtree(work)  # other settings must not reuse that archive
    monkeypatch.setattr(sys, "argv", argv[:-1] + ["algo.ppo.negative_scale=1"])
    with pytest.raises(DensecodeError, match="other settings"):
        bench.main()


def test_each_eval_pass_keeps_its_own_metric(tmp_path):
    """A multi-task run's eval_tasks.jsonl: every pass "<task>/<pass>" carries its task's headline metric."""
    import json

    from densecode.rl.report import eval_task_metric, eval_task_metrics

    rows = [{"step": 0, "pass": "robotics/greedy", "metric": "success_rate", "values": [1.0], "outcomes": ["success"]},
            {"step": 0, "pass": "codegen/greedy", "metric": "pass_rate", "values": [0.0], "outcomes": ["fail"]},
            {"step": 5, "pass": "codegen/greedy", "metric": "pass_rate", "values": [1.0], "outcomes": ["success"]}]
    (tmp_path / "eval_tasks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert eval_task_metrics(tmp_path) == {"robotics/greedy": "success_rate", "codegen/greedy": "pass_rate"}
    assert eval_task_metric(tmp_path) == "success_rate" and eval_task_metrics(tmp_path / "none") == {}
