"""Dense token rewards vs the same rewards on the last token, with confidence intervals (issue #17).

Each arm is `densecode train` with one config and one change of reward placement; every arm gets the same config,
seeds, step budget and tuning (no setting is tuned on one arm alone):
  dense        reward.mode: dense (the config as shipped)
  sparse       reward.mode: sparse: every component except those in reward.sparse_keep_dense (default: the KL
               penalty, which PPO keeps per token) is summed onto the last token: each response's summed reward is
               identical, only its placement differs
  --ablation adds, one component at a time:
  last-<c>     only component <c> moved to the last token (reward.mode: sparse, reward.sparse_keep_dense: every
               other active component), for each active component but the KL term (sim/tests, syntax, lint, ...)
  spread-<s>   dense, with every component that has a `spread` option set to <s> (`each`: the value on every token
               of its span; `split`: divided among them; `last`: a score of the whole response on its last token,
               located values split) - each one the config does not use
  --arms picks some of these (dense and sparse always run); --baseline says which arm the others are compared with
  --credit compares the credit estimators (densecode/rl/credit.py) on the domain's shipped recipe instead:
  outcome      the outcome-only credit (the sparse arm of this comparison: the same optimiser, no token term)
  outcome+dense, outcome+local   the outcome plus the located findings' token term, β = --dense-scale
               (algo.ppo.* or algo.grpo.*, whichever optimiser the config uses)

Every run evaluates greedily and at the training temperature (tasks.eval_sampled_temperature =
generation.temperature) on the same held-out tasks every --eval-every steps, and the trainer writes each eval's
per-task outcomes (eval_tasks.jsonl), so arms are compared task by task. The analysis
(densecode.eval.paired_bootstrap.compare_arms) gives per step each arm's mean and seed-level sd, the paired
difference to the baseline arm (sparse; dense for --ablation) with a 95% bootstrap interval resampling seeds AND
tasks, and the steps an arm needs to reach the baseline's final score, with its interval; and at equal wall time
(densecode.eval.paired_bootstrap.compare_at_equal_time): each arm at its last eval within the baseline's training
time (the trainer's clock) against the baseline's final eval, with curves against minutes beside those against steps.
The report also tabulates each arm's training batches (response length, truncated share, KL to the reference;
first vs last 10 steps, from metrics.jsonl): an arm can move the eval by changing how long it answers.

    python -m benchmarks.experiments.dense_vs_sparse --domain robotics --seeds 0 1 2 3 4 --steps 80 --eval-tasks 500 --parallel 2
    python -m benchmarks.experiments.dense_vs_sparse --domain robotics --ablation --seeds 0 1 2 3 4 --steps 80 --parallel 2
    python -m benchmarks.experiments.dense_vs_sparse --domain codegen --arms spread-last --baseline sparse --parallel 2
    python -m benchmarks.experiments.dense_vs_sparse --diagnose runs/dense_vs_sparse/robotics/sparse-seed0   # credit diagnostics
    python -m benchmarks.experiments.dense_vs_sparse --domain robotics --credit --seeds 0 1 2 3 4 --steps 100 --parallel 2
    python -m benchmarks.experiments.dense_vs_sparse --quick        # the pipeline end to end at a toy budget (~35 s CPU)

Runs go to <out>/<arm>-seed<N>/ (default out: runs/dense_vs_sparse/<domain>); rerunning the same command skips
finished runs and continues unfinished ones from their latest checkpoint (densecode.eval.sweep), so a sweep can be
stopped and resumed. Each finished run is also archived (its result files, no weights) under
benchmarks/results/runs/ (--archive), kept with the project, so a sweep longer than one machine's session continues
on the next machine: archived runs are restored, not retrained. Results: <out>/results.{json,md} and the curves PNG, copied to benchmarks/results/ (not for
--quick), plus machine-readable figures for benchmarks/RESULTS.md (run_all convention, or --json PATH). When dense
does not beat the baseline (its interval at the last step does not exclude 0 on the positive side), the credit
diagnostics of every run (densecode.eval.credit) are added to the results.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import platform
import shlex
import shutil
import sys
import time
from pathlib import Path

from benchmarks.common import ROOT
from densecode.errors import DensecodeError

PASSES = ("greedy", "sampled")
PUBLISHED_CONFIGS = {"robotics": "robotics-gae", "codegen": "codegen-gae"}
# Full budget (issue #17) and the toy budget of --quick (2 runs of ~15 s CPU each: the pipeline end to end, no
# evidence). An option given on the command line wins over either.
FULL = {"seeds": [0, 1, 2, 3, 4], "steps": 80, "eval_every": 10, "eval_tasks": 500, "n_boot": 2000,
        "save_every": 20, "set": []}
QUICK = {"seeds": [0], "steps": 2, "eval_every": 2, "eval_tasks": 8, "n_boot": 200, "save_every": 2,
         "set": ["train.batch_size=4", "algo.num_minibatches=1",
                 "generation.batch_size=8"]}


# ------------------------------------------------------------------ arms


def load_cfg(config: str, extra: list[str]):
    from densecode.config import load_config

    return load_config(config, list(extra))


def spread_components(cfg, domain) -> dict[str, str]:
    """{component: its spread now} for the active components whose class takes a `spread` option."""
    from densecode.rewards.assembler import _domain_components, default_component_options, effective_weights
    from densecode.rewards.base import REGISTRY, load_class

    options = default_component_options(domain)
    for name, opts in (cfg.reward.components or {}).items():
        options[name] = {**options.get(name, {}), **opts}
    out = {}
    for name, weight in effective_weights(cfg.reward, domain).items():
        if weight <= 0:
            continue
        path = options.get(name, {}).get("class") or _domain_components(domain).get(name) or REGISTRY.get(name)
        if path and "spread" in inspect.signature(load_class(path).__init__).parameters:
            out[name] = str(options.get(name, {}).get("spread", "each"))
    return out


def arms_for(cfg, ablation: bool) -> dict[str, list[str]]:
    """{arm: its --set overrides} (besides the overrides every arm shares)."""
    arms = {"dense": ["reward.mode=dense"], "sparse": ["reward.mode=sparse"]}
    if not ablation:
        return arms
    from densecode.domains import build_domain
    from densecode.rewards.assembler import effective_weights

    domain = build_domain(cfg)
    active = [c for c, w in effective_weights(cfg.reward, domain).items() if w > 0]
    keep_default = list(cfg.reward.sparse_keep_dense)
    movable = [c for c in active if c not in keep_default]
    for comp in movable:
        keep = [c for c in active if c != comp]
        if len(movable) > 1:  # with one movable component, moving it alone is the sparse arm
            arms[f"last-{comp}"] = ["reward.mode=sparse", f"reward.sparse_keep_dense=[{', '.join(keep)}]"]
    from densecode.rewards.base import SPREADS

    spreads = spread_components(cfg, domain)
    for target in SPREADS:
        if spreads and any(s != target for s in spreads.values()):
            arms[f"spread-{target}"] = ["reward.mode=dense"] + [f"reward.components.{c}.spread={target}"
                                                                for c in sorted(spreads)]
    return arms


CREDIT_ARMS = ("outcome+dense", "outcome+local", "outcome")


def credit_arms(cfg, dense_scale: float) -> dict[str, list[str]]:
    """{arm: overrides} of the credit comparison, for the config's optimiser (PPO or GRPO)."""
    section = {"ppo": "algo.ppo", "grpo": "algo.grpo"}.get(cfg.algo.name)
    if section is None:
        raise DensecodeError(f"--credit compares PPO or GRPO credit estimators; the config's algo.name is "
                             f"{cfg.algo.name!r}")
    arms = {}
    for arm in CREDIT_ARMS:
        arms[arm] = [f"{section}.credit={arm}"] + ([f"{section}.dense_scale={dense_scale}"] if arm != "outcome" else [])
    return arms


