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
    if train:
        w = min(5, len(train))
        for k, title in CURVES[:3]:
            vals = [r.get(k) for r in train]
            a = [v for v in vals[:w] if _finite(v)]
            b = [v for v in vals[-w:] if _finite(v)]
            if a and b:
                lines.append(f"- {title}: first {w} steps {sum(a) / len(a):.3f}, last {w} steps {sum(b) / len(b):.3f}")
    lines += ["", "![learning curves](learning_curves.png)", ""]
    out = Path(run_dir) / "summary.md"
    out.write_text("\n".join(lines))
    return out


def write_report(run_dir: str | Path) -> None:
    plot_curves(run_dir)
    write_summary(run_dir)
