"""End-of-run report: learning curves (PNG) and a short Markdown summary in the run directory."""

from __future__ import annotations

import json
import math
from pathlib import Path

CURVES = [
    ("reward/sequence_mean", "reward per sample (total)"),
    ("objective/kl", "KL(π‖π_ref) per sample"),
    ("ppo/value_loss", "value loss"),
    ("ppo/explained_variance", "explained variance"),
    ("ppo/clipfrac", "clipfrac"),
    ("ppo/entropy", "entropy"),
    ("rollout/response_length", "response length (tokens)"),
    ("rollout/sim_score", "rollout sim score"),
    ("rollout/sim_success", "rollout sim success"),
    ("rollout/test_pass_rate", "rollout test pass rate"),
    ("rollout/task_success", "rollout task success"),
    ("train/approx_kl", "approx_kl (π_old ‖ π)"),
    ("reward/kl_share", "KL share of the reward"),
    ("rollout/no_signal_prompts", "prompts with no group signal"),
]

# The diagnostics table of summary.md: (metric, what it says), first vs last steps.
DIAGNOSTICS = [
    ("rollout/task_success", "training rollouts' task success"),
    ("rollout/executability", "training rollouts' executability"),
    ("rollout/outcome_mean", "task part of the reward (outcome)"),
    ("reward/sequence_mean", "total reward per sample"),
    ("objective/kl", "KL to the reference (nats per sample)"),
    ("reward/kl_share", "KL share of the reward"),
    ("ppo/clipfrac", "clipfrac"),
    ("train/approx_kl", "approx_kl (policy vs rollout policy)"),
    ("ppo/entropy", "entropy (nats per token)"),
    ("ppo/advantages_raw_std", "advantage sd (GAE, before whitening)"),
    ("ppo/outcome_adv_std", "outcome advantage sd (before whitening)"),
    ("ppo/value_loss", "value loss"),
    ("ppo/explained_variance", "explained variance"),
    *[(f"ppo/explained_variance_fifth{k}", f"explained variance, fifth {k}") for k in range(1, 6)],
    ("train/grad_norm", "policy grad norm (before clipping)"),
    ("rollout/response_length", "response length (tokens)"),
    ("rollout/truncated_frac", "truncated share"),
    ("rollout/no_signal_prompts", "prompts with no group signal (all pass / all fail)"),
    ("grpo/zero_std_frac", "groups with no reward spread"),
]
EVAL_KEYS = ["eval/success_rate", "eval/sampled_success_rate", "eval/executability", "eval/pass_rate", "eval/parse_rate"]


def _eval_keys(evals: list[dict]) -> list[str]:
    """The standard eval metrics present; else (a plug-in simulator's own names) every eval/* figure but n."""
    keys = [k for k in EVAL_KEYS if any(_finite(r.get(k)) for r in evals)]
    if keys:
        return keys
    return sorted({k for r in evals for k, v in r.items()
                   if k.startswith("eval/") and k != "eval/n" and _finite(v)})


def read_metrics(run_dir: str | Path) -> tuple[list[dict], list[dict]]:
    train, evals = [], []
    path = Path(run_dir) / "metrics.jsonl"
    if not path.is_file():
        return train, evals
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        rec = json.loads(line)
        (evals if rec.get("kind") == "eval" else train).append(rec)
    # A resumed run may repeat steps: keep the last record for each step.
    train = list({r["step"]: r for r in train}.values())
    evals = list({r["step"]: r for r in evals}.values())
    return sorted(train, key=lambda r: r["step"]), sorted(evals, key=lambda r: r["step"])


def _finite(v) -> bool:
    return isinstance(v, (int, float)) and math.isfinite(v)


