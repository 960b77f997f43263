"""Dense token rewards vs the same components summed on the last token (standard PPO).

Trains the embedded model on the robotics suite twice per seed — `reward.mode=dense`
and `reward.mode=sparse` — with the same config, seed and step budget, and reports
held-out success rate and executability curves side by side (mean ± sd over seeds),
a PNG of both, and the final difference. Sparse mode keeps the KL term per token in
both runs (only the task components move to the last token), so the two runs differ
in reward *placement* only: each sample's summed reward is identical.

    .venv/bin/python benchmarks/dense_vs_sparse.py --seeds 0 1 2 --parallel 2 [--set k=v ...]

Runs go to runs/dense_vs_sparse/<mode>-seed<N>/ (existing finished runs are reused,
so an interrupted sweep continues); the table and dense_vs_sparse.png go there too.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODES = ("dense", "sparse")
METRICS = ("eval/success_rate", "eval/sampled_success_rate", "eval/executability")


def run_dir(out: Path, mode: str, seed: int) -> Path:
    return out / f"{mode}-seed{seed}"


def train_command(out: Path, mode: str, seed: int, args) -> list[str] | None:
    """The training command for one (mode, seed), or None when that run has finished already."""
    d = run_dir(out, mode, seed)
    if (d / "summary.md").is_file():
        print(f"reusing finished run {d}", file=sys.stderr)
        return None
    cmd = [sys.executable, "-m", "densecode.cli", "train", "--domain", "robotics", "--config", args.config,
           "--output-dir", str(d), "--steps", str(args.steps), "--set", f"reward.mode={mode}",
           "--set", f"train.seed={seed}", "--set", f"train.eval_every={args.eval_every}",
           "--set", f"train.eval_tasks={args.eval_tasks}", "--set", "train.save_every=0"]
    for kv in args.set or []:
        cmd += ["--set", kv]
    if (d / "checkpoints" / "latest").is_file():
        cmd += ["--resume", str(d)]
    return cmd


def train_all(out: Path, args) -> None:
    """Every (mode, seed) run, `args.parallel` at a time (each uses about one core)."""
    pending = [(m, s) for s in args.seeds for m in MODES]
    running: list[tuple[subprocess.Popen, str]] = []
    env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
    while pending or running:
        while pending and len(running) < max(1, args.parallel):
            mode, seed = pending.pop(0)
            cmd = train_command(out, mode, seed, args)
            if cmd is None:
                continue
            print("$", " ".join(cmd), file=sys.stderr, flush=True)
            running.append((subprocess.Popen(cmd, cwd=ROOT, env=env), f"{mode}-seed{seed}"))
        time.sleep(1)
        for proc, name in list(running):
            if proc.poll() is not None:
                running.remove((proc, name))
                if proc.returncode != 0:
                    for other, _ in running:
                        other.terminate()
                    raise SystemExit(f"training run {name} failed (exit {proc.returncode})")


def eval_curve(d: Path) -> dict[int, dict[str, float]]:
    curve = {}
    for line in (d / "metrics.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if rec.get("kind") == "eval":
            curve[int(rec["step"])] = {k: rec[k] for k in METRICS if k in rec}
    return curve


def mean_sd(xs: list[float]) -> tuple[float, float]:
    if not xs:
        return math.nan, math.nan
    return statistics.fmean(xs), (statistics.stdev(xs) if len(xs) > 1 else 0.0)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--steps", type=int, default=None, help="steps per run (default: the config's train.steps)")
    p.add_argument("--config", default="configs/robotics.yaml")
    p.add_argument("--eval-every", type=int, default=None, help="default: the config's train.eval_every")
    p.add_argument("--eval-tasks", type=int, default=200)
    p.add_argument("--out", default="runs/dense_vs_sparse")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="extra config override for both modes")
    p.add_argument("--parallel", type=int, default=1, help="training runs at once (each uses about one core)")
    args = p.parse_args()
    if args.steps is None or args.eval_every is None:
        sys.path.insert(0, str(ROOT))
        from densecode.config import load_config

        train_cfg = load_config(ROOT / args.config).train
        args.steps = train_cfg.steps if args.steps is None else args.steps
        args.eval_every = train_cfg.eval_every if args.eval_every is None else args.eval_every
    out = (ROOT / args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    train_all(out, args)
    curves = {m: {s: eval_curve(run_dir(out, m, s)) for s in args.seeds} for m in MODES}

    steps = sorted(set.intersection(*[set(c) for m in MODES for c in curves[m].values()]))
    # eval/sampled_success_rate exists only when the config sets tasks.eval_sampled_temperature.
    metrics = tuple(k for k in METRICS if all(k in c[st] for m in MODES for c in curves[m].values() for st in steps))
    title = (f"dense vs sparse rewards, robotics, {args.config}, {args.steps} steps, seeds {args.seeds}, "
             f"held-out {args.eval_tasks} tasks (success_rate: greedy; sampled: the training temperature); "
             "mean ± sd over seeds")
    lines = [title, ""]
    header = "| step | " + " | ".join(f"{m} {k.split('/')[1]}" for k in metrics for m in MODES) + " |"
    lines += [header, "|---" * (1 + len(metrics) * len(MODES)) + "|"]
    for st in steps:
        cells = []
        for k in metrics:
            for m in MODES:
                mu, sd = mean_sd([curves[m][s][st][k] for s in args.seeds if k in curves[m][s][st]])
                cells.append(f"{mu:.3f} ± {sd:.3f}")
        lines.append(f"| {st} | " + " | ".join(cells) + " |")
    last = steps[-1]
    first = steps[0]
    lines.append("")
    for k in metrics:
        for m in MODES:
            gains = [curves[m][s][last][k] - curves[m][s][first][k] for s in args.seeds]
            mu, sd = mean_sd(gains)
            lines.append(f"- {m}: {k} change step {first} → {last}: {mu:+.3f} ± {sd:.3f} (per seed: "
                         + ", ".join(f"{g:+.3f}" for g in gains) + ")")
        diffs = [curves["dense"][s][last][k] - curves["sparse"][s][last][k] for s in args.seeds]
        mu, sd = mean_sd(diffs)
        lines.append(f"- dense − sparse at step {last}, {k}: {mu:+.3f} ± {sd:.3f} (paired by seed)")
    text = "\n".join(lines)
    print(text)
    (out / "results.md").write_text(text + "\n")
    from densecode.eval.bench_records import emit, figure

    emit([figure(f"held-out {k.split('/')[1]} at step {last}, dense rewards ({args.steps} steps, seeds {args.seeds})",
                 mean_sd([curves["dense"][s][last][k] for s in args.seeds])[0], "",
                 baseline="sparse (same components on the last token)",
                 baseline_value=mean_sd([curves["sparse"][s][last][k] for s in args.seeds])[0],
                 note=f"step {first}: " + ", ".join(f"{m} {mean_sd([curves[m][s][first][k] for s in args.seeds])[0]:.3f}"
                                                   for m in MODES) + f"; {args.eval_tasks} eval tasks")
          for k in metrics])

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(metrics), figsize=(5.5 * len(metrics), 3.8))
    for ax, k in zip(axes, metrics):
        for m, color in zip(MODES, ("tab:blue", "tab:orange")):
            mus, sds = [], []
            for st in steps:
                mu, sd = mean_sd([curves[m][s][st][k] for s in args.seeds])
                mus.append(mu)
                sds.append(sd)
            ax.plot(steps, mus, marker="o", color=color, label=m)
            ax.fill_between(steps, [a - b for a, b in zip(mus, sds)], [a + b for a, b in zip(mus, sds)],
                            color=color, alpha=0.15)
        ax.set_title(f"held-out {k.split('/')[1]} (mean ± sd, {len(args.seeds)} seeds)")
        ax.set_xlabel("PPO step")
        ax.legend()
    fig.tight_layout()
    fig.savefig(out / "dense_vs_sparse.png", dpi=90)
    print(f"\nwrote {out / 'results.md'} and {out / 'dense_vs_sparse.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