def common_overrides(cfg, args) -> list[str]:
    """What every arm shares: eval schedule and passes, logging, seeds are added per run."""
    return [f"train.eval_every={args.eval_every}", f"train.eval_tasks={args.eval_tasks}",
            "tasks.eval_temperature=0.0", f"tasks.eval_sampled_temperature={cfg.generation.temperature}",
            f"train.rollouts_every={args.eval_every}", f"train.save_every={args.save_every}"]


def build_specs(args, cfg, arms: dict[str, list[str]], out: Path):
    from densecode.eval.sweep import RunSpec

    shared = common_overrides(cfg, args) + list(args.set or [])
    extra = ["--model", args.model] if args.model else []
    return [RunSpec(name=f"{arm}-seed{seed}", run_dir=out / f"{arm}-seed{seed}", config=str(args.config),
                    steps=args.steps, overrides=[*shared, *overrides, f"train.seed={seed}"], extra_args=extra)
            for seed in args.seeds for arm, overrides in arms.items()]


# ------------------------------------------------------------------ data


def read_eval_tasks(run_dir: Path) -> dict[str, dict[int, dict]]:
    """{pass: {step: row}} from a run's eval_tasks.jsonl (a later row for a step wins, as after a resume)."""
    path = run_dir / "eval_tasks.jsonl"
    if not path.is_file():
        raise DensecodeError(f"{path} is missing: that run has no per-task eval outcomes (finish it, or retrain it "
                             "with this densecode: older trainers did not write them)")
    out: dict[str, dict[int, dict]] = {}
    for line in path.read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            out.setdefault(row["pass"], {})[int(row["step"])] = row
    return out


