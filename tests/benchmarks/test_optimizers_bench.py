"""benchmarks/experiments/optimizers.py: equal budgets per variant, seeds, and a tiny end-to-end run (~30 s CPU)."""

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def load_bench():
    return importlib.import_module("benchmarks.experiments.optimizers")


def sets(spec) -> dict:
    return dict(o.split("=", 1) for o in spec.overrides)


def test_every_variant_samples_the_same_responses_per_step():
    bench = load_bench()
    args = bench.parse_args(["--responses-per-step", "32", "--group-size", "8"])
    assert args.names == ["ppo-dense", "ppo-sparse", "grpo", "microcoder", "microcoder-dense"]
    assert args.seeds == [0, 1, 2] and args.steps == 150
    out = Path("/tmp/none")
    for name in args.names:
        for seed in args.seeds:
            spec = bench.variant_spec(name, seed, args, out)
            o = sets(spec)
            assert spec.run_dir == out / f"{name}-seed{seed}" and o["train.seed"] == str(seed)
            responses = int(o["train.batch_size"]) * (int(o["algo.grpo.group_size"]) if "algo.grpo.group_size" in o
                                                      else 1)
            assert responses == 32, name
            assert spec.steps == 150
    assert sets(bench.variant_spec("ppo-sparse", 0, args, out))["reward.mode"] == "sparse"
    assert sets(bench.variant_spec("ppo-dense", 0, args, out))["reward.mode"] == "dense"
    assert bench.variant_spec("microcoder", 0, args, out).config == "robotics-microcoder"
    quick = bench.parse_args(["--quick"])
    assert quick.seeds == [0] and quick.steps == 20
    assert bench.parse_args(["--seed", "4"]).seeds == [4]


def test_tiny_run_end_to_end_and_reuse(tmp_path):
    out = tmp_path / "opt"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "sim"), os.environ.get("PYTHONPATH", "")]),
               OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "benchmarks.experiments.optimizers", "--variants", "ppo-dense,microcoder",
           "--seeds", "0", "--steps", "1", "--eval-every", "1", "--eval-tasks", "6", "--responses-per-step", "4",
           "--group-size", "2", "--set", "generation.max_new_tokens=32", "--n-boot", "100", "--out", str(out),
           "--no-progress", "--archive", str(tmp_path / "archive")]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    md = (out / "optimizers.md").read_text()
    assert "| ppo-dense | 1 |" in md and "| microcoder | 1 |" in md
    assert "Paired difference to ppo-dense at step 1" in md
    data = json.loads((out / "optimizers.json").read_text())
    assert [s for s, _ in data["results"]["microcoder"]["0"]["success"]] == [0, 1]
    assert (out / "optimizers.png").stat().st_size > 0
    # The sampled pass (T=1.0 for every variant) has its own curve and paired table.
    assert [s for s, _ in data["results"]["microcoder"]["0"]["sampled_success"]] == [0, 1]
    assert "sampled at T=1.0" in md and "(held-out success_rate, sampled;" in md
    assert "sampled_success" in json.dumps(data) and data["paired_sampled"]
    again = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    assert again.returncode == 0 and again.stderr.count("finished already") == 2
    # Another machine: only the archive; both runs are restored, not retrained, and the tables are the same.
    import shutil

    shutil.rmtree(out)
    moved = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    assert moved.returncode == 0 and moved.stderr.count("restored from") == 2, moved.stderr[-2000:]
    assert json.loads((out / "optimizers.json").read_text())["results"] == data["results"]
