"""PPO-dense vs PPO-sparse vs GRPO vs MicroCoder-GRPO (± dense signal, before/after issue #22), equal budgets, seeds.

Every variant starts from the same model (default: the embedded densecode-tiny),
trains for the same number of steps on the same domain's training tasks with the
same number of sampled responses per step (PPO: R prompts × 1; GRPO: R/G prompts
× G), the same learning rate, epochs and minibatches, and is evaluated greedily
on the same held-out tasks every `--eval-every` steps, once per seed. Each run is one
`densecode train` run (a subprocess, densecode.eval.sweep), so the numbers are what the CLI gives.

Variants (configs/<domain>.yaml and configs/<domain>-grpo.yaml; robotics and codegen: their -gae and -microcoder
configs; --domain robotics by default):
  ppo-dense            PPO + value head on dense per-token rewards
  ppo-sparse           the same PPO run with the task components summed onto the last token (reward.mode: sparse)
  grpo                 plain GRPO: fixed temperature 1.0, no truncation masking, symmetric
                       clip 0.2, sequence-mean loss, no KL, outcome reward
  microcoder           MicroCoder-GRPO (configs/<domain>-microcoder.yaml): outcome reward, conditional
                       truncation masking on cut-proof evidence, paper repetition test, staged
                       diversity-driven temperature, clip-higher, token loss
  microcoder-dense     MicroCoder-GRPO + densecode's token-level term (syntax/lint/exception line)
  microcoder-previous  (not in the default set) MicroCoder-GRPO before issue #22: per-token-mean dense sequence
                       reward, a truncated response judged incorrect by any verdict, the any-period repetition test

    python -m benchmarks.experiments.optimizers --seeds 0 1 2 --parallel 2                  # full budget: 150 steps, 5 variants
    python -m benchmarks.experiments.optimizers --quick                                      # small budget (~minutes), seed 0
    # truncation masking, before vs after #22, with max_new_tokens lowered so 10-30% of responses are cut:
    python -m benchmarks.experiments.optimizers --variants microcoder-previous,microcoder --max-new-tokens 80 --seeds 0 \\
        --responses-per-step 32 --group-size 8 --steps 30 --eval-every 10 --eval-tasks 100 --out runs/bench/masking
Runs go to <out>/<variant>-seed<N>/; rerunning the same command skips finished runs and continues unfinished
ones from their latest checkpoint (--force reruns everything). Writes <out>/optimizers.png (held-out success and
executability, mean ± seed sd), <out>/optimizers.md (tables: held-out success per eval step, mean ± sd over seeds;
each variant's paired difference to ppo-dense at the last step with a 95% bootstrap interval over seeds and tasks;
for GRPO runs how many responses were truncated and masked, and why, summed over all steps and seeds) and
<out>/optimizers.json; copies them to benchmarks/results/ with --publish.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from benchmarks.common import ROOT

# The PPO variants' config per domain, where the domain's default has moved on from the GAE recipe.
GAE_CONFIGS = {"robotics": "robotics-gae", "codegen": "codegen-gae"}
# The GRPO variants' config per domain: MicroCoder-GRPO with the paper's settings (the variants' overrides are
# changes of those), where <domain>-grpo.yaml has become the GRPO recipe.
MICROCODER_CONFIGS = {"robotics": "robotics-microcoder", "codegen": "codegen-microcoder"}
# name -> (config suffix after the domain, overrides)
VARIANTS: dict[str, tuple[str, list[str]]] = {
    "ppo-dense": ("", ["reward.mode=dense"]),
    "ppo-sparse": ("", ["reward.mode=sparse"]),
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

DEFAULT_VARIANTS = ("ppo-dense", "ppo-sparse", "grpo", "microcoder", "microcoder-dense")

SUCCESS_KEYS = ("eval/success_rate", "eval/success", "eval/pass_rate")


def success_of(record: dict, sampled: bool = False) -> float | None:
    """The eval's success: the greedy pass's, or (sampled=True) the pass at tasks.eval_sampled_temperature."""
    keys = [k.replace("eval/", "eval/sampled_") for k in SUCCESS_KEYS] if sampled else SUCCESS_KEYS
    for key in keys:
        if key in record:
            return float(record[key])
    for key, value in record.items():
        if (key.startswith("eval/sampled_") if sampled else key.startswith("eval/") and "sampled_" not in key) \
                and "success" in key and isinstance(value, (int, float)):
            return float(value)
    return None


def read_run(run_dir: Path) -> dict:
    """Held-out curves: success (task checks pass) and executability (ran without a Python/robot error)."""
    curve, sampled, execs, train = [], [], [], []
    metrics = run_dir / "metrics.jsonl"
    if metrics.is_file():
        for line in metrics.read_text().splitlines():
            rec = json.loads(line)
            if rec.get("kind") == "eval":
                s = success_of(rec)
                if s is not None:
                    curve.append((int(rec["step"]), s))
                s = success_of(rec, sampled=True)
                if s is not None:
                    sampled.append((int(rec["step"]), s))
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
    return {"curve": curve, "sampled": sampled, "exec": execs, "train": train, "evidence": evidence}


def variant_spec(name: str, seed: int, args, out: Path):
    """The `densecode train` run of one variant and seed (densecode.eval.sweep.RunSpec)."""
    from densecode.eval.sweep import RunSpec

    suffix, extra = VARIANTS[name]
    grpo = bool(suffix)
    overrides = [
        f"train.eval_every={args.eval_every}", f"train.eval_tasks={args.eval_tasks}",
        f"train.save_every={args.save_every}", f"train.seed={seed}", f"train.num_threads={args.threads}",
        # Every eval runs twice on the same tasks: greedy, and sampled at one fixed temperature for every variant
        # (the variants train at different temperatures; PPO trains the sampling distribution, and on the embedded
        # model greedy decoding does not follow it: docs/results.md).
        "tasks.eval_temperature=0.0", f"tasks.eval_sampled_temperature={args.eval_sampled_temperature}",
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
    extra_args = ["--model", args.model] if args.model else []
    # The published comparison ran PPO on the GAE recipe (robotics-gae.yaml, robotics.yaml before its outcome-credit
    # default; codegen-gae.yaml likewise) and GRPO on MicroCoder's settings (the -microcoder configs, based on them).
    config = (MICROCODER_CONFIGS.get(args.domain, f"{args.domain}{suffix}") if suffix
              else GAE_CONFIGS.get(args.domain, args.domain))
    return RunSpec(name=f"{name}-seed{seed}", run_dir=out / f"{name}-seed{seed}", config=config,
                   steps=args.steps, overrides=overrides + list(extra) + list(args.set or []), extra_args=extra_args)


def read_variant(name: str, seeds: list[int], out: Path) -> dict:
    """The variant's runs: per seed the curves (read_run), and the trainer's own clock (rollouts, updates, evals)."""
    runs = {}
    for seed in seeds:
        res = read_run(out / f"{name}-seed{seed}")
        res["wall_s"] = float(res["train"][-1].get("elapsed_s", float("nan"))) if res["train"] else float("nan")
        runs[seed] = res
    return runs


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


def mean_sd(values: list[float]) -> tuple[float, float]:
    import statistics

    if not values:
        return float("nan"), float("nan")
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def seed_curves(runs: dict, key: str) -> tuple[list[int], list[list[float]]]:
    """(eval steps every seed has, [seed][step] values) of the curve `key` ("curve", "sampled" or "exec")."""
    per_seed = [dict(r.get(key) or []) for r in runs.values()]
    if not per_seed or not all(per_seed):
        return [], []
    steps = sorted(set.intersection(*[set(c) for c in per_seed]))
    return steps, [[c[s] for s in steps] for c in per_seed]


def plot(results: dict, path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, axes = plt.subplots(1, 3, figsize=(16, 4.2))
    for ax, key, label in ((axes[0], "curve", "held-out success rate (greedy)"),
                           (axes[1], "sampled", "held-out success rate (sampled)"),
                           (axes[2], "exec", "held-out executability (greedy)")):
        for name, runs in results.items():
            steps, vals = seed_curves(runs, key)
            if not steps:
                continue
            vals = np.asarray(vals)
            mu = vals.mean(axis=0)
            sd = vals.std(axis=0, ddof=1) if len(vals) > 1 else np.zeros_like(mu)
            line, = ax.plot(steps, mu, marker="o", label=f"{name} (n={len(vals)})")
            ax.fill_between(steps, mu - sd, mu + sd, color=line.get_color(), alpha=0.15)
        ax.set_xlabel("training step")
        ax.set_ylabel(label + ", mean ± seed sd")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def train_mean(train: list[dict], key: str, last: int = 5) -> float | None:
    vals = [r[key] for r in train[-last:] if isinstance(r.get(key), (int, float))]
    return sum(vals) / len(vals) if vals else None


def fmt_mean_sd(values: list[float]) -> str:
    values = [v for v in values if v is not None]
    if not values:
        return "n/a"
    mu, sd = mean_sd(values)
    return f"{mu:.3f} ± {sd:.3f}"


def table(results: dict) -> str:
    """Per variant (mean ± seed sd): held-out success at the first and last eval step and its best, executability,
    the training sim score (first 5 → last 5 steps) and the trainer's wall time per run."""
    header = ("| variant | seeds | held-out success: step 0 → final | best step's success | executability: step 0 → "
              "final | train sim score: first 5 → last 5 steps | train wall time per run (s) |")
    lines = [header, "|---|---|---|---|---|---|---|"]
    for name, runs in results.items():
        steps, succ = seed_curves(runs, "curve")
        esteps, execs = seed_curves(runs, "exec")
        trains = [r.get("train", []) for r in runs.values()]
        s = (f"{fmt_mean_sd([c[0] for c in succ])} → {fmt_mean_sd([c[-1] for c in succ])}" if steps else "n/a")
        best = fmt_mean_sd([max(c) for c in succ]) if steps else "n/a"
        e = (f"{fmt_mean_sd([c[0] for c in execs])} → {fmt_mean_sd([c[-1] for c in execs])}" if esteps else "n/a")
        sim = (f"{fmt_mean_sd([train_mean(t[:5], 'reward/sim/sim_score') for t in trains])} → "
               f"{fmt_mean_sd([train_mean(t, 'reward/sim/sim_score') for t in trains])}")
        walls = [r["wall_s"] for r in runs.values()]
        wall = f"{mean_sd(walls)[0]:.0f} ± {mean_sd(walls)[1]:.0f}"
        lines.append(f"| {name} | {len(runs)} | {s} | {best} | {e} | {sim} | {wall} |")
    return "\n".join(lines)