def plot_curves(run_dir: str | Path, out: str | Path | None = None) -> Path | None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    train, evals = read_metrics(run_dir)
    panels = [(k, t) for k, t in CURVES if any(_finite(r.get(k)) for r in train)]
    eval_keys = _eval_keys(evals)
    if not panels and not eval_keys:
        return None
    n = len(panels) + (1 if eval_keys else 0)
    cols = 3
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.0 * rows), squeeze=False)
    i = 0
    if eval_keys:
        ax = axes[0][0]
        for k in eval_keys:
            pts = [(r["step"], r[k]) for r in evals if _finite(r.get(k))]
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=k.split("/", 1)[1])
        ax.set_title("held-out eval")
        ax.set_xlabel("step")
        ax.set_ylim(-0.02, 1.02)
        ax.legend(fontsize=8)
        i = 1
    for k, title in panels:
        ax = axes[i // cols][i % cols]
        pts = [(r["step"], r[k]) for r in train if _finite(r.get(k))]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], lw=1)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("step")
        i += 1
    for j in range(i, rows * cols):
        axes[j // cols][j % cols].axis("off")
    fig.tight_layout()
    out = Path(out) if out else Path(run_dir) / "learning_curves.png"
    fig.savefig(out, dpi=90)
    plt.close(fig)
    return out


def window_means(train: list[dict], key: str, w: int) -> tuple[float, float] | None:
    vals = [r[key] for r in train if _finite(r.get(key))]
    if not vals:
        return None
    w = min(w, len(vals))
    return sum(vals[:w]) / w, sum(vals[-w:]) / w


def diagnose(train: list[dict], w: int = 5) -> list[str]:
    """The known failure patterns of a run, in plain words with the numbers that triggered them."""
    flags = []
    m = {k: window_means(train, k, w) for k, _ in DIAGNOSTICS}
    clip, akl = m.get("ppo/clipfrac"), m.get("train/approx_kl") or window_means(train, "ppo/approx_kl", w)
    if clip is not None and akl is not None and max(clip) < 1e-3 and max(akl) < 1e-4:
        flags.append(f"**updates too small**: clipfrac {clip[1]:.4f} and approx_kl {akl[1]:.2e} (last {w} steps) — "
                     "the policy hardly moves within a step; a larger learning rate or more epochs moves it further (watch "
                     "the entropy: on densecode-tiny both collapsed the policy, docs/results.md)")
    kl, task = m.get("objective/kl"), m.get("rollout/task_success") or m.get("rollout/outcome_mean")
    if kl is not None and task is not None and kl[1] > max(2 * kl[0], 0.1) and task[1] - task[0] < 0.02:
        flags.append(f"**drift**: KL to the reference {kl[0]:.3f} → {kl[1]:.3f} while the rollouts' task success "
                     f"went {task[0]:.3f} → {task[1]:.3f} — the policy moves without getting better at the task")
    out = m.get("rollout/outcome_mean")
    if out is not None and out[1] < out[0] - 0.02:
        flags.append(f"**task reward falling**: outcome {out[0]:.3f} → {out[1]:.3f} (first vs last {w} steps)")
    rew = m.get("reward/sequence_mean")
    if rew is not None and rew[1] < rew[0] - 0.1 * max(abs(rew[0]), 0.1):
        flags.append(f"**reward falling**: total reward per sample {rew[0]:.3f} → {rew[1]:.3f}")
    share = m.get("reward/kl_share")
    if share is not None and share[1] > 0.5:
        flags.append(f"**KL dominates the reward**: {share[1]:.0%} of it (last {w} steps)")
    nosig = m.get("rollout/no_signal_prompts") or m.get("grpo/zero_std_frac")
    if nosig is not None and nosig[1] > 0.8:
        flags.append(f"**little group signal**: {nosig[1]:.0%} of the prompts' responses all pass or all fail")
    return flags


def paired_interval(before: list[float], after: list[float]) -> tuple[float, float, float]:
    """Mean paired difference after − before over tasks and its 95% normal interval (1.96 · sd / √n)."""
    d = [a - b for a, b in zip(after, before)]
    n = len(d)
    mean = sum(d) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in d) / (n - 1)) if n > 1 else 0.0
    half = 1.96 * sd / math.sqrt(n) if n else 0.0
    return mean, mean - half, mean + half


SUCCESS_METRICS = ("success_rate", "pass_rate")  # headline metrics whose per-task value is already 0/1 success


def eval_task_rows(run_dir: Path, values: str = "metric") -> dict[tuple[int, str], list[float]]:
    """{(step, pass): per-task values} from a run's eval_tasks.jsonl. values="metric": the domain's headline metric
    (testgen: coverage); "success": 1.0 where the task's outcome is "success", else 0.0 (every domain records it)."""
    path = run_dir / "eval_tasks.jsonl"
    rows: dict[tuple[int, str], list[float]] = {}
    if not path.is_file():
        return rows
    for line in path.read_text().splitlines():
        try:
            r = json.loads(line)
            got = ([float(v) for v in r["values"]] if values == "metric"
                   else [float(o == "success") for o in r["outcomes"]])
            rows[(int(r["step"]), str(r["pass"]))] = got
        except (ValueError, KeyError, TypeError):
            continue
    return rows


