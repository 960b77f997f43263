"""benchmarks/run_all.py: the JSON-records convention, status rows, RESULTS.md."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture()
def run_all(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("run_all_under_test", ROOT / "benchmarks" / "run_all.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # dataclasses look their module up there
    spec.loader.exec_module(module)
    bench_dir = tmp_path / "benchmarks"
    (bench_dir / "speed").mkdir(parents=True)
    for package in (bench_dir, bench_dir / "speed"):  # run as `python -m benchmarks.speed.good` from tmp_path
        (package / "__init__.py").write_text("")
    (bench_dir / "speed" / "good.py").write_text(
        "import json, os\n"
        "print('pool 50.0 programs/s vs naive 10.0: 5.0x')\n"
        "json.dump([{'figure': 'programs/s', 'value': 50.0, 'unit': 'programs/s', 'baseline': 'naive',\n"
        "            'baseline_value': 10.0, 'ratio': 5.0, 'note': '971/974 passed'}],\n"
        "          open(os.environ['DENSECODE_BENCH_JSON'], 'w'))\n")
    (bench_dir / "plain.py").write_text("import sys\nprint('quick' if '--quick' in sys.argv else 'full')\nprint('ratio 2.5x')\n")
    (bench_dir / "broken.py").write_text("raise SystemExit(3)\n")
    (bench_dir / "slow.py").write_text("import time\ntime.sleep(30)\n")
    monkeypatch.setattr(module, "ROOT", tmp_path)
    monkeypatch.setattr(module, "BENCH_DIR", bench_dir)
    monkeypatch.setattr(module, "RESULTS_MD", bench_dir / "RESULTS.md")
    monkeypatch.setattr(module, "RESULTS_JSON", bench_dir / "RESULTS.json")
    monkeypatch.setattr(module, "LOG_DIR", tmp_path / "logs")
    monkeypatch.setattr(module, "QUICK_OUT", tmp_path / "quick")
    benches = [
        module.Bench("good", "good figures", group="speed"),
        module.Bench("plain", "prints only"),  # mentions --quick: gets it in quick mode
        module.Bench("broken", "exits 3"),
        module.Bench("slow", "sleeps", quick_args=["--x"], quick_timeout_s=2),
        module.Bench("missing", "not written yet"),
    ]
    monkeypatch.setattr(module, "BENCHES", benches)
    monkeypatch.setattr(module, "BY_NAME", {b.name: b for b in benches})
    return module


def test_run_all_quick_writes_one_table_with_every_status(run_all, tmp_path):
    (tmp_path / "benchmarks" / "plain.py").write_text(
        "import sys\n# supports --quick\nprint('quick' if '--quick' in sys.argv else 'full')\n")
    assert run_all.main(["--quick", "--python", sys.executable]) == 0
    records = {r["benchmark"]: r for r in json.loads((tmp_path / "benchmarks" / "RESULTS.json").read_text())["records"]}
    assert records["good"]["value"] == 50.0 and records["good"]["ratio"] == 5.0 and records["good"]["status"] == "ok"
    assert records["plain"]["value"] is None and "last line: quick" in records["plain"]["note"]
    assert records["broken"]["status"] == "exit 3"
    assert records["slow"]["status"].startswith("timed out")
    assert records["missing"]["status"] == "not available"
    md = (tmp_path / "benchmarks" / "RESULTS.md").read_text()
    assert "| good | programs/s | 50.00 programs/s | naive | 10.00 | 5.00× | 971/974 passed |" in md
    assert "--quick" in md and "CPUs" in md
    assert md.count("\n| ") == 6  # header + 5 rows: one table


def test_run_all_only_keeps_earlier_rows(run_all, tmp_path):
    assert run_all.main(["--only", "good", "broken", "--python", sys.executable]) == 0
    assert run_all.main(["--only", "good", "--python", sys.executable]) == 0
    names = [r["benchmark"] for r in json.loads((tmp_path / "benchmarks" / "RESULTS.json").read_text())["records"]]
    assert names == ["good", "broken"]


def test_full_only_entry_runs_its_script_and_is_left_out_of_quick(run_all, tmp_path, monkeypatch):
    other = run_all.Bench("good-other", "the good script with other arguments", script_name="good", full_only=True,
                          full_args=["--other"], group="speed")
    benches = [*run_all.BENCHES, other]
    monkeypatch.setattr(run_all, "BENCHES", benches)
    monkeypatch.setattr(run_all, "BY_NAME", {b.name: b for b in benches})
    assert run_all.main(["--only", "good-other", "--python", sys.executable]) == 0
    rows = json.loads((tmp_path / "benchmarks" / "RESULTS.json").read_text())["records"]
    assert [(r["benchmark"], r["value"]) for r in rows] == [("good-other", 50.0)]
    assert rows[0]["command"].endswith("-m benchmarks.speed.good --other")
    # --quick runs the others and keeps good-other's full-budget row as it was.
    assert run_all.main(["--quick", "--python", sys.executable]) == 0
    rows = {r["benchmark"]: r for r in json.loads((tmp_path / "benchmarks" / "RESULTS.json").read_text())["records"]}
    assert rows["good-other"]["mode"] == "full" and rows["good"]["mode"] == "quick"


def test_read_records_tolerates_bad_output(run_all, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert run_all.read_records(bad, "x")[0]["figure"] == "(malformed JSON records)"
    bad.write_text(json.dumps([{"no_figure": 1}, {"figure": "f", "value": "3.5"}]))
    assert [(r["figure"], r["value"]) for r in run_all.read_records(bad, "x")] == [("f", 3.5)]
    assert run_all.read_records(tmp_path / "absent.json", "x") == []


@pytest.mark.slow
def test_gpu_check_tiny_runs_on_cpu(tmp_path):
    """benchmarks/gpu_check.sh end to end with GPU_CHECK_TINY=1 (~90 s on 2 cores)."""
    import os
    import subprocess

    env = {**os.environ, "GPU_CHECK_TINY": "1", "GPU_CHECK_OUT": str(tmp_path / "gpu"), "OMP_NUM_THREADS": "1",
           "PYTHON": sys.executable}
    proc = subprocess.run(["bash", str(ROOT / "benchmarks" / "gpu_check.sh")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = (tmp_path / "gpu" / "gpu_check.md").read_text()
    for phase in ("| generate |", "| reward |", "| update |", "tokens/s (whole step)", "eval-robotics: success pass@1"):
        assert phase in summary


def test_bench_records_helper_round_trips_through_run_all(run_all, tmp_path, monkeypatch):
    from densecode.eval.bench_records import emit, figure

    monkeypatch.delenv("DENSECODE_BENCH_JSON", raising=False)
    assert emit([figure("x", 1.0)]) is None  # run by hand: nothing written
    monkeypatch.setenv("DENSECODE_BENCH_JSON", str(tmp_path / "r.json"))
    emit([figure("tokens/s", 300, "tok/s", baseline="TRL", baseline_value=100)])
    emit([figure("no baseline", 2.0, note="n")])
    records = run_all.read_records(tmp_path / "r.json", "b")
    assert [(r["figure"], r["ratio"]) for r in records] == [("tokens/s", 3.0), ("no baseline", None)]


def test_quick_training_comparisons_archive_nothing_with_the_project():
    """A smoke run's archived runs would stand in for the full budget's (same run names): run_all's quick budget of
    every script that archives finished runs either passes --quick (no archive by default) or --archive none."""
    spec = importlib.util.spec_from_file_location("run_all_for_archive", ROOT / "benchmarks" / "run_all.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    archiving = [b for b in module.BENCHES
                 if b.script.is_file() and "--archive" in b.script.read_text() and not b.full_only]
    assert {b.name for b in archiving} >= {"dense_vs_sparse", "optimizers", "multitask"}
    for b in archiving:
        args = b.quick_args
        assert "--quick" in args or args[args.index("--archive") + 1:][:1] == ["none"], b.name


def _allocate_mib(n):
    block = bytearray(n * 1024 * 1024)
    block[::4096] = b"x" * len(block[::4096])  # touch every page so it is resident
    return len(block)


def test_in_child_process_reports_the_child_peak_rss():
    from densecode.eval.bench_records import in_child_process

    small, rss_small = in_child_process(_allocate_mib, 1)
    big, rss_big = in_child_process(_allocate_mib, 300)
    assert (small, big) == (1024 * 1024, 300 * 1024 * 1024)
    # each child's own high-water mark: the 300 MiB run peaks ~300 MiB above the 1 MiB one, whatever ran before
    assert 250 < rss_big - rss_small < 400


def test_in_child_process_peak_ignores_the_parents_memory():
    from densecode.eval.bench_records import in_child_process

    ballast = bytearray(400 * 1024 * 1024)
    ballast[::4096] = b"x" * len(ballast[::4096])  # the parent holds 400 MiB resident when it starts the child
    _, rss = in_child_process(_allocate_mib, 1)
    assert rss < 350, rss
    del ballast
