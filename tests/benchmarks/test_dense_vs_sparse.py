"""benchmarks/experiments/dense_vs_sparse.py and what it stands on: the arms (per-component placement, spread),
pairing the runs' per-task eval outcomes, the resumable sweep, and the --quick pipeline end to end (~35 s CPU)."""

import importlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from densecode.errors import DensecodeError
from densecode.eval.sweep import (
    RunSpec,
    check_settings,
    prune_checkpoints,
    run_state,
    train_command,
)
from densecode.rewards.assembler import RewardAssembler, build_assembler
from densecode.rewards.base import ComponentOutput, RewardComponent

ROOT = Path(__file__).resolve().parents[2]


def load_bench():
    return importlib.import_module("benchmarks.experiments.dense_vs_sparse")


class Fixed(RewardComponent):
    def __init__(self, values):
        self.values = np.asarray(values, dtype=np.float32)

    def __call__(self, samples):
        return [ComponentOutput(self.values.copy()) for _ in samples]


# ------------------------------------------------------------------ arms


def test_robotics_ablation_arms_move_one_component_each():
    bench = load_bench()
    cfg = bench.load_cfg(bench.PUBLISHED_CONFIGS["robotics"], [])  # the GAE recipe the comparison ran on
    arms = bench.arms_for(cfg, ablation=True)
    assert set(arms) == {"dense", "sparse", "last-lint", "last-syntax", "last-sim", "spread-each", "spread-last"}
    # configs/robotics.yaml uses spread: split for sim, syntax and lint: the spread arms set all three alike.
    for target in ("each", "last"):
        assert sorted(arms[f"spread-{target}"][1:]) == [f"reward.components.{c}.spread={target}"
                                                        for c in ("lint", "sim", "syntax")]
    assert bench.arms_for(cfg, ablation=False) == {"dense": ["reward.mode=dense"], "sparse": ["reward.mode=sparse"]}
    # The arm's config, loaded as `densecode train` loads it, keeps every component but syntax per token ...
    arm_cfg = bench.load_cfg(bench.PUBLISHED_CONFIGS["robotics"], arms["last-syntax"])
    assert arm_cfg.reward.mode == "sparse" and sorted(arm_cfg.reward.sparse_keep_dense) == ["kl", "lint", "sim"]
    # ... so the assembler moves exactly the syntax values to the last token.
    comps = {"lint": Fixed([0, -1, 0, 0]), "syntax": Fixed([0.5, 0, -1, 0]), "sim": Fixed([0.2, 0.2, 0.2, 0.2]),
             "kl": Fixed([-0.1, -0.1, -0.1, -0.1])}
    weights = {"lint": 1.0, "syntax": 1.0, "sim": 1.0, "kl": 1.0}
    sample = SimpleNamespace(n_tokens=4)
    dense = RewardAssembler(comps, weights)([sample]).total[0]
    moved = RewardAssembler(comps, weights, mode="sparse",
                            sparse_keep_dense=tuple(arm_cfg.reward.sparse_keep_dense))([sample]).total[0]
    syntax = np.array([0.5, 0, -1, 0], dtype=np.float32)
    assert np.allclose(moved[:-1], (dense - syntax)[:-1])
    assert moved[-1] == pytest.approx(dense[-1] - syntax[-1] + syntax.sum())
    assert moved.sum() == pytest.approx(dense.sum())


def test_codegen_and_testgen_ablation_arms():
    bench = load_bench()
    codegen = bench.arms_for(bench.load_cfg("codegen", []), ablation=True)
    assert {"last-tests", "last-syntax", "last-lint", "last-dfg", "spread-each"} <= set(codegen)
    testgen = bench.arms_for(bench.load_cfg("testgen", []), ablation=True)
    assert set(testgen) == {"dense", "sparse", "last-testgen", "last-syntax", "spread-each", "spread-last"}


def test_credit_arms_set_the_estimator_of_the_configs_optimiser(tmp_path):
    bench = load_bench()
    ppo = bench.credit_arms(bench.load_cfg("robotics", []), 0.25)
    assert ppo == {"outcome+dense": ["algo.ppo.credit=outcome+dense", "algo.ppo.dense_scale=0.25"],
                   "outcome+local": ["algo.ppo.credit=outcome+local", "algo.ppo.dense_scale=0.25"],
                   "outcome": ["algo.ppo.credit=outcome"]}
    grpo = bench.credit_arms(bench.load_cfg("robotics-grpo", []), 0.5)
    assert grpo["outcome+local"][0] == "algo.grpo.credit=outcome+local"
    for arm, overrides in ppo.items():  # each arm loads as `densecode train` loads it
        assert bench.load_cfg("robotics", overrides).algo.ppo.credit == arm
    args = bench.parse_args(["--credit", "--out", str(tmp_path)])
    assert args.config == "robotics" and "credit-robotics" in args.archive  # the shipped recipe, its own archive
    with pytest.raises(SystemExit):
        bench.parse_args(["--credit", "--ablation"])
    with pytest.raises(DensecodeError, match="PPO or GRPO"):
        bench.credit_arms(bench.load_cfg("robotics", ["algo.name=rft"]), 0.5)


