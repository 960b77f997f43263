"""Does `densecode train --domain X` improve held-out success? N seeds, before vs after.

Runs the default command of a domain (robotics, codegen, testgen, ...) once per seed (each in its own run
directory) and prints, per seed and as mean +- sd over seeds, the held-out eval of the run at step 0 (before) and
at the last eval step (after): success rate (greedy, and sampled when the config sets it), score, and for robotics
executability and parse rate. With `--check-tasks N` it also scores the base model and every run's final checkpoint
on another draw (`densecode.embedded.quality`, the first N tasks of the domain's test split at seed 0, greedy and at
T=1.0), which the defaults were not chosen on. Seed noise of a 200-task eval is about +-0.02-0.03, so a gain smaller
than that is no gain. Finished runs are reused (resumable). With `--archive DIR` each finished run's result files
(no weights) are also archived in DIR (densecode.eval.run_archive), and a later call on a machine without the run
folders restores them instead of training again (a run archived with other settings is refused); `--check-tasks`
needs the weights, so it needs the run folders themselves.

    .venv/bin/python -m benchmarks.experiments.rl_seeds --seeds 0 1 2 --parallel 2                       # robotics
    .venv/bin/python -m benchmarks.experiments.rl_seeds --domain codegen --seeds 0 1 2 --parallel 2 --check-tasks 300
    .venv/bin/python -m benchmarks.experiments.rl_seeds --summarize /tmp/rl/A_s0 /tmp/rl/A_s1   # existing runs
    .venv/bin/python -m benchmarks.experiments.rl_seeds --seeds 0 1 2 --workdir runs/rl_seeds_robotics_300 --steps 300 \
        --set algo.skip_zero_advantage_rows=true --archive benchmarks/results/runs/rl_seeds-robotics-300   # kept

Extra `--set KEY=VALUE` overrides are passed through to every training run; `--config NAME` trains another shipped
config of the domain instead of its default (e.g. `--domain robotics --config robotics-grpo`).
Machine-readable figures (benchmarks/run_all.py convention) go to --json PATH or
$DENSECODE_BENCH_JSON when either is set.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# codegen's headline is `pass_rate` (all hidden asserts pass); the other domains' is `success_rate`
METRICS = {"success": "eval/success_rate", "sampled_success": "eval/sampled_success_rate",
           "pass_rate": "eval/pass_rate", "sampled_pass_rate": "eval/sampled_pass_rate", "score": "eval/score",
           "executability": "eval/executability", "parse": "eval/parse_rate"}


def read_evals(run_dir: Path) -> dict[int, dict]:
    """Eval records of one run, by step (a resumed run's later record for a step wins)."""
    path = run_dir / "metrics.jsonl"
    if not path.is_file():
        raise SystemExit(f"no metrics.jsonl in {run_dir}: did the training run finish? (see its log)")
    evals = {}
    for line in path.read_text().splitlines():
        record = json.loads(line)
        if record.get("kind") == "eval":
            evals[int(record["step"])] = record
    if not evals:
        raise SystemExit(f"{path} has no eval records: set train.eval_every > 0")
    return evals


def before_after(run_dir: Path) -> dict:
    evals = read_evals(run_dir)
    first, last = min(evals), max(evals)
    row = {"run": str(run_dir), "step_before": first, "step_after": last}
    for name, key in METRICS.items():
        if key in evals[first] and key in evals[last]:  # sampled_* only with tasks.eval_sampled_temperature
            row[f"{name}_before"] = float(evals[first][key])
            row[f"{name}_after"] = float(evals[last][key])
    return row


def eval_task_values(run_dir: Path) -> dict[str, dict[int, list[float]]]:
    """Per eval pass (greedy, sampled): {step: per-task values} from the run's eval_tasks.jsonl; where the domain's
    headline metric is not success itself (testgen: coverage), also "<pass> success" from the tasks' outcomes."""
    from densecode.rl.report import SUCCESS_METRICS, eval_task_metric, eval_task_rows

    out: dict[str, dict[int, list[float]]] = {}
    for (step, name), values in eval_task_rows(run_dir).items():
        out.setdefault(name, {})[step] = values
    if eval_task_metric(run_dir) not in (None, *SUCCESS_METRICS):
        for (step, name), values in eval_task_rows(run_dir, values="success").items():
            out.setdefault(f"{name} success", {})[step] = values
    return out


def paired_gains(run_dirs: list[Path], n_boot: int = 2000) -> dict[str, dict]:
    """After − before per eval pass, paired over seeds x tasks (every run evaluates the same tasks at its first
    and last eval), with the two-way bootstrap interval of densecode.eval.paired_bootstrap."""
    import numpy as np

    from densecode.eval.paired_bootstrap import compare_arms

    per_run = [eval_task_values(d) for d in run_dirs]
    out = {}
    for name in sorted(set.intersection(*(set(r) for r in per_run)) if per_run else []):
        before, after = [], []
        for r in per_run:
            steps = sorted(r[name])
            before.append([r[name][steps[0]]])
            after.append([r[name][steps[-1]]])
        if len({len(b[0]) for b in before} | {len(a[0]) for a in after}) != 1:
            continue
        res = compare_arms({"before": np.array(before), "after": np.array(after)}, [0], baseline="before",
                           n_boot=n_boot)
        d = res["differences"]["after"]
        per_seed = [float(np.mean(a[0]) - np.mean(b[0])) for a, b in zip(after, before)]
        out[name] = {"before": res["arms"]["before"]["mean"][0], "after": res["arms"]["after"]["mean"][0],
                     "gain": d["mean"][0], "lo": d["lo"][0], "hi": d["hi"][0], "per_seed_gain": per_seed,
                     "tasks": res["n_tasks"], "seeds": res["n_seeds"]}
    return out


def paired_versus(run_dirs: list[Path], other_dirs: list[Path], n_boot: int = 2000) -> dict[str, dict]:
    """This set of runs − another set at their last eval (seed i paired with seed i, same tasks), per eval pass."""
    import numpy as np

    from densecode.eval.paired_bootstrap import compare_arms

    out = {}
    mine, theirs = [eval_task_values(d) for d in run_dirs], [eval_task_values(d) for d in other_dirs]
    for name in sorted(set.intersection(*(set(r) for r in mine + theirs))):
        a = np.array([[r[name][max(r[name])]] for r in mine])
        b = np.array([[r[name][max(r[name])]] for r in theirs])
        if a.shape != b.shape:
            continue
        d = compare_arms({"these": a, "other": b}, [0], baseline="other", n_boot=n_boot)["differences"]["these"]
        out[name] = {"diff": d["mean"][0], "lo": d["lo"][0], "hi": d["hi"][0]}
    return out


def mean_sd(values: list[float]) -> str:
    if len(values) == 1:
        return f"{values[0]:.3f}"
    return f"{statistics.mean(values):.3f} +- {statistics.stdev(values):.3f}"


def finished(run_dir: Path) -> bool:
    """A run whose last checkpoint and final eval are written (reused instead of retrained)."""
    try:
        evals = read_evals(run_dir)
    except SystemExit:
        return False
    cfg = run_dir / "config.yaml"
    steps = None
    if cfg.is_file():
        import yaml

        steps = (yaml.safe_load(cfg.read_text()) or {}).get("train", {}).get("steps")
    return steps is not None and max(evals) >= int(steps)


def last_checkpoint(run_dir: Path) -> Path:
    ckpts = sorted((run_dir / "checkpoints").glob("step-*"))
    if not ckpts:
        raise SystemExit(f"no checkpoints in {run_dir}: set train.save_every > 0")
    return ckpts[-1] / "model"


def base_model(overrides: list[str]) -> str:
    """The runs' starting model: the shipped one unless `--set model.name_or_path=...` names another (the last wins)."""
    for item in reversed(overrides):
        key, _, value = item.partition("=")
        if key.strip() == "model.name_or_path":
            return value.strip()
    return "densecode-tiny"


def check(domain: str, model: str, n_tasks: int) -> dict:
    """Greedy and T=1.0 success of `model` on the first n test tasks at seed 0 (another draw than the run's eval)."""
    out = Path(tempfile.mkstemp(suffix=".json")[1])
    subprocess.run([sys.executable, "-m", "densecode.embedded.quality", "--model", model, "--only", domain,
                    "--tasks", str(n_tasks), "--json", str(out)], check=True, stdout=subprocess.DEVNULL)
    per = json.loads(out.read_text())[domain]
    out.unlink()
    return {label: s["success"] for label, s in per.items()}


SETTINGS_FILE = "rl_seeds.json"


def settings(domain: str, seed: int, overrides: list[str], steps: int | None, config: str | None = None) -> dict:
    """What makes a run this script's run (written into its folder, checked against an archive's)."""
    out = {"domain": domain, "seed": seed, "overrides": list(overrides), "steps": steps}
    if config is not None:  # only when given, so the runs archived before --config existed keep their settings
        out["config"] = config
    return out


def train(domain: str, seed: int, out_dir: Path, overrides: list[str], steps: int | None,
          config: str | None = None) -> subprocess.Popen:
    source = ["--config", config] if config is not None else ["--domain", domain]
    cmd = [str(Path(sys.executable).parent / "densecode"), "train", *source, "--no-progress",
           "--output-dir", str(out_dir), "--set", f"train.seed={seed}"]
    if (out_dir / "config.yaml").is_file():
        # An unfinished run (a killed session) continues from its last checkpoint with its own config.yaml.
        cmd += ["--resume", str(out_dir)]
    for item in overrides:
        cmd += ["--set", item]
    if steps is not None:
        cmd += ["--steps", str(steps)]
    print("$", " ".join(cmd), flush=True)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / SETTINGS_FILE).write_text(json.dumps(settings(domain, seed, overrides, steps, config), indent=1))
    with open(out_dir.with_suffix(".log"), "a") as log:  # the child keeps its own copy; a resumed run appends
        return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--domain", default="robotics", help="the domain whose default run is measured")
    parser.add_argument("--config", default=None,
                        help="train this config (a file or a name in configs/, of --domain's domain) instead of the "
                             "domain's default, e.g. codegen-gae")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--check-tasks", type=int, default=0, metavar="N",
                        help="also score base and final models on N test tasks of another draw (0 = off)")
    parser.add_argument("--parallel", type=int, default=1, help="trainings at once (each uses ~1 core)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--steps", type=int, default=None, help="override train.steps")
    parser.add_argument("--workdir", default=None, help="where run directories go (default: a temp dir)")
    parser.add_argument("--summarize", nargs="+", default=None, metavar="RUN_DIR",
                        help="only summarise existing run directories, train nothing")
    parser.add_argument("--versus", nargs="+", default=None, metavar="RUN_DIR",
                        help="other finished runs, one per seed in the same order: print these − those at the last "
                             "eval with the paired seeds x tasks interval (e.g. the RFT runs at equal samples)")
    parser.add_argument("--archive", default=None, metavar="DIR",
                        help="archive each finished run's result files here, and restore runs from here")
    parser.add_argument("--json", default=os.environ.get("DENSECODE_BENCH_JSON"))
    args = parser.parse_args()

    wall = {}
    if args.summarize:
        run_dirs = [Path(p) for p in args.summarize]
    else:
        workdir = Path(args.workdir or tempfile.mkdtemp(prefix=f"{args.domain}_rl_seeds_"))
        workdir.mkdir(parents=True, exist_ok=True)
        run_dirs = [workdir / f"seed{seed}" for seed in args.seeds]
        if args.archive:
            from densecode.eval.run_archive import restore_if_archived

            for seed, d in zip(args.seeds, run_dirs):
                if not finished(d) and restore_if_archived(Path(args.archive), d, settings(
                        args.domain, seed, args.overrides, args.steps, args.config), SETTINGS_FILE) is not None:
                    print(f"seed {seed}: restored from {args.archive}", flush=True)
        pending = [(seed, d) for seed, d in zip(args.seeds, run_dirs) if not finished(d)]
        running: list[tuple[subprocess.Popen, Path, float]] = []
        while pending or running:
            while pending and len(running) < max(1, args.parallel):
                seed, run_dir = pending.pop(0)
                running.append((train(args.domain, seed, run_dir, args.overrides, args.steps, args.config), run_dir,
                                time.perf_counter()))
            time.sleep(2)
            for proc, run_dir, start in list(running):
                if proc.poll() is not None:
                    running.remove((proc, run_dir, start))
                    wall[str(run_dir)] = time.perf_counter() - start
                    if proc.returncode != 0:
                        print(f"training for {run_dir} failed (exit {proc.returncode}); log: {run_dir.with_suffix('.log')}")
                        return 1
        if args.archive:
            from densecode.eval.run_archive import archive_finished

            for seed, d in zip(args.seeds, run_dirs):
                if not (d / SETTINGS_FILE).is_file():  # a run of an older version of this script
                    (d / SETTINGS_FILE).write_text(json.dumps(
                        settings(args.domain, seed, args.overrides, args.steps, args.config), indent=1))
                if archive_finished(d, Path(args.archive), max(read_evals(d))) is not None:
                    print(f"archived {d} in {args.archive}", flush=True)

    rows = [before_after(d) for d in run_dirs]
    names = [n for n in METRICS if all(f"{n}_before" in r for r in rows)]
    header = f"{'run':<28} {'steps':>7}  " + "  ".join(f"{n + ' before->after':>26}" for n in names) + f"  {'wall':>7}"
    print(header)
    for row in rows:
        cells = "  ".join(f"{row[f'{n}_before']:>12.3f} -> {row[f'{n}_after']:<10.3f}" for n in names)
        w = wall.get(row["run"])
        print(f"{Path(row['run']).name:<28} {row['step_before']:>3}->{row['step_after']:<3}  {cells}  "
              f"{(f'{w / 60:.1f}m' if w else '-'):>7}")
    summary = {}
    for n in names:
        before = [r[f"{n}_before"] for r in rows]
        after = [r[f"{n}_after"] for r in rows]
        summary[n] = {"before": before, "after": after}
        print(f"{n:<14} before {mean_sd(before):<16} after {mean_sd(after):<16} "
              f"gain {mean_sd([a - b for a, b in zip(after, before)])}  (n={len(rows)})")
    paired = paired_gains(run_dirs)
    from densecode.rl.report import eval_task_metrics

    metrics = eval_task_metrics(run_dirs[0]) if run_dirs else {}
    for name, g in paired.items():
        label = name if " " in name else f"{name} {metrics.get(name, '')}".strip()  # e.g. "greedy coverage"
        print(f"paired {label:<16} {g['before']:.3f} -> {g['after']:.3f}  gain {g['gain']:+.3f} "
              f"[{g['lo']:+.3f}, {g['hi']:+.3f}] (95%, {g['seeds']} seeds x {g['tasks']} tasks; per seed "
              + " ".join(f"{x:+.3f}" for x in g["per_seed_gain"]) + ")")
    versus = paired_versus(run_dirs, [Path(p) for p in args.versus]) if args.versus else {}
    for name, g in versus.items():
        print(f"versus {name:<8} these - those {g['diff']:+.3f} [{g['lo']:+.3f}, {g['hi']:+.3f}] (95%, paired)")
    checks = {}
    if args.check_tasks:
        base = check(args.domain, base_model(args.overrides), args.check_tasks)
        checks = {"base": base, "runs": {}}
        for d in run_dirs:
            checks["runs"][str(d)] = check(args.domain, str(last_checkpoint(d)), args.check_tasks)
        for label, before in base.items():
            after = [checks["runs"][str(d)][label] for d in run_dirs]
            print(f"check {label:<8} ({args.check_tasks} other test tasks) before {before:.3f} after {mean_sd(after):<16} "
                  f"gain {mean_sd([a - before for a in after])}")
    if args.json:
        Path(args.json).write_text(json.dumps({"domain": args.domain, "runs": rows, "summary": summary,
                                               "paired": paired, "check": checks, "wall_s": wall}, indent=1))
    return 0


if __name__ == "__main__":
    from benchmarks.common import exit_with

    exit_with(main)
