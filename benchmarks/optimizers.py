"""PPO-dense vs GRPO vs MicroCoder-GRPO (± dense signal, before/after issue #22), equal budgets.

Every variant starts from the same model (default: the embedded densecode-tiny),
trains for the same number of steps on the same RoboSim training tasks with the
same number of sampled responses per step (PPO: R prompts × 1; GRPO: R/G prompts
× G), the same learning rate, epochs and minibatches, and is evaluated greedily
on the same held-out tasks every `--eval-every` steps. Each variant is one
`densecode train` run (a subprocess), so the numbers are what the CLI gives.

Variants (configs/<domain>.yaml and configs/<domain>-grpo.yaml, --domain robotics by default):
  ppo-dense            PPO + value head on dense per-token rewards
  grpo                 plain GRPO: fixed temperature 1.0, no truncation masking, symmetric
                       clip 0.2, sequence-mean loss, no KL, outcome reward
  microcoder           MicroCoder-GRPO (configs/<domain>-grpo.yaml): outcome reward, conditional
                       truncation masking on cut-proof evidence, paper repetition test, staged
                       diversity-driven temperature, clip-higher, token loss
  microcoder-previous  the same before issue #22: per-token-mean dense sequence reward, a truncated
                       response judged incorrect by any verdict (a cut-off program failing its tests
                       counts), the any-period repetition test
  microcoder-dense     MicroCoder-GRPO + densecode's token-level term (syntax/lint/exception line)

    .venv/bin/python benchmarks/optimizers.py --quick            # small budget (~minutes)
    .venv/bin/python benchmarks/optimizers.py --steps 150        # full budget
    # truncation masking, before vs after #22, with max_new_tokens lowered so 10-30% of responses are cut:
    .venv/bin/python benchmarks/optimizers.py --variants microcoder-previous,microcoder --max-new-tokens 80 \\
        --responses-per-step 32 --group-size 8 --steps 30 --eval-every 10 --eval-tasks 100 --out runs/bench/masking
Writes <out>/optimizers.png (held-out success and executability curves), <out>/optimizers.md (tables:
held-out success, and for GRPO runs how many responses were truncated and masked, and why, summed over
all steps) and <out>/optimizers.json; the runs stay in <out>/<variant>/.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

# name -> (config suffix after the domain, overrides)
VARIANTS: dict[str, tuple[str, list[str]]] = {
    "ppo-dense": ("", []),
    "grpo": ("-grpo", [
        "algo.grpo.truncation_masking=none", "algo.grpo.clip_eps_high=0.2", "algo.grpo.loss_aggregation=sequence",
        "algo.grpo.temperature_schedule={stages: [1.0], switch_steps: []}",
    ]),
    "microcoder": ("-grpo", []),
    "microcoder-previous": ("-grpo", [
        "algo.grpo.sequence_reward=mean", "algo.grpo.truncation_evidence=any_verdict",
        "algo.grpo.repetition_test=any_period",
    ]),
    "microcoder-dense": ("-grpo", ["algo.grpo.dense=true"]),
}

# Per-step GRPO counts summed over a run (densecode/rl/grpo.py: truncation_mask, incorrect_reasons).
MASK_KEYS = ("truncated", "truncated_incorrect", "truncated_incorrect_finished_wrong",
             "truncated_incorrect_error_before_cut", "truncated_incorrect_any_verdict", "truncated_repetitive",
             "eligible", "masked")

SUCCESS_KEYS = ("eval/success_rate", "eval/success", "eval/pass_rate")


def success_of(record: dict) -> float | None:
    for key in SUCCESS_KEYS:
        if key in record:
            return float(record[key])
    for key, value in record.items():
        if key.startswith("eval/") and "success" in key and isinstance(value, (int, float)):
            return float(value)
    return None


def read_run(run_dir: Path) -> dict:
    """Held-out curves: success (task checks pass) and executability (ran without a Python/robot error)."""
    curve, execs, train = [], [], []
    metrics = run_dir / "metrics.jsonl"
    if metrics.is_file():
        for line in metrics.read_text().splitlines():
            rec = json.loads(line)
            if rec.get("kind") == "eval":
                s = success_of(rec)
                if s is not None:
                    curve.append((int(rec["step"]), s))
                if "eval/executability" in rec:
                    execs.append((int(rec["step"]), float(rec["eval/executability"])))
            elif rec.get("kind") == "train":
                train.append(rec)
    # Which "judged incorrect" rule the run used: the other rule's counts are not computed (shown as –).
    evidence = None
    if (run_dir / "config.yaml").is_file():
        import yaml

        cfg = yaml.safe_load((run_dir / "config.yaml").read_text()) or {}
        evidence = ((cfg.get("algo") or {}).get("grpo") or {}).get("truncation_evidence")
    return {"curve": curve, "exec": execs, "train": train, "evidence": evidence}


def run_variant(name: str, args, out: Path) -> dict:
    suffix, extra = VARIANTS[name]
    config = f"{args.domain}{suffix}"
    run_dir = out / name
    if run_dir.exists() and (run_dir / "checkpoints" / "latest").is_file() and not args.force:
        print(f"[{name}] reusing finished run in {run_dir} (--force to rerun)", flush=True)
        res = read_run(run_dir)
        res["wall_s"] = float(res["train"][-1].get("elapsed_s", float("nan"))) if res["train"] else float("nan")
        return res
    if run_dir.exists():
        import shutil

        shutil.rmtree(run_dir)
    grpo = bool(suffix)
    overrides = [
        f"train.steps={args.steps}", f"train.eval_every={args.eval_every}", f"train.eval_tasks={args.eval_tasks}",
        "train.save_every=0", f"train.seed={args.seed}", f"train.num_threads={args.threads}",
    ]
    if args.lr is not None:
        overrides.append(f"train.lr={args.lr}")
    if args.max_new_tokens is not None:
        overrides.append(f"generation.max_new_tokens={args.max_new_tokens}")
    if grpo:
        # Equal budget: the same number of sampled responses per step as PPO's prompts.
        overrides += [f"algo.grpo.group_size={args.group_size}",
                      f"train.batch_size={args.responses_per_step // args.group_size}"]
        if args.max_new_tokens is not None:
            # The paper's repetition test needs 2 x window tokens; keep it able to fire.
            overrides.append(f"algo.grpo.repetition_window={max(1, min(64, args.max_new_tokens // 2))}")
        if not any(o.startswith("algo.grpo.temperature_schedule") for o in extra):
            # The paper switched at ~40% of its run; scale the stage switch to this budget.
            switch = max(1, int(0.4 * args.steps))
            overrides.append(f"algo.grpo.temperature_schedule={{stages: [0.6, 1.2], switch_steps: [{switch}]}}")
    else:
        overrides.append(f"train.batch_size={args.responses_per_step}")
    cmd = [sys.executable, "-m", "densecode.cli", "train", "--config", config, "--output-dir", str(run_dir),
           "--no-progress"]
    if args.model:
        cmd += ["--model", args.model]
    for o in overrides + extra + list(args.set or []):
        cmd += ["--set", o]
    print(f"[{name}] {' '.join(cmd[2:])}", flush=True)
    t0 = time.perf_counter()
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), TOKENIZERS_PARALLELISM="false")
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-3000:] + proc.stderr[-3000:])
        raise SystemExit(f"[{name}] densecode train failed with exit code {proc.returncode}")
    res = read_run(run_dir)
    # The trainer's own clock (rollouts, updates, evals), as when a finished run is reused.
    res["wall_s"] = float(res["train"][-1].get("elapsed_s", wall)) if res["train"] else wall
    print(f"[{name}] done in {wall:.0f}s; held-out success {res['curve']}", flush=True)
    return res


def mask_counts(train: list[dict]) -> dict[str, float]:
    """GRPO truncation counts summed over the run's steps (empty for PPO)."""
    out = {k: sum(float(r.get(f"grpo/{k}", 0.0)) for r in train) for k in MASK_KEYS}
    out["responses"] = sum(float(r.get("grpo/responses", 0.0)) for r in train)
    return out if any(f"grpo/{MASK_KEYS[0]}" in r for r in train) else {}