def arm_arrays(out: Path, arms: list[str], seeds: list[int], pass_name: str):
    """({arm: values [seed, step, task]}, steps, metric) over the eval steps every run has; None when no run has
    this pass."""
    import numpy as np

    rows = {(a, s): read_eval_tasks(out / f"{a}-seed{s}").get(pass_name) for a in arms for s in seeds}
    if any(r is None for r in rows.values()):
        return None
    steps = sorted(set.intersection(*[set(r) for r in rows.values()]))
    if not steps:
        raise DensecodeError(f"the runs in {out} share no eval step for the {pass_name} pass")
    first = next(iter(rows.values()))[steps[0]]
    for (a, s), r in rows.items():
        for st in steps:
            if r[st]["task_ids"] != first["task_ids"]:
                raise DensecodeError(f"{out}/{a}-seed{s}: its step-{st} eval saw other tasks than "
                                     f"{arms[0]}-seed{seeds[0]}: runs must share tasks.eval_seed and the eval split")
    values = {a: np.array([[rows[(a, s)][st]["values"] for st in steps] for s in seeds], dtype=float) for a in arms}
    return values, steps, first["metric"]


# ------------------------------------------------------------------ report


# What each arm's training batches looked like, from the runs' metrics.jsonl: an arm can win or lose on the eval
# by changing how it answers (longer responses, truncation, drift from the reference), which the eval score alone
# does not show (`spread: each` pays per token, so its return grows with the response's length).
ROLLOUT_STATS = (("rollout/response_length", "response length (tokens)", "{:.1f}"),
                 ("rollout/truncated_frac", "truncated share", "{:.3f}"),
                 ("objective/kl", "KL to the reference (nats per response)", "{:.2f}"))


def read_train_rows(run_dir: Path) -> dict[int, dict]:
    """{step: row} of a run's training rows in metrics.jsonl (a later row for a step wins, as after a resume)."""
    path = run_dir / "metrics.jsonl"
    rows: dict[int, dict] = {}
    if path.is_file():
        for line in path.read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                if row.get("kind") == "train" and "step" in row:
                    rows[int(row["step"])] = row
    return rows


def eval_seconds(out: Path, arm: str, seeds: list[int], steps: list[int]) -> list[float] | None:
    """The arm's wall time at each eval step, mean over its seeds: the trainer's clock (`elapsed_s` of that step's
    training row, evals and all; 0 at step 0). None when a run does not log it at every step."""
    per_seed = []
    for s in seeds:
        rows = read_train_rows(out / f"{arm}-seed{s}")
        times = [0.0 if st == 0 else rows.get(st, {}).get("elapsed_s") for st in steps]
        if any(t is None for t in times):
            return None
        per_seed.append([float(t) for t in times])
    return [sum(col) / len(col) for col in zip(*per_seed)]


def rollout_stats(out: Path, arms: list[str], seeds: list[int], window: int = 10) -> dict:
    """{arm: {key: {"first"|"last": {"mean", "seed_sd"}}}}: each seed's mean over its first and last `window`
    training steps, then mean and sd over seeds. Keys a run does not log are left out."""
    import numpy as np

    stats: dict = {}
    for arm in arms:
        per_seed = [read_train_rows(out / f"{arm}-seed{s}") for s in seeds]
        if not all(per_seed):
            continue
        arm_stats = {}
        for key, _, _ in ROLLOUT_STATS:
            cols = {}
            for part in ("first", "last"):
                seed_means = []
                for rows in per_seed:
                    steps = sorted(st for st, r in rows.items() if key in r)
                    chosen = steps[:window] if part == "first" else steps[-window:]
                    if chosen:
                        seed_means.append(float(np.mean([rows[st][key] for st in chosen])))
                if len(seed_means) == len(seeds):
                    sd = float(np.std(seed_means, ddof=1)) if len(seed_means) > 1 else 0.0  # as compare_arms
                    cols[part] = {"mean": float(np.mean(seed_means)), "seed_sd": sd}
            if len(cols) == 2:
                arm_stats[key] = cols
        if arm_stats:
            stats[arm] = arm_stats
    return stats


