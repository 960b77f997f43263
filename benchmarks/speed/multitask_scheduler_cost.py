"""ASTOR's own cost per step: scheduler (quotas, prompt sampling, statistics) and the synergy probe, as a share of
the training step measured in the same run (issue #16 target: < 5% of a step).

Trains the `multi` domain (robotics + a small generated code jsonl, configs/multitask-gae.yaml) for a few steps on a
model (default: the embedded densecode-tiny) with the synergy probe on every step, then prints per-step means of
time/scheduler_s, time/synergy_probe_s and time/step_s from metrics.jsonl and their ratios. Step 1 is a warm-up and
is left out.

`--from-run` measures instead the runs already trained (run folders, or `.tar.xz` archives such as the multitask
benchmark's `benchmarks/results/runs/multitask/astor-seed*.tar.xz`): the same means from their metrics.jsonl, each
run and all together, so the share is the one of the benchmark's own budget and task mix.

    .venv/bin/python -m benchmarks.speed.multitask_scheduler_cost --steps 6 --batch-size 16
    .venv/bin/python -m benchmarks.speed.multitask_scheduler_cost --from-run benchmarks/results/runs/multitask/astor-seed*.tar.xz
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np


def fail(msg: str) -> None:
    print(f"error: {msg}", file=sys.stderr)
    raise SystemExit(2)


def train_rows(run: Path) -> list[dict]:
    """The `train` rows of a run folder's or a run archive's metrics.jsonl."""
    if run.is_dir():
        path = run / "metrics.jsonl"
        if not path.is_file():
            fail(f"{run} holds no metrics.jsonl; pass a training run folder or its .tar.xz archive")
        text = path.read_text()
    else:
        from densecode.eval.run_archive import read_member

        data = read_member(run, "metrics.jsonl") if run.is_file() else None
        if data is None:
            fail(f"{run} is neither a run folder nor a run archive holding metrics.jsonl")
        text = data.decode()
    return [r for r in map(json.loads, text.splitlines()) if r.get("kind") == "train"]


def cost(train: list[dict], what: str = "the run") -> dict:
    """Per-step means of step, scheduler and probe time over these rows (the caller drops step 1, a warm-up)."""
    if not train or "time/scheduler_s" not in train[0]:
        fail(f"{what} has no train steps with time/scheduler_s after step 1: not a multi-domain run of >= 2 steps")
    return {"steps": len(train),
            "step_s": float(np.mean([r["time/step_s"] for r in train])),
            "scheduler_s": float(np.mean([r["time/scheduler_s"] for r in train])),
            "probe_s": float(np.mean([r.get("time/synergy_probe_s", 0.0) for r in train]))}


def report(name: str, c: dict) -> None:
    print(f"{name}: {c['steps']} steps, step {c['step_s']:.3f} s, scheduler {c['scheduler_s']:.4f} s = "
          f"{100 * c['scheduler_s'] / c['step_s']:.2f}% (probe {c['probe_s']:.4f} s = "
          f"{100 * c['probe_s'] / c['step_s']:.2f}%)")


def from_runs(runs: list[Path]) -> None:
    rows = []
    for run in runs:
        train = train_rows(run)[1:]  # step 1: warm-up
        report(run.name, cost(train, str(run)))
        rows += train
    if len(runs) > 1:
        report("all runs", cost(rows))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--from-run", nargs="+", type=Path, metavar="RUN",
                    help="measure these finished runs (folders or .tar.xz archives) instead of training one")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--synergy-every", type=int, default=1)
    ap.add_argument("--model", default=None, help="model dir (default: the config's densecode-tiny)")
    args = ap.parse_args()
    if args.from_run:
        return from_runs(args.from_run)

    from densecode.cli import main as cli

    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "code.jsonl"
        rows = [{"task_id": f"t{i}", "prompt": f"def add{i}(a, b):\n    \"\"\"Return a + b + {i}.\"\"\"\n",
                 "tests": [f"assert add{i}(1, 2) == {3 + i}"]} for i in range(32)]
        data.write_text("".join(json.dumps(r) + "\n" for r in rows))
        run = Path(tmp) / "run"
        argv = ["train", "--config", "multitask-gae", "--output-dir", str(run), "--no-progress",
                "--steps", str(args.steps), "--set", f"tasks.options={{code: {{path: {data}}}}}",
                "--set", f"train.batch_size={args.batch_size}", "--set", "train.eval_every=0",
                "--set", f"generation.max_new_tokens={args.max_new_tokens}",
                "--set", f"tasks.astor.synergy_every={args.synergy_every}"]
        if args.model:
            argv += ["--model", args.model]
        assert cli(argv) == 0
        train = [r for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines()) if r["kind"] == "train"]
    c = cost(train[1:])  # step 1: warm-up
    step, sched, probe = c["step_s"], c["scheduler_s"], c["probe_s"]
    print(f"steps measured: {c['steps']} (batch {args.batch_size}, synergy probe every {args.synergy_every})")
    print(f"step           {step:8.3f} s")
    print(f"scheduler      {sched:8.4f} s  = {100 * sched / step:5.2f}% of a step (includes the probe)")
    print(f"synergy probe  {probe:8.4f} s  = {100 * probe / step:5.2f}% of a step")


if __name__ == "__main__":
    main()