def mask_table(results: dict) -> str:
    header = ("| variant | responses | truncated | judged incorrect: code finished, verdict wrong | "
              "judged incorrect: error before the cut | judged incorrect: any verdict (previous rule) | "
              "repetitive | eligible | masked |")
    lines = [header, "|---|---|---|---|---|---|---|---|---|"]
    for name, res in results.items():
        c = mask_counts(res.get("train", []))
        if not c:
            continue
        frac = c["truncated"] / c["responses"] if c["responses"] else float("nan")
        cut_proof = res.get("evidence") != "any_verdict"

        def shown(key: str, computed: bool, counts=c) -> str:
            return f"{counts[key]:.0f}" if computed else "–"

        lines.append(f"| {name} | {c['responses']:.0f} | {c['truncated']:.0f} ({frac:.1%}) | "
                     f"{shown('truncated_incorrect_finished_wrong', cut_proof)} | "
                     f"{shown('truncated_incorrect_error_before_cut', cut_proof)} | "
                     f"{shown('truncated_incorrect_any_verdict', not cut_proof)} | {c['truncated_repetitive']:.0f} | "
                     f"{c['eligible']:.0f} | {c['masked']:.0f} |")
    return "\n".join(lines)


def plot(results: dict, path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, key, label in ((axes[0], "curve", "held-out success rate"),
                           (axes[1], "exec", "held-out executability")):
        for name, res in results.items():
            if res.get(key):
                steps, vals = zip(*res[key])
                ax.plot(steps, vals, marker="o", label=name)
        ax.set_xlabel("training step")
        ax.set_ylabel(label + " (greedy)")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def train_mean(train: list[dict], key: str, last: int = 5) -> str:
    vals = [r[key] for r in train[-last:] if isinstance(r.get(key), (int, float))]
    return f"{sum(vals) / len(vals):.3f}" if vals else "n/a"


def table(results: dict) -> str:
    header = ("| variant | held-out success: step 0 → final (best) | executability: step 0 → final "
              "| train sim score: first 5 → last 5 steps | train wall time (s) |")
    lines = [header, "|---|---|---|---|---|"]
    for name, res in results.items():
        curve, execs = res["curve"], res.get("exec", [])
        succ = (f"{curve[0][1]:.3f} → {curve[-1][1]:.3f} ({max(s for _, s in curve):.3f})" if curve else "n/a")
        ex = f"{execs[0][1]:.3f} → {execs[-1][1]:.3f}" if execs else "n/a"
        train = res.get("train", [])
        sim = f"{train_mean(train[:5], 'reward/sim/sim_score')} → {train_mean(train, 'reward/sim/sim_score')}"
        lines.append(f"| {name} | {succ} | {ex} | {sim} | {res['wall_s']:.0f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--domain", default="robotics", help="configs/<domain>.yaml and <domain>-grpo.yaml (robotics, code)")
    p.add_argument("--max-new-tokens", type=int, default=None,
                   help="override generation.max_new_tokens (lower it so truncation happens)")
    p.add_argument("--quick", action="store_true", help="small budget: 20 steps, eval every 5 on 100 held-out tasks")
    p.add_argument("--steps", type=int, default=150)
    p.add_argument("--eval-every", type=int, default=25)
    p.add_argument("--eval-tasks", type=int, default=200)
    p.add_argument("--responses-per-step", type=int, default=16, help="PPO prompts per step = GRPO groups x G")
    p.add_argument("--group-size", type=int, default=8)
    p.add_argument("--lr", type=float, default=None, help="override train.lr for every variant")
    p.add_argument("--model", default=None, help="model for every variant (default: the configs' densecode-tiny)")
    p.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated subset of " + ", ".join(VARIANTS))
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="extra override for every run")
    p.add_argument("--out", default="runs/bench/optimizers")
    p.add_argument("--force", action="store_true", help="rerun variants that already finished in --out")
    args = p.parse_args(argv)
    if args.quick:
        args.steps, args.eval_every, args.eval_tasks = 20, 5, 100
    if args.responses_per_step % args.group_size:
        p.error(f"--responses-per-step {args.responses_per_step} must be a multiple of --group-size {args.group_size}")
    names = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in names if v not in VARIANTS]
    if unknown:
        p.error(f"unknown variant(s) {unknown}; choose from {', '.join(VARIANTS)}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results = {name: run_variant(name, args, out) for name in names}
    title = (f"{args.domain} held-out success, {args.steps} steps x {args.responses_per_step} responses "
             f"(GRPO G={args.group_size}" + (f", max_new_tokens {args.max_new_tokens}" if args.max_new_tokens else "")
             + ")")
    plot(results, out / "optimizers.png", title)
    md = table(results) + "\n\nTruncation masking, summed over all steps:\n\n" + mask_table(results)
    (out / "optimizers.md").write_text(f"{title}\n\n{md}\n")
    (out / "optimizers.json").write_text(json.dumps(
        {"args": vars(args), "results": {n: {"success": r["curve"], "executability": r.get("exec", []),
                                             "wall_s": r["wall_s"], "masking": mask_counts(r.get("train", []))}
                                         for n, r in results.items()}},
        indent=2))
    print(f"\n{title}\n\n{md}\n\nwrote {out / 'optimizers.png'}, {out / 'optimizers.md'}")
    from densecode.eval.bench_records import emit, figure

    base_name = "ppo-dense" if "ppo-dense" in results else names[0]
    base_curve = results[base_name]["curve"]
    records = []
    for name, res in results.items():
        if not res["curve"]:
            continue
        (s0, v0), (s1, v1) = res["curve"][0], res["curve"][-1]
        records.append(figure(f"held-out success at step {s1}, {name} ({args.eval_tasks} tasks)", v1, "",
                              baseline=f"{base_name} at step {base_curve[-1][0]}" if base_curve else None,
                              baseline_value=base_curve[-1][1] if base_curve else None,
                              note=f"step {s0}: {v0:.3f}; {title}"))
    emit(records)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