def eval_task_metric(run_dir: Path) -> str | None:
    """The headline metric a run's eval_tasks.jsonl holds (None without that file)."""
    return next(iter(eval_task_metrics(run_dir).values()), None)


def eval_task_metrics(run_dir: Path) -> dict[str, str]:
    """{pass: headline metric} of a run's eval_tasks.jsonl, in file order (a multi-task run's passes "<task>/<pass>"
    each have their task's metric)."""
    path = run_dir / "eval_tasks.jsonl"
    out: dict[str, str] = {}
    if path.is_file():
        for line in path.read_text().splitlines():
            try:
                r = json.loads(line)
                out.setdefault(str(r["pass"]), str(r["metric"]))
            except (ValueError, KeyError, TypeError):
                continue
    return out


def before_after_lines(run_dir: Path) -> list[str]:
    """Per eval pass (greedy, sampled): the first and last eval's score on the same tasks and the paired 95%
    interval of the change over tasks (one training seed: the task part of the noise only); where the headline
    metric is not success itself (testgen's coverage), task success too."""
    metric = eval_task_metric(run_dir)
    series = [("", eval_task_rows(run_dir))]
    if metric is not None and metric not in SUCCESS_METRICS:
        series = [(f" {metric}", series[0][1]), (" success", eval_task_rows(run_dir, values="success"))]
    out = []
    for label, rows in series:
        for p in sorted({q for _, q in rows}):
            steps = sorted(s for s, q in rows if q == p)
            if len(steps) < 2:
                continue
            a, b = rows[(steps[0], p)], rows[(steps[-1], p)]
            if len(a) != len(b) or not a:
                continue
            mean, lo, hi = paired_interval(a, b)
            out.append(f"| {p}{label} | {sum(a) / len(a):.3f} | {sum(b) / len(b):.3f} | {mean:+.3f} [{lo:+.3f}, "
                       f"{hi:+.3f}] | {len(a)} |")
    if not out:
        return []
    return [f"Held-out score, step {steps[0]} → step {steps[-1]}, with the paired 95% interval of the change over "
            "tasks:", "", "| pass | before | after | change [95% interval] | tasks |", "|---|---|---|---|---|", *out, ""]


def write_summary(run_dir: str | Path) -> Path:
    train, evals = read_metrics(run_dir)
    lines = [f"# densecode training run: {Path(run_dir).name}", ""]
    if train:
        last = train[-1]
        lines += [f"- steps: {last['step']}", f"- wall time: {last.get('elapsed_s', float('nan')) / 60:.1f} min", ""]
    if evals:
        keys = _eval_keys(evals)
        lines += ["| step | " + " | ".join(k.split("/", 1)[1] for k in keys) + " |",
                  "|---" * (len(keys) + 1) + "|"]
        for r in evals:
            lines.append(f"| {r['step']} | " + " | ".join(f"{r.get(k, float('nan')):.3f}" for k in keys) + " |")
        first, last = evals[0], evals[-1]
        lines.append("")
        for k in keys:
            if _finite(first.get(k)) and _finite(last.get(k)):
                lines.append(f"- {k}: {first[k]:.3f} → {last[k]:.3f} (Δ {last[k] - first[k]:+.3f})")
        lines.append("")
    lines += before_after_lines(Path(run_dir))
    if train:
        w = min(5, len(train))
        table = []
        for k, title in DIAGNOSTICS:
            fl = window_means(train, k, w)
            if fl is not None:
                table.append(f"| {title} | `{k}` | {fl[0]:.4g} | {fl[1]:.4g} |")
        if table:
            lines += ["## Diagnostics", "", f"Mean of the first and the last {w} logged steps.", "",
                      f"| what | metric | first {w} | last {w} |", "|---|---|---|---|", *table, ""]
        flags = diagnose(train, w)
        lines += ["Flags: " + ("none of the known failure patterns (updates too small, drift, falling reward, KL "
                               "dominating, no group signal) was seen." if not flags else "the known failure patterns "
                               "this run shows:"), ""]
        lines += [f"- {f}" for f in flags]
    lines += ["", "![learning curves](learning_curves.png)", ""]
    out = Path(run_dir) / "summary.md"
    out.write_text("\n".join(lines))
    return out


def write_report(run_dir: str | Path) -> None:
    plot_curves(run_dir)
    write_summary(run_dir)
