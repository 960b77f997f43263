"""ASTOR's own cost per step: scheduler (quotas, prompt sampling, statistics) and the synergy probe, as a share of
the training step measured in the same run (issue #16 target: < 5% of a step).

Trains the `multi` domain (robotics + a small generated code jsonl, configs/multitask.yaml) for a few steps on a
model (default: the embedded densecode-tiny) with the synergy probe on every step, then prints per-step means of
time/scheduler_s, time/synergy_probe_s and time/step_s from metrics.jsonl and their ratios. Step 1 is a warm-up and
is left out.

    .venv/bin/python benchmarks/multitask_scheduler_cost.py --steps 6 --batch-size 16
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--synergy-every", type=int, default=1)
    ap.add_argument("--model", default=None, help="model dir (default: the config's densecode-tiny)")
    args = ap.parse_args()

    from densecode.cli import main as cli

    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "code.jsonl"
        rows = [{"task_id": f"t{i}", "prompt": f"def add{i}(a, b):\n    \"\"\"Return a + b + {i}.\"\"\"\n",
                 "tests": [f"assert add{i}(1, 2) == {3 + i}"]} for i in range(32)]
        data.write_text("".join(json.dumps(r) + "\n" for r in rows))
        run = Path(tmp) / "run"
        argv = ["train", "--config", "multitask", "--output-dir", str(run), "--no-progress",
                "--steps", str(args.steps), "--set", f"tasks.options={{code: {{path: {data}}}}}",
                "--set", f"train.batch_size={args.batch_size}", "--set", "train.eval_every=0",
                "--set", f"generation.max_new_tokens={args.max_new_tokens}",
                "--set", f"tasks.astor.synergy_every={args.synergy_every}"]
        if args.model:
            argv += ["--model", args.model]
        assert cli(argv) == 0
        train = [r for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines()) if r["kind"] == "train"]
    train = train[1:]  # warm-up
    step = np.mean([r["time/step_s"] for r in train])
    sched = np.mean([r["time/scheduler_s"] for r in train])
    probe = np.mean([r.get("time/synergy_probe_s", 0.0) for r in train])
    print(f"steps measured: {len(train)} (batch {args.batch_size}, synergy probe every {args.synergy_every})")
    print(f"step           {step:8.3f} s")
    print(f"scheduler      {sched:8.4f} s  = {100 * sched / step:5.2f}% of a step (includes the probe)")
    print(f"synergy probe  {probe:8.4f} s  = {100 * probe / step:5.2f}% of a step")


if __name__ == "__main__":
    main()