def test_arms_and_baseline_choose_a_subset_and_bad_names_exit_2(tmp_path, capsys):
    bench = load_bench()
    args = bench.parse_args(["--domain", "codegen", "--arms", "spread-last", "--baseline", "sparse", "--out",
                             str(tmp_path), "--analyse-only", "--archive", "none", "--publish", "none"])
    assert args.ablation and args.publish is None  # --arms implies --ablation; 'none' publishes nowhere
    for argv, message in ((["--arms", "spread-lst"], "no arm spread-lst on codegen; its arms are dense, sparse"),
                          (["--arms", "spread-last", "--baseline", "last-lint"],
                           "--baseline last-lint: not one of this run's arms (dense, sparse, spread-last)")):
        code = bench.main(["--domain", "codegen", *argv, "--out", str(tmp_path), "--analyse-only", "--archive",
                           "none", "--publish", "none"])
        assert code == 2 and message in capsys.readouterr().err


def test_unknown_component_in_sparse_keep_dense_is_an_error():
    from densecode.config import RewardConfig

    class Sim:
        def evaluate(self, programs, tasks):
            return []

    with pytest.raises(DensecodeError, match="sparse_keep_dense names unknown component.*synax"):
        build_assembler(RewardConfig(mode="sparse", sparse_keep_dense=["kl", "synax"]), "robotics", simulator=Sim())


def test_every_arm_shares_the_eval_schedule_and_both_passes():
    bench = load_bench()
    args = bench.parse_args(["--domain", "codegen", "--seeds", "0", "1", "--steps", "30", "--eval-tasks", "50",
                             "--out", "/tmp/x"])
    cfg = bench.load_cfg(args.config, ["domain=codegen"])
    specs = bench.build_specs(args, cfg, bench.arms_for(cfg, False), Path("/tmp/x"))
    assert [s.name for s in specs] == ["dense-seed0", "sparse-seed0", "dense-seed1", "sparse-seed1"]
    for s in specs:
        assert "train.eval_every=10" in s.overrides and "train.eval_tasks=50" in s.overrides
        assert f"tasks.eval_sampled_temperature={cfg.generation.temperature}" in s.overrides
        assert s.steps == 30
    assert specs[0].overrides[:-2] == specs[1].overrides[:-2]  # only the placement and the seed differ


# ------------------------------------------------------------------ pairing runs


def write_eval_tasks(run_dir: Path, values_by_step: dict[int, list[float]], ids=None, passes=("greedy", "sampled")):
    run_dir.mkdir(parents=True)
    with open(run_dir / "eval_tasks.jsonl", "w") as fh:
        for step, values in values_by_step.items():
            for p in passes:
                fh.write(json.dumps({"step": step, "pass": p, "temperature": 0.0, "metric": "success_rate",
                                     "task_ids": ids or [f"t{i}" for i in range(len(values))],
                                     "outcomes": ["x"] * len(values), "values": values}) + "\n")


def test_arm_arrays_pair_seeds_steps_and_tasks(tmp_path):
    bench = load_bench()
    for arm, off in (("dense", 1.0), ("sparse", 0.0)):
        for seed in (0, 1):
            write_eval_tasks(tmp_path / f"{arm}-seed{seed}", {0: [0, 0, 0], 10: [off, seed, 1], 20: [off, 0, 0]})
    # An unfinished run (no step 20 yet) limits the comparison to the steps every run has.
    (tmp_path / "sparse-seed1" / "eval_tasks.jsonl").write_text(
        "\n".join(line for line in (tmp_path / "sparse-seed1" / "eval_tasks.jsonl").read_text().splitlines()
                  if json.loads(line)["step"] != 20) + "\n")
    values, steps, metric = bench.arm_arrays(tmp_path, ["dense", "sparse"], [0, 1], "greedy")
    assert steps == [0, 10] and metric == "success_rate"
    assert values["dense"].shape == (2, 2, 3)
    assert values["dense"][1, 1].tolist() == [1.0, 1.0, 1.0] and values["sparse"][0, 1].tolist() == [0.0, 0.0, 1.0]


