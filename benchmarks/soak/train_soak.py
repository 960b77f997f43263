"""Training soak: does the trainer's resident memory keep growing over a long run?

    python -m benchmarks.soak.train_soak                         # 200 steps, tiny model, robotics domain
    python -m benchmarks.soak.train_soak --steps 60 --warmup 10  # a quick size

Trains the tiny random test model (densecode.testing.make_tiny_model) with PPO on the robotics domain
(programs judged in the sandbox, RoboSim behind the API bridge) at tiny settings, in chunks of
--chunk steps; each chunk ends as `train()` ends (checkpoint, metrics, learning-curve report), so
every kind of bookkeeping is exercised repeatedly. After each chunk it reads the trainer process's
resident memory (VmRSS) and that of its sandbox workers.

It prints the trainer's RSS after --warmup steps and at the end, the ratio end / warm-up (target:
< 1.10, i.e. growth under 10%), and a least-squares slope in KiB/step over the post-warm-up samples.
Exits 1 when the ratio reaches --max-growth. Machine-readable figures (benchmarks/run_all.py convention)
go to --json PATH or $DENSECODE_BENCH_JSON when either is set.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import tempfile
import time
from pathlib import Path


def rss_kib(pid: int) -> int:
    """Resident set size of one process, from /proc (KiB)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def children_rss_kib() -> int:
    import psutil

    total = 0
    for child in psutil.Process().children(recursive=True):
        try:
            total += child.memory_info().rss // 1024
        except psutil.Error:  # a worker that exited between listing and reading
            pass
    return total


def slope(xs: list[float], ys: list[float]) -> float:
    n = len(xs)
    if n < 2:
        return 0.0
    mx, my = sum(xs) / n, sum(ys) / n
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den if den else 0.0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=200, help="total training steps")
    ap.add_argument("--warmup", type=int, default=20, help="steps before the baseline RSS is read")
    ap.add_argument("--chunk", type=int, default=10, help="steps per train() call (RSS is read between calls)")
    ap.add_argument("--batch-size", type=int, default=2)
    ap.add_argument("--max-new-tokens", type=int, default=16)
    ap.add_argument("--max-growth", type=float, default=1.10, help="fail (exit 1) at this end / warm-up ratio")
    ap.add_argument("--workdir", default=None, help="where the model and run go (default: a temp dir)")
    ap.add_argument("--json", default=os.environ.get("DENSECODE_BENCH_JSON"))
    args = ap.parse_args(argv)
    if args.warmup >= args.steps:
        ap.error("--warmup must be below --steps")

    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from tqdm import tqdm

    from densecode.training import build_trainer
    from densecode.config import load_config, resolve_config_path
    from densecode.testing import make_tiny_model

    torch.set_num_threads(1)
    work = Path(args.workdir or tempfile.mkdtemp(prefix="train-soak-"))
    model_dir = make_tiny_model(work / "model")
    run_dir = work / "run"
    cfg = load_config(resolve_config_path("robotics"), [
        f"model.name_or_path={model_dir}", f"train.output_dir={run_dir}", f"train.batch_size={args.batch_size}",
        f"generation.batch_size={args.batch_size}", f"generation.max_new_tokens={args.max_new_tokens}",
        "train.eval_every=0", "train.save_every=0", "train.log_every=1", "train.rollouts_every=1",
        "train.num_threads=1",
    ])
    trainer = build_trainer(cfg, run_dir, progress=False)

    pid = os.getpid()
    samples: list[tuple[int, int, int]] = []  # (step, trainer RSS KiB, sandbox workers' RSS KiB)
    t0 = time.perf_counter()
    bar = tqdm(total=args.steps, desc="train soak", unit="step", dynamic_ncols=True)
    targets = sorted({*range(args.chunk, args.steps, args.chunk), args.warmup, args.steps})
    for target in targets:
        before = trainer.state.step
        trainer.train(steps=target)
        bar.update(trainer.state.step - before)
        gc.collect()
        samples.append((trainer.state.step, rss_kib(pid), children_rss_kib()))
        bar.set_postfix(rss_mib=f"{samples[-1][1] / 1024:.1f}")
    bar.close()
    wall = time.perf_counter() - t0

    warm = next(s for s in samples if s[0] == args.warmup)
    end = samples[-1]
    after = [s for s in samples if s[0] >= args.warmup]
    ratio = end[1] / warm[1]
    kib_per_step = slope([s[0] for s in after], [s[1] for s in after])
    print(f"\ntrain soak: {args.steps} steps (batch {args.batch_size}, {args.max_new_tokens} new tokens, "
          f"robotics, tiny model) in {wall:.0f} s")
    print(f"{'step':>6} {'trainer RSS MiB':>16} {'sandbox workers RSS MiB':>24}")
    for step, rss, kids in samples:
        print(f"{step:>6} {rss / 1024:>16.1f} {kids / 1024:>24.1f}")
    print(f"trainer RSS after warm-up (step {args.warmup}): {warm[1] / 1024:.1f} MiB; "
          f"at the end (step {end[0]}): {end[1] / 1024:.1f} MiB; ratio {ratio:.3f} "
          f"(target < {args.max_growth:.2f}); slope after warm-up {kib_per_step:.1f} KiB/step")
    if args.json:
        Path(args.json).write_text(json.dumps([
            {"figure": f"trainer RSS growth over {args.steps} steps (end / after {args.warmup})", "value": ratio,
             "unit": "ratio", "baseline": None, "baseline_value": None},
            {"figure": "trainer RSS slope after warm-up", "value": kib_per_step, "unit": "KiB/step",
             "baseline": None, "baseline_value": None},
        ], indent=2))
    return 0 if ratio < args.max_growth else 1


if __name__ == "__main__":
    sys.exit(main())
