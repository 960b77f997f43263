"""benchmarks/speed/multitask_scheduler_cost.py --from-run: the scheduler's share of a step from finished runs'
metrics."""

import json

import pytest

from benchmarks.speed import multitask_scheduler_cost as cost_script
from densecode.eval.run_archive import pack


def _run(tmp_path, name, steps):
    run = tmp_path / name
    run.mkdir()
    rows = [{"kind": "train", "step": i + 1, "time/step_s": s, "time/scheduler_s": sch, "time/synergy_probe_s": pr}
            for i, (s, sch, pr) in enumerate(steps)]
    rows.insert(1, {"kind": "eval", "step": 1, "eval/average/score": 0.5})
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return run


def test_from_run_folder_and_archive_agree_and_skip_the_warmup_step(tmp_path, capsys):
    # Step 1 (the warm-up, 100 s) must not count: the means are over steps 2-3 only.
    run = _run(tmp_path, "astor-seed0", [(100.0, 9.0, 9.0), (10.0, 0.1, 0.0), (10.0, 0.5, 0.4)])
    archive = pack(run, tmp_path / "archive", step=3)
    cost_script.from_runs([run])
    folder_out = capsys.readouterr().out
    assert "2 steps, step 10.000 s, scheduler 0.3000 s = 3.00% (probe 0.2000 s = 2.00%)" in folder_out
    cost_script.from_runs([archive])
    assert capsys.readouterr().out.split(":", 1)[1] == folder_out.split(":", 1)[1]


def test_from_runs_pools_every_run(tmp_path, capsys):
    a = _run(tmp_path, "a", [(1.0, 1.0, 1.0), (10.0, 1.0, 0.0)])
    b = _run(tmp_path, "b", [(1.0, 1.0, 1.0), (30.0, 1.0, 0.0), (20.0, 1.0, 0.0)])
    cost_script.from_runs([a, b])
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("all runs: 3 steps, step 20.000 s, scheduler 1.0000 s = 5.00%")


@pytest.mark.parametrize("kind", ["missing", "no_metrics", "single_task"])
def test_bad_runs_exit_2_naming_the_run(tmp_path, capsys, kind):
    run = tmp_path / "r"
    if kind == "no_metrics":
        run.mkdir()
    elif kind == "single_task":  # a run without the multi domain's scheduler timing
        run.mkdir()
        (run / "metrics.jsonl").write_text(json.dumps({"kind": "train", "step": 1, "time/step_s": 1.0}) + "\n"
                                           + json.dumps({"kind": "train", "step": 2, "time/step_s": 1.0}) + "\n")
    with pytest.raises(SystemExit) as exc:
        cost_script.from_runs([run])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1
    assert str(run) in err