def test_arm_arrays_refuse_runs_that_saw_other_tasks(tmp_path):
    bench = load_bench()
    write_eval_tasks(tmp_path / "dense-seed0", {0: [1, 0]}, ids=["a", "b"])
    write_eval_tasks(tmp_path / "sparse-seed0", {0: [1, 0]}, ids=["a", "c"])
    with pytest.raises(DensecodeError, match="other tasks"):
        bench.arm_arrays(tmp_path, ["dense", "sparse"], [0], "greedy")
    with pytest.raises(DensecodeError, match="eval_tasks.jsonl is missing"):
        bench.arm_arrays(tmp_path, ["dense", "last-sim"], [0], "greedy")


def write_metrics(run_dir: Path, lengths: list[float], resumed: dict[int, float] | None = None) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    rows = [{"kind": "eval", "step": 0, "eval/success_rate": 0.5}]
    rows += [{"kind": "train", "step": i + 1, "rollout/response_length": v, "objective/kl": 0.1 * (i + 1)}
             for i, v in enumerate(lengths)]
    # A resumed run logs some steps again; the later row is the one that counts.
    rows += [{"kind": "train", "step": st, "rollout/response_length": v, "objective/kl": 0.0}
             for st, v in (resumed or {}).items()]
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_rollout_stats_average_first_and_last_steps_per_seed_then_over_seeds(tmp_path):
    bench = load_bench()
    write_metrics(tmp_path / "dense-seed0", [10, 10, 20, 20])
    write_metrics(tmp_path / "dense-seed1", [10, 10, 30, 99], resumed={4: 40})
    write_metrics(tmp_path / "sparse-seed0", [5, 5, 5, 5])
    write_metrics(tmp_path / "sparse-seed1", [5, 5, 5, 7])
    stats = bench.rollout_stats(tmp_path, ["dense", "sparse"], [0, 1], window=2)
    length = stats["dense"]["rollout/response_length"]
    assert length["first"] == {"mean": 10.0, "seed_sd": 0.0}
    # seed 0: last two steps 20, 20 -> 20; seed 1: 30 and the resumed step 4's 40 -> 35; over seeds 27.5, sd (ddof 1)
    assert length["last"]["mean"] == pytest.approx(27.5)
    assert length["last"]["seed_sd"] == pytest.approx(np.std([20, 35], ddof=1))
    assert stats["sparse"]["rollout/response_length"]["last"]["mean"] == pytest.approx(5.5)
    # A key no run logs is left out, not reported as zero.
    assert "rollout/truncated_frac" not in stats["dense"]
    md = bench.rollout_markdown(stats, window=2)
    assert "| dense | 10.0 → 27.5 ± 10.6 | " in md and "truncated share" not in md
    # An arm with a run that has no training rows yet is left out of the table.
    write_metrics(tmp_path / "last-sim-seed0", [])
    assert "last-sim" not in bench.rollout_stats(tmp_path, ["dense", "last-sim"], [0], window=2)


# ------------------------------------------------------------------ the sweep


def fake_checkpoint(run_dir: Path, step: int) -> None:
    ck = run_dir / "checkpoints" / f"step-{step:06d}"
    ck.mkdir(parents=True)
    (ck / "trainer_state.json").write_text(json.dumps({"step": step}))
    (run_dir / "checkpoints" / "latest").write_text(ck.name + "\n")


def test_sweep_skips_finished_runs_resumes_partial_ones_and_refuses_other_settings(tmp_path):
    spec = RunSpec("dense-seed0", tmp_path / "dense-seed0", "robotics", 10, ["reward.mode=dense"])
    assert run_state(spec) == "new"
    assert "--resume" not in train_command(spec, "new")
    (spec.run_dir).mkdir()
    (spec.run_dir / "config.yaml").write_text("domain: robotics\n")
    fake_checkpoint(spec.run_dir, 5)
    assert run_state(spec) == "partial"
    cmd = train_command(spec, "partial")
    assert cmd[cmd.index("--resume") + 1] == str(spec.run_dir)
    fake_checkpoint(spec.run_dir, 10)
    assert run_state(spec) == "finished"
    prune_checkpoints(spec.run_dir)
    assert [p.name for p in (spec.run_dir / "checkpoints").glob("step-*")] == ["step-000010"]
    (spec.run_dir / "sweep.json").write_text(json.dumps(spec.settings()))
    check_settings(spec)  # same settings: fine
    other = RunSpec("dense-seed0", spec.run_dir, "robotics", 20, ["reward.mode=dense"])
    with pytest.raises(DensecodeError, match="other settings.*steps.*another --out"):
        check_settings(other)


# ------------------------------------------------------------------ end to end


