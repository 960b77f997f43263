"""The update with and without algo.skip_zero_advantage_rows, side by side on the same steps.

Two trainers from the same config and seed (the default robotics recipe: outcome credit, negative_scale 0, so
rows whose response did not beat its prompt's baseline carry no gradient) take the same steps; each step, both
sample from the same weights-so-far (the first step's rollouts are identical; later ones differ only after the
weights' float round-off does), and the update phase's CPU time of each is compared. Also printed: the share of
rows the skipping update runs and the largest weight difference between the two policies at the end.

    .venv/bin/python -m benchmarks.speed.update_rows [--steps 6] [--config robotics] [--set KEY=VALUE ...]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile

from benchmarks.common import checkout_first, quiet_offline_cpu

quiet_offline_cpu()
checkout_first()

import torch  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--config", default="robotics", help="a shipped config name or a YAML file")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--json", default=None, help="write figure records here (run_all sets DENSECODE_BENCH_JSON)")
    args = ap.parse_args(argv)

    from densecode.api import build_trainer, load_config
    from densecode.eval.bench_records import emit, figure

    trainers = {}
    for skip in (False, True):
        out = tempfile.mkdtemp(prefix=f"update-rows-{skip}-")
        cfg = load_config(args.config, overrides=["train.eval_every=0", "train.save_every=0", "train.rollouts_every=0",
                                                  f"algo.skip_zero_advantage_rows={str(skip).lower()}",
                                                  *args.overrides], output_dir=out)
        torch.manual_seed(cfg.train.seed)
        trainers[skip] = build_trainer(cfg, out, progress=False)
    if cfg.train.num_threads > 0:
        torch.set_num_threads(cfg.train.num_threads)
    print(f"{args.config}: {cfg.train.batch_size} prompts x {trainers[True].algo.samples_per_prompt}, credit "
          f"{cfg.algo.ppo.credit}, negative_scale {cfg.algo.ppo.negative_scale}, {cfg.algo.num_minibatches} "
          f"minibatches, torch threads {torch.get_num_threads()}")
    full, skipped, fracs = [], [], []
    for step in range(args.steps):
        a = trainers[False].train_step(step)
        b = trainers[True].train_step(step)
        full.append(a["time/update_cpu_s"])
        skipped.append(b["time/update_cpu_s"])
        fracs.append(b.get("train/update_rows_frac", 1.0))
        print(f"step {step + 1}: update CPU s all rows {full[-1]:.2f}, signal rows only {skipped[-1]:.2f} "
              f"({100 * fracs[-1]:.0f}% of rows)", flush=True)
    diff = max(float((p - q).abs().max()) for p, q in zip(trainers[False].unwrapped.policy.parameters(),
                                                           trainers[True].unwrapped.policy.parameters()))
    med_full, med_skip = statistics.median(full), statistics.median(skipped)
    print(f"\nmedian update CPU s: all rows {med_full:.2f}, signal rows only {med_skip:.2f} "
          f"({med_full / med_skip:.2f}x); rows run {100 * statistics.median(fracs):.0f}%; "
          f"largest weight difference after {args.steps} steps {diff:.2e}")
    emit([figure(f"{args.config} PPO update CPU s per step, algo.skip_zero_advantage_rows", med_skip, "s",
                 baseline="every row through forward and backward", baseline_value=med_full,
                 ratio=med_full / med_skip,
                 note=f"ratio = speed-up; {100 * statistics.median(fracs):.0f}% of rows run; max weight diff "
                      f"{diff:.1e}")], args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