def curve_table(results: dict, key: str = "curve") -> str:
    """Held-out success per eval step (greedy: key "curve"; "sampled"), mean ± seed sd, one column per variant."""
    curves = {n: seed_curves(runs, key) for n, runs in results.items()}
    curves = {n: c for n, c in curves.items() if c[0]}
    if not curves:
        return "(no held-out evals: --eval-every 0)"
    steps = sorted(set.intersection(*[set(c[0]) for c in curves.values()]))
    lines = ["| step | " + " | ".join(curves) + " |", "|---" * (1 + len(curves)) + "|"]
    for st in steps:
        cells = []
        for st_list, vals in curves.values():
            i = st_list.index(st)
            cells.append(fmt_mean_sd([v[i] for v in vals]))
        lines.append(f"| {st} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def paired_table(out: Path, names: list[str], seeds: list[int], baseline: str, n_boot: int,
                 pass_name: str = "greedy") -> tuple[str, dict]:
    """Each variant's paired difference to `baseline` at the last shared eval step, 95% bootstrap interval over
    seeds and tasks (the runs' eval_tasks.jsonl, the greedy or the sampled pass), and the steps it needs to reach
    the baseline's final score. ("", {}) when the runs carry no per-task outcomes or there is nothing to compare."""
    wanted = ("greedy", "eval") if pass_name == "greedy" else (pass_name,)
    import numpy as np

    from densecode.eval.paired_bootstrap import compare_arms

    rows = {}
    for name in names:
        for seed in seeds:
            path = out / f"{name}-seed{seed}" / "eval_tasks.jsonl"
            if not path.is_file():
                return "", {}
            by_step = {}
            for line in path.read_text().splitlines():
                r = json.loads(line)
                if r["pass"] in wanted:
                    by_step[int(r["step"])] = r
            rows[(name, seed)] = by_step
    steps = sorted(set.intersection(*[set(r) for r in rows.values()])) if rows else []
    if baseline not in names or len(names) < 2 or not steps:
        return "", {}
    ids = {tuple(rows[k][steps[0]]["task_ids"]) for k in rows}
    if len(ids) != 1:
        return "(runs saw different held-out tasks: no paired comparison)", {}
    values = {n: np.array([[rows[(n, s)][st]["values"] for st in steps] for s in seeds], dtype=float) for n in names}
    comp = compare_arms(values, steps, baseline=baseline, n_boot=n_boot)
    metric = rows[(names[0], seeds[0])][steps[0]]["metric"]
    last = steps[-1]
    lines = [f"Paired difference to {baseline} at step {last} (held-out {metric}, {pass_name}; {comp['n_seeds']} seeds × "
             f"{comp['n_tasks']} tasks, 95% bootstrap interval resampling seeds and tasks), and the steps each "
             f"variant needs to reach {baseline}'s final {metric}:", "",
             f"| variant | {metric} at step {last} | − {baseline} [95% interval] | steps to reach {baseline}'s final "
             "[95% interval] |", "|---|---|---|---|"]
    for n in names:
        if n == baseline:
            continue
        d, r = comp["differences"][n], comp["steps_to_reach"][n]
        fmt = (lambda x: "not reached" if x is None else f"{x:.0f}")
        reach = (f"{fmt(r['steps'])} [{fmt(r['lo'])}, {fmt(r['hi'])}]" if r.get("baseline_improved", True) else
                 f"not defined ({baseline} ended at {r['target']:.3f}, not above its start {r['start']:.3f})")
        lines.append(f"| {n} | {comp['arms'][n]['mean'][-1]:.3f} | {d['mean'][-1]:+.3f} [{d['lo'][-1]:+.3f}, "
                     f"{d['hi'][-1]:+.3f}] | {reach} |")
    return "\n".join(lines), comp


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--domain", default="robotics", help="configs/<domain>.yaml and <domain>-grpo.yaml (robotics, code)")
    p.add_argument("--max-new-tokens", type=int, default=None,
                   help="override generation.max_new_tokens (lower it so truncation happens)")
    p.add_argument("--quick", action="store_true",
                   help="small budget: 20 steps, eval every 5 on 100 held-out tasks, seed 0")
    p.add_argument("--steps", type=int, default=None, help="default 150 (--quick: 20)")
    p.add_argument("--eval-every", type=int, default=None, help="default 25 (--quick: 5); 0 = no held-out evals")
    p.add_argument("--eval-tasks", type=int, default=None, help="default 200 (--quick: 100)")
    p.add_argument("--save-every", type=int, default=25, help="checkpoint every N steps (resume points)")
    p.add_argument("--responses-per-step", type=int, default=16, help="PPO prompts per step = GRPO groups x G")
    p.add_argument("--group-size", type=int, default=8)
    p.add_argument("--lr", type=float, default=None, help="override train.lr for every variant")
    p.add_argument("--model", default=None, help="model for every variant (default: the configs' densecode-tiny)")
    p.add_argument("--variants", default=",".join(DEFAULT_VARIANTS),
                   help="comma-separated subset of " + ", ".join(VARIANTS))
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seeds", type=int, nargs="+", default=None, help="default 0 1 2 (--quick: 0)")
    p.add_argument("--seed", type=int, default=None, help="one seed (the same as --seeds N)")
    p.add_argument("--parallel", type=int, default=1, help="training runs at once (each uses about one core)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="extra override for every run")
    p.add_argument("--out", default="runs/bench/optimizers")
    p.add_argument("--force", action="store_true", help="rerun variants that already finished in --out")
    p.add_argument("--analyse-only", action="store_true", help="train nothing; tabulate the runs in --out")
    p.add_argument("--n-boot", type=int, default=2000, help="bootstrap replicates of the paired comparison")
    p.add_argument("--eval-sampled-temperature", type=float, default=1.0,
                   help="the second eval pass samples at this temperature, the same for every variant (default 1.0)")
    p.add_argument("--archive", default=None,
                   help="each finished run's result files (no weights) are archived here and restored from here on "
                        "another machine; default benchmarks/results/runs/optimizers-<domain> (--quick: none); "
                        "'none': off")
    p.add_argument("--publish", default=None, metavar="DIR", help="copy the tables, curves and JSON here")
    p.add_argument("--no-progress", action="store_true")
    args = p.parse_args(argv)
    quick = {"steps": 20, "eval_every": 5, "eval_tasks": 100, "seeds": [0]}
    full = {"steps": 150, "eval_every": 25, "eval_tasks": 200, "seeds": [0, 1, 2]}
    if args.seed is not None:
        args.seeds = [args.seed]
    for key, value in (quick if args.quick else full).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if args.archive is None and not args.quick:
        args.archive = str(ROOT / "benchmarks" / "results" / "runs" / f"optimizers-{args.domain}")
    if args.archive in (None, "none"):
        args.archive = None
    if args.responses_per_step % args.group_size:
        p.error(f"--responses-per-step {args.responses_per_step} must be a multiple of --group-size {args.group_size}")
    args.names = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in args.names if v not in VARIANTS]
    if unknown:
        p.error(f"unknown variant(s) {unknown}; choose from {', '.join(VARIANTS)}")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    from densecode.errors import DensecodeError
    from densecode.eval.sweep import restore_archived, run_sweep

    names = args.names
    archive = Path(args.archive) if args.archive else None
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    specs = [variant_spec(n, s, args, out) for s in args.seeds for n in names]
    if args.force and not args.analyse_only:
        import shutil

        for spec in specs:
            shutil.rmtree(spec.run_dir, ignore_errors=True)
            spec.log_path.unlink(missing_ok=True)
    try:
        if not args.analyse_only:
            run_sweep(specs, parallel=args.parallel, progress=not args.no_progress, archive_dir=archive)
        elif archive is not None:
            restore_archived(specs, archive)
        results = {n: read_variant(n, args.seeds, out) for n in names}
        base_name = "ppo-dense" if "ppo-dense" in names else names[0]
        paired_md, comp = paired_table(out, names, args.seeds, base_name, args.n_boot)
        paired_sampled_md, comp_sampled = paired_table(out, names, args.seeds, base_name, args.n_boot, "sampled")
    except DensecodeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    title = (f"{args.domain} held-out success, {args.steps} steps x {args.responses_per_step} responses "
             f"(GRPO G={args.group_size}" + (f", max_new_tokens {args.max_new_tokens}" if args.max_new_tokens else "")
             + f"), seeds {args.seeds}")
    plot(results, out / "optimizers.png", title)
    summed = {n: [rec for r in runs.values() for rec in r.get("train", [])] for n, runs in results.items()}
    evidence = {n: next(iter(runs.values())).get("evidence") for n, runs in results.items()}
    md = (table(results) + "\n\nHeld-out success per eval step (greedy, mean ± seed sd):\n\n" + curve_table(results)
          + ("\n\n" + paired_md if paired_md else "")
          + f"\n\nHeld-out success per eval step, sampled at T={args.eval_sampled_temperature} (mean ± seed sd):\n\n"
          + curve_table(results, "sampled")
          + ("\n\n" + paired_sampled_md if paired_sampled_md else "")
          + "\n\nTruncation masking, summed over all steps and seeds:\n\n"
          + mask_table({n: {"train": summed[n], "evidence": evidence[n]} for n in names}))
    (out / "optimizers.md").write_text(f"{title}\n\n`python -m benchmarks.experiments.optimizers "
                                       f"{' '.join(sys.argv[1:])}`\n\n{md}\n")
    (out / "optimizers.json").write_text(json.dumps(
        {"args": {k: v for k, v in vars(args).items()},
         "results": {n: {str(seed): {"success": r["curve"], "sampled_success": r.get("sampled", []),
                                     "executability": r.get("exec", []), "wall_s": r["wall_s"],
                                     "masking": mask_counts(r.get("train", []))} for seed, r in runs.items()}
                     for n, runs in results.items()},
         "paired": comp, "paired_sampled": comp_sampled}, indent=2, default=str))
    print(f"\n{title}\n\n{md}\n\nwrote {out / 'optimizers.png'}, {out / 'optimizers.md'}")
    if args.publish:
        import shutil

        pub = Path(args.publish)
        pub.mkdir(parents=True, exist_ok=True)
        for name in ("optimizers.png", "optimizers.md", "optimizers.json"):
            shutil.copy2(out / name, pub / f"{args.domain}-{name}")
    from densecode.eval.bench_records import emit, figure

    records = []
    base = results[base_name]
    _, base_vals = seed_curves(base, "curve")
    for name, runs in results.items():
        steps, vals = seed_curves(runs, "curve")
        if not steps:
            continue
        mu0, mu1 = mean_sd([v[0] for v in vals])[0], mean_sd([v[-1] for v in vals])[0]
        note = f"step {steps[0]}: {mu0:.3f}; sd over {len(vals)} seeds {mean_sd([v[-1] for v in vals])[1]:.3f}"
        if comp and name in comp.get("differences", {}):
            d = comp["differences"][name]
            note += f"; − {base_name} {d['mean'][-1]:+.3f} [{d['lo'][-1]:+.3f}, {d['hi'][-1]:+.3f}]"
        records.append(figure(f"held-out success at step {steps[-1]}, {name} ({args.eval_tasks} tasks, "
                              f"{len(vals)} seeds)", mu1, "",
                              baseline=base_name if base_vals else None,
                              baseline_value=mean_sd([v[-1] for v in base_vals])[0] if base_vals else None,
                              note=note + f"; {title}"))
    emit(records)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
