"""benchmarks/rl_seeds.py: the independent check scores the model the runs started from."""

from benchmark_scripts import load_script


def load_bench():
    return load_script("rl_seeds")


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