def rollout_markdown(stats: dict, window: int = 10) -> str:
    """The training batches per arm: mean ± seed sd over the first and the last `window` steps."""
    if not stats:
        return ""
    keys = [(k, label, f) for k, label, f in ROLLOUT_STATS if any(k in a for a in stats.values())]
    lines = [f"#### training rollouts: mean ± seed sd of each seed's first {window} → last {window} steps", ""]
    head = ["arm"] + [label for _, label, _ in keys]
    lines += ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for arm, a in stats.items():
        cells = [arm]
        for k, _, f in keys:
            if k not in a:
                cells.append("–")
                continue
            first, last = a[k]["first"], a[k]["last"]
            cells.append(f"{f.format(first['mean'])} → {f.format(last['mean'])} ± {f.format(last['seed_sd'])}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def equal_time_markdown(eq: dict, steps: list[int], metric: str) -> str:
    """One line per arm: where it stood when the baseline's training time ran out."""
    base, budget = eq["baseline"], eq["baseline_seconds"]
    lines = [f"At equal wall time ({base}'s {budget / 60:.1f} min of training, evals included; each arm at its "
             f"last eval within it):"]
    for arm, r in eq["arms"].items():
        lines.append(f"- {arm} at step {steps[r['index']]} ({r['seconds'] / 60:.1f} min): {metric} {r['mean']:.3f} vs "
                     f"{base}'s final {r['baseline_mean']:.3f}, {fmt_ci(r['difference'], r['lo'], r['hi'])}"
                     + (" *" if r["excludes_zero"] else ""))
    return "\n".join(lines)


def fmt_ci(mean: float, lo: float, hi: float) -> str:
    return f"{mean:+.3f} [{lo:+.3f}, {hi:+.3f}]"


def fmt_steps(x) -> str:
    return "not reached" if x is None else f"{x:.1f}"


def pass_markdown(res: dict, metric: str, pass_name: str, temperature: str) -> str:
    arms = list(res["arms"])
    base = res["baseline"]
    others = [a for a in arms if a != base]
    lines = [f"#### held-out {metric}, {pass_name} ({temperature}): mean ± seed sd over {res['n_seeds']} seeds, "
             f"{res['n_tasks']} tasks; paired difference to {base} with its {res['level']:.0%} bootstrap interval "
             f"(seeds and tasks resampled, {res['n_boot']} replicates)", ""]
    head = ["step"] + arms + [f"{a} − {base}" for a in others]
    lines += ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for i, st in enumerate(res["steps"]):
        cells = [str(st)] + [f"{res['arms'][a]['mean'][i]:.3f} ± {res['arms'][a]['seed_sd'][i]:.3f}" for a in arms]
        for a in others:
            d = res["differences"][a]
            cells.append(fmt_ci(d["mean"][i], d["lo"][i], d["hi"][i]) + (" *" if d["excludes_zero"][i] else ""))
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "`*`: the interval excludes 0.", ""]
    last = res["steps"][-1]
    for a in others:
        r = res["steps_to_reach"][a]
        if not r.get("baseline_improved", True):
            lines.append(f"- steps {a} needs to reach {base}'s final {metric}: not defined, {base}'s final "
                         f"({r['target']:.3f} at step {last}) is not above its start ({r['start']:.3f} at step "
                         f"{res['steps'][0]})")
            continue
        frac = "" if r["reach_fraction"] is None else f" = {r['reach_fraction']:.0%} of {last}"
        lines.append(f"- steps {a} needs to reach {base}'s final {metric} ({r['target']:.3f} at step {last}): "
                     f"{fmt_steps(r['steps'])}{frac}, {res['level']:.0%} interval [{fmt_steps(r['lo'])}, "
                     f"{fmt_steps(r['hi'])}] (not reached in {r['never_reached_share']:.0%} of the replicates)")
    return "\n".join(lines)


