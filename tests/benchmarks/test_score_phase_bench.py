"""benchmarks/speed/score_phase.py --from-runs: the score phase's share of the step read from finished runs' metrics."""

import importlib
import json


def write_run(run_dir, shares):
    run_dir.mkdir()
    rows = [{"kind": "eval", "step": 0}]
    for step, (cpu, wall) in enumerate(shares, start=1):
        rows.append({"kind": "train", "step": step, "time/score_cpu_s": cpu, "time/step_cpu_s": 10.0,
                     "time/score_s": wall, "time/step_s": 10.0})
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_from_runs_reports_the_median_share_without_the_first_step(tmp_path, capsys):
    bench = importlib.import_module("benchmarks.speed.score_phase")
    # The first step (one-time costs) is left out: medians 0.9 s / 10 s CPU and 1.2 s / 10 s wall.
    write_run(tmp_path / "a", [(5.0, 5.0), (0.8, 1.1), (0.9, 1.2)])
    write_run(tmp_path / "b", [(5.0, 5.0), (1.0, 1.3)])
    assert bench.main(["--from-runs", str(tmp_path / "a"), str(tmp_path / "b")]) == 0
    out = capsys.readouterr().out
    assert "over 3 steps of 2 run(s): CPU median 9.0%" in out and "wall median 12.0%" in out
    assert bench.main(["--from-runs", str(tmp_path / "missing")]) == 2
    assert "metrics.jsonl is missing" in capsys.readouterr().err