def test_quick_end_to_end_writes_results_and_reuses_finished_runs(tmp_path):
    out = tmp_path / "dvs"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "sim"), os.environ.get("PYTHONPATH", "")]),
               OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "benchmarks.experiments.dense_vs_sparse", "--quick", "--out", str(out),
           "--no-progress", "--json", str(tmp_path / "records.json"), "--archive", str(tmp_path / "archive")]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    res = json.loads((out / "dense_vs_sparse-robotics.json").read_text())
    assert set(res["passes"]) == {"greedy", "sampled"}
    comp = res["passes"]["greedy"]["comparison"]
    assert comp["steps"] == [0, 2] and comp["n_tasks"] == 8 and set(comp["arms"]) == {"dense", "sparse"}
    assert (out / "dense_vs_sparse-robotics.png").stat().st_size > 0
    assert "dense − sparse" in (out / "dense_vs_sparse-robotics.md").read_text()
    assert "training rollouts" in (out / "dense_vs_sparse-robotics.md").read_text()
    assert res["rollout_stats"]["dense"]["rollout/response_length"]["last"]["mean"] > 0
    # Equal wall time: each arm's eval times (the trainer's clock), and dense read where sparse's time ran out.
    timed = res["passes"]["greedy"]
    assert timed["seconds"]["dense"][0] == 0 and timed["seconds"]["dense"][1] > 0
    eq = timed["equal_time"]
    assert eq["baseline"] == "sparse" and eq["baseline_seconds"] == timed["seconds"]["sparse"][-1]
    assert eq["arms"]["dense"]["index"] in (0, 1) and "At equal wall time" in (out / "dense_vs_sparse-robotics.md").read_text()
    # The per-task outcomes average to the eval metric the trainer logged.
    logged = {json.loads(line)["step"]: json.loads(line) for line in (out / "dense-seed0" / "metrics.jsonl").read_text()
              .splitlines() if json.loads(line).get("kind") == "eval"}
    for line in (out / "dense-seed0" / "eval_tasks.jsonl").read_text().splitlines():
        row = json.loads(line)
        key = "eval/success_rate" if row["pass"] == "greedy" else "eval/sampled_success_rate"
        assert np.mean(row["values"]) == pytest.approx(logged[row["step"]][key])
    # Rollouts carry the optimiser's per-token arrays (credit diagnostics).
    rollout = json.loads((out / "sparse-seed0" / "rollouts.jsonl").read_text().splitlines()[0])
    assert len(rollout["algo"]["values"]) == len(rollout["total"])
    figures = json.loads((tmp_path / "records.json").read_text())
    assert any("dense − sparse at step 2" in f["figure"] for f in figures)
    # Rerun: nothing retrains (the run logs are not appended to); --diagnose reads a finished run.
    log_size = (out / "dense-seed0.log").stat().st_size
    again = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    assert again.returncode == 0 and "finished already" in again.stderr
    assert (out / "dense-seed0.log").stat().st_size == log_size
    diag = subprocess.run([sys.executable, "-m", "benchmarks.experiments.dense_vs_sparse", "--diagnose",
                           str(out / "sparse-seed0")], cwd=ROOT, env=env, capture_output=True, text=True)
    assert diag.returncode == 0, diag.stderr[-2000:]
    assert "Explained variance" in diag.stdout and (out / "sparse-seed0" / "diagnosis.json").is_file()
    # Several runs pooled: the diagnosis lands beside them, not in the default --out of another domain.
    pooled = subprocess.run([sys.executable, "-m", "benchmarks.experiments.dense_vs_sparse", "--diagnose",
                             str(out / "sparse-seed0"), str(out / "dense-seed0")], cwd=tmp_path, env=env,
                            capture_output=True, text=True)
    assert pooled.returncode == 0, pooled.stderr[-2000:]
    assert (out / "diagnosis.json").is_file() and not (tmp_path / "runs").exists()
    # Another machine: no run folders, only the archives. The sweep restores both runs, trains nothing, and the
    # analysis (and the credit diagnostics, from the archived rollouts) gives the same numbers.
    assert sorted(p.name for p in (tmp_path / "archive").iterdir()) == ["dense-seed0.tar.xz", "sparse-seed0.tar.xz"]
    shutil.rmtree(out)
    moved = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    assert moved.returncode == 0, moved.stderr[-2000:]
    assert moved.stderr.count("restored from") == 2 and not (out / "dense-seed0.log").exists()
    again_res = json.loads((out / "dense_vs_sparse-robotics.json").read_text())
    assert again_res["passes"] == res["passes"]
    assert not (out / "dense-seed0" / "checkpoints").exists()