def plot(results: dict, path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    passes = [p for p in PASSES if p in results["passes"]]
    timed = all("seconds" in results["passes"][p] for p in passes)
    rows = 3 if timed else 2
    fig, axes = plt.subplots(rows, len(passes), figsize=(6 * len(passes), 3.75 * rows), squeeze=False)
    for col, p in enumerate(passes):
        res, metric = results["passes"][p]["comparison"], results["passes"][p]["metric"]
        steps = res["steps"]
        # One colour per arm in every panel, so an arm's curve and its difference to the baseline match.
        colour = {arm: f"C{i}" for i, arm in enumerate(res["arms"])}
        ax = axes[0][col]
        for arm, a in res["arms"].items():
            mu, sd = np.array(a["mean"]), np.array(a["seed_sd"])
            ax.plot(steps, mu, marker="o", label=arm, color=colour[arm])
            ax.fill_between(steps, mu - sd, mu + sd, color=colour[arm], alpha=0.15)
        ax.set_title(f"held-out {metric}, {p} (mean ± seed sd, {res['n_seeds']} seeds)")
        ax.set_xlabel("PPO step")
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
        ax = axes[1][col]
        for arm, d in res["differences"].items():
            ax.plot(steps, d["mean"], marker="o", label=f"{arm} − {res['baseline']}", color=colour[arm])
            ax.fill_between(steps, d["lo"], d["hi"], color=colour[arm], alpha=0.15)
        ax.axhline(0, color="k", lw=0.8)
        ax.set_title(f"paired difference, {res['level']:.0%} bootstrap interval (seeds × tasks)")
        ax.set_xlabel("PPO step")
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
        if timed:
            ax = axes[2][col]
            for arm, a in res["arms"].items():
                minutes = np.array(results["passes"][p]["seconds"][arm]) / 60
                ax.plot(minutes, a["mean"], marker="o", label=arm, color=colour[arm])
            ax.set_title(f"held-out {metric}, {p}, against wall time")
            ax.set_xlabel("minutes of training (the trainer's clock, evals included; mean over seeds)")
            ax.legend(fontsize=8)
            ax.grid(alpha=0.3)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def diagnose_runs(run_dirs: list[Path], n_buckets: int = 5) -> dict:
    """Credit diagnostics of the runs' saved rollouts pooled (each record tagged with its run)."""
    from densecode.eval.credit import diagnose
    from densecode.rewards.explain import read_jsonl

    records = []
    for d in run_dirs:
        path = d / "rollouts.jsonl"
        if not path.is_file():
            raise DensecodeError(f"{path} is missing: --diagnose needs a run folder trained with "
                                 "train.rollouts_every > 0")
        for rec in read_jsonl(path):
            rec["run"] = d.name
            records.append(rec)
    return diagnose(records, n_buckets)


def reuse_main_runs(specs, main_archive: Path) -> list[str]:
    """The ablation's dense and sparse arms are the main comparison's runs (same config, overrides and budget):
    restore those from its archive instead of training them again. A run archived with other settings is refused
    by densecode.eval.sweep, naming it. Returns the names restored."""
    from densecode.eval.run_archive import archive_path
    from densecode.eval.sweep import restore_archived, run_state

    if not main_archive.is_dir():
        return []
    chosen = [s for s in specs if s.name.rsplit("-seed", 1)[0] in ("dense", "sparse")
              and archive_path(main_archive, s.name).is_file() and run_state(s) != "finished"]
    restore_archived(chosen, main_archive)
    return [s.name for s in chosen]


def machine() -> str:
    """e.g. 'Linux x86_64, 2 CPUs, no GPU' (the training runs use a GPU when torch sees one)."""
    import os

    import torch

    gpu = f"GPU {torch.cuda.get_device_name(0)}" if torch.cuda.is_available() else "no GPU"
    return f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs, {gpu}"


def trainer_wall_s(run_dir: Path) -> float | None:
    """The run's training wall time over all its sessions (the trainer's clock: the last step's elapsed_s)."""
    timed = {st: r for st, r in read_train_rows(run_dir).items() if "elapsed_s" in r}
    return float(timed[max(timed)]["elapsed_s"]) if timed else None


def analyse(args, out: Path, arms: list[str], baseline: str, walls: dict[str, float]) -> dict:
    from densecode.eval.paired_bootstrap import compare_arms, compare_at_equal_time

    results = {"domain": args.domain, "config": str(args.config), "arms": arms, "baseline": baseline,
               "seeds": args.seeds, "steps": args.steps, "eval_tasks": args.eval_tasks, "machine": machine(),
               "command": "python -m benchmarks.experiments.dense_vs_sparse " + shlex.join(args.argv),
               "wall_s_this_session": walls,
               "run_wall_s": {f"{a}-seed{s}": trainer_wall_s(out / f"{a}-seed{s}") for a in arms for s in args.seeds},
               "passes": {}}
    for p in PASSES:
        got = arm_arrays(out, arms, args.seeds, p)
        if got is None:
            continue
        values, steps, metric = got
        comp = compare_arms(values, steps, baseline=baseline, n_boot=args.n_boot, seed=0)
        results["passes"][p] = {"metric": metric, "comparison": comp}
        seconds = {a: eval_seconds(out, a, args.seeds, steps) for a in arms}
        if all(v is not None for v in seconds.values()):
            # Equal wall time besides equal samples: each arm where the baseline's training time ran out.
            results["passes"][p]["seconds"] = seconds
            results["passes"][p]["equal_time"] = compare_at_equal_time(values, seconds, baseline=baseline,
                                                                       n_boot=args.n_boot, seed=0)
    results["rollout_stats"] = rollout_stats(out, arms, args.seeds)
    if not results["passes"]:
        raise DensecodeError(f"no eval pass is shared by every run in {out}")
    return results


def write_outputs(results: dict, out: Path, stem: str, publish: Path | None, diag: dict | None) -> str:
    from densecode.eval.credit import diagnosis_markdown

    temps = {"greedy": "T = 0", "sampled": "the training temperature"}
    title = (f"{results['domain']}: {' vs '.join(results['arms'])}, {results['steps']} steps, seeds {results['seeds']}, "
             f"{results['eval_tasks']} held-out tasks ({results['config']})")
    walls = [w for w in results["run_wall_s"].values() if w is not None]
    wall = (f"; training wall time per run {sum(walls) / len(walls) / 60:.1f} min (mean of {len(walls)}, the "
            "trainer's clock)") if walls else ""
    parts = [f"### {title}", "", f"`{results['command']}` on {results['machine']}{wall}", ""]
    for p, r in results["passes"].items():
        parts += [pass_markdown(r["comparison"], r["metric"], p, temps[p]), ""]
        if r.get("equal_time"):
            parts += [equal_time_markdown(r["equal_time"], r["comparison"]["steps"], r["metric"]), ""]
    table = rollout_markdown(results.get("rollout_stats", {}))
    if table:
        parts += [table, ""]
    if diag:
        why = "" if results.get("credit") else "Dense does not beat the baseline here: "
        parts += [f"{why}Credit diagnostics per arm (all seeds pooled).", ""]
        for arm, d in diag.items():
            parts += [diagnosis_markdown(d, f"{arm}"), ""]
        results["diagnostics"] = diag
    md = "\n".join(parts)
    (out / f"{stem}.md").write_text(md + "\n")
    (out / f"{stem}.json").write_text(json.dumps(results, indent=1))
    plot(results, out / f"{stem}.png", title)
    if publish is not None:
        publish.mkdir(parents=True, exist_ok=True)
        for ext in ("md", "json", "png"):
            shutil.copy2(out / f"{stem}.{ext}", publish / f"{stem}.{ext}")
    return md


def figures(results: dict) -> list[dict]:
    """Machine-readable figures (benchmarks/RESULTS.md rows): the final paired difference and steps-to-reach."""
    from densecode.eval.bench_records import figure

    recs = []
    base = results["baseline"]
    for p, r in results["passes"].items():
        c, metric = r["comparison"], r["metric"]
        last = c["steps"][-1]
        for arm, d in c["differences"].items():
            note = (f"{c['level']:.0%} interval [{d['lo'][-1]:+.3f}, {d['hi'][-1]:+.3f}] (seeds × tasks bootstrap); "
                    f"{c['n_seeds']} seeds, {c['n_tasks']} tasks; {arm} {c['arms'][arm]['mean'][-1]:.3f}, "
                    f"{base} {c['arms'][base]['mean'][-1]:.3f}")
            recs.append(figure(f"{results['domain']} held-out {metric} ({p}), {arm} − {base} at step {last}",
                               d["mean"][-1], "", note=note))
            s = c["steps_to_reach"][arm]
            if not s.get("baseline_improved", True):
                continue  # no learning-speed figure when the baseline did not improve on its start
            recs.append(figure(f"{results['domain']}: steps {arm} needs to reach {base}'s final {metric} ({p})",
                               s["steps"], "steps", baseline=f"{base}'s steps", baseline_value=last,
                               note=f"interval [{fmt_steps(s['lo'])}, {fmt_steps(s['hi'])}]; None = not reached"))
    return recs


# ------------------------------------------------------------------ main


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--domain", default="robotics", help="robotics | codegen | testgen (or any registered domain)")
    p.add_argument("--config", default=None, help="default: the domain's shipped config (configs/<domain>.yaml)")
    p.add_argument("--seeds", type=int, nargs="+", default=None, help=f"default {FULL['seeds']}")
    p.add_argument("--steps", type=int, default=None, help=f"default {FULL['steps']}")
    p.add_argument("--eval-every", type=int, default=None,
                   help=f"held-out evals (greedy and sampled) every N steps; default {FULL['eval_every']}")
    p.add_argument("--eval-tasks", type=int, default=None, help=f"default {FULL['eval_tasks']}")
    p.add_argument("--save-every", type=int, default=None,
                   help=f"checkpoint every N steps (resume points); default {FULL['save_every']}")
    p.add_argument("--parallel", type=int, default=1, help="training runs at once (each uses about one core)")
    p.add_argument("--model", default=None, help="model for every arm (default: the config's)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="extra override for every arm")
    p.add_argument("--ablation", action="store_true", help="credit ablations: one component at a time, spread")
    p.add_argument("--arms", default=None, metavar="ARM,...",
                   help="only these of the --ablation arms besides dense and sparse (e.g. spread-last); "
                        "implies --ablation")
    p.add_argument("--credit", action="store_true",
                   help="compare the credit estimators outcome+dense / outcome+local with outcome (baseline) on the "
                        "domain's shipped recipe")
    p.add_argument("--dense-scale", type=float, default=0.5, help="β of the --credit arms' token term")
    p.add_argument("--baseline", default=None,
                   help="the arm every other one is compared with (default: sparse; dense with --ablation)")
    p.add_argument("--diagnose", nargs="+", metavar="RUN_DIR", default=None,
                   help="only the credit diagnostics of these finished run folders (pooled), no training")
    p.add_argument("--analyse-only", action="store_true", help="train nothing; analyse the runs in --out")
    p.add_argument("--n-boot", type=int, default=None, help=f"bootstrap replicates; default {FULL['n_boot']}")
    p.add_argument("--out", default=None, help="runs and results (default runs/dense_vs_sparse/<domain>)")
    p.add_argument("--archive", default=None,
                   help="each finished run's result files (no weights) are archived here and restored from here "
                        "by a later sweep on another machine; default benchmarks/results/runs/<stem>-<domain>; "
                        "'none' to keep runs only in --out (the default with --quick)")
    p.add_argument("--publish", default=None,
                   help="copy results here (default benchmarks/results; 'none' or --quick: not copied)")
    p.add_argument("--quick", action="store_true", help="toy budget end to end: 1 seed x 2 steps, 8 eval tasks")
    p.add_argument("--json", default=None, help="machine-readable figures (also $DENSECODE_BENCH_JSON)")
    p.add_argument("--no-progress", action="store_true")
    args = p.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    if args.arms and not args.credit:
        args.ablation = True
    if args.credit and args.ablation:
        p.error("--credit and --ablation are separate comparisons")
    budget = QUICK if args.quick else FULL
    for key in ("seeds", "steps", "eval_every", "eval_tasks", "n_boot", "save_every"):
        if getattr(args, key) is None:
            setattr(args, key, budget[key])
    args.set = budget["set"] + list(args.set)
    if args.config is None:
        # The shipped configs/<domain>.yaml, by name; robotics' published comparison ran on the GAE recipe
        # (robotics-gae.yaml: robotics.yaml before its outcome-credit default).
        args.config = args.domain if args.credit else PUBLISHED_CONFIGS.get(args.domain, args.domain)
    args.out_given = args.out is not None
    if args.out is None:
        sub = args.domain + ("-ablation" if args.ablation else "-credit" if args.credit else "")
        args.out = str(Path("runs/bench/quick/dense_vs_sparse" if args.quick else "runs/dense_vs_sparse") / sub)
    if args.publish is None and not args.quick:
        args.publish = str(ROOT / "benchmarks" / "results")
    if args.publish == "none":
        args.publish = None
    if args.archive is None and not args.quick:
        stem = "ablation" if args.ablation else "credit" if args.credit else "dense_vs_sparse"
        args.archive = str(ROOT / "benchmarks" / "results" / "runs" / f"{stem}-{args.domain}")
    if args.archive in (None, "none"):
        args.archive = None
    if args.eval_every <= 0 or args.steps <= 0 or args.eval_tasks <= 0:
        p.error("--steps, --eval-every and --eval-tasks must be > 0")
    return args


def run(args) -> int:
    if args.diagnose:
        from densecode.eval.credit import diagnosis_markdown

        dirs = [Path(d) for d in args.diagnose]
        diag = diagnose_runs(dirs)
        md = diagnosis_markdown(diag, ", ".join(d.name for d in dirs))
        print(md)
        # Several runs: beside them (their common folder) unless --out says where; the default --out names a
        # domain the runs need not belong to.
        target = (Path(args.out) if args.out_given
                  else dirs[0] if len(dirs) == 1 else Path(os.path.commonpath([d.resolve() for d in dirs])))
        target.mkdir(parents=True, exist_ok=True)
        (target / "diagnosis.md").write_text(md + "\n")
        (target / "diagnosis.json").write_text(json.dumps(diag, indent=1))
        print(f"\nwrote {target / 'diagnosis.md'} and diagnosis.json")
        return 0
    from densecode.eval.sweep import restore_archived, run_sweep

    cfg = load_cfg(args.config, [f"domain={args.domain}"] + list(args.set))
    arms = credit_arms(cfg, args.dense_scale) if args.credit else arms_for(cfg, args.ablation)
    if args.arms:
        chosen = [a.strip() for a in args.arms.split(",") if a.strip()]
        unknown = [a for a in chosen if a not in arms]
        if unknown:
            raise DensecodeError(f"--arms: no arm {', '.join(unknown)} on {args.domain}; its arms are "
                                 f"{', '.join(arms)}")
        always = ("outcome",) if args.credit else ("dense", "sparse")
        arms = {a: o for a, o in arms.items() if a in always or a in chosen}
    baseline = args.baseline or ("dense" if args.ablation else "outcome" if args.credit else "sparse")
    if baseline not in arms:
        raise DensecodeError(f"--baseline {baseline}: not one of this run's arms ({', '.join(arms)})")
    order = [a for a in arms if a != baseline] + [baseline] if not args.ablation else list(arms)
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    specs = build_specs(args, cfg, arms, out)
    print(f"{len(specs)} runs: arms {', '.join(arms)} x seeds {args.seeds}, {args.steps} steps each, in {out}",
          flush=True)
    t0 = time.perf_counter()
    archive = Path(args.archive) if args.archive else None
    if args.ablation and archive is not None:
        reuse_main_runs(specs, archive.with_name(f"dense_vs_sparse-{args.domain}"))
    if args.analyse_only:
        walls = {}
        if archive is not None:
            restore_archived(specs, archive)
    else:
        walls = run_sweep(specs, parallel=args.parallel, progress=not args.no_progress, archive_dir=archive)
    results = analyse(args, out, order, baseline, walls)
    results["credit"] = bool(args.credit)
    results["wall_s_total_this_session"] = time.perf_counter() - t0
    diag = None
    final_ok = all(r["comparison"]["differences"].get("dense", {}).get("lo", [0])[-1] > 0
                   for r in results["passes"].values()) if not (args.ablation or args.credit) else True
    # The credit comparison always gets every arm's diagnostics (the issue's "EV and sign agreement by position
    # fifth" per estimator); dense vs sparse when dense does not win.
    diag_arms = list(arms) if args.credit else [] if final_ok else ["dense", "sparse"]
    if diag_arms:
        try:
            diag = {arm: diagnose_runs([out / f"{arm}-seed{s}" for s in args.seeds]) for arm in diag_arms}
        except DensecodeError as exc:  # e.g. runs from an older trainer: the comparison still stands
            print(f"credit diagnostics skipped: {exc}", file=sys.stderr)
    stem = "ablation" if args.ablation else "credit" if args.credit else "dense_vs_sparse"
    stem = f"{stem}-{args.domain}"
    md = write_outputs(results, out, stem, Path(args.publish) if args.publish else None, diag)
    print(md)
    print(f"\nwrote {out / stem}.md, .json, .png" + (f" (copied to {args.publish})" if args.publish else ""))
    from densecode.eval.bench_records import emit

    emit(figures(results), args.json)
    return 0


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        return run(args)
    except DensecodeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
