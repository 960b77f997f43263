"""multitask_curves.png and multitask.md in a run directory: per task, over steps, the quota, both utility parts,
beta_k, the rollout reward and the held-out score (from metrics.jsonl, so it also works on a finished run)."""

from __future__ import annotations

import math
from pathlib import Path

PANELS = [("quota", "task quota q_k"), ("potential", "learning potential P_k (reward variance, EMA)"),
          ("synergy", "synergy S_k (gradient cosine)"), ("utility", "utility U_k"), ("beta", "KL beta_k")]


def _finite(v) -> bool:
    return isinstance(v, (int, float)) and math.isfinite(v)


def write_multitask_report(run_dir: str | Path, tasks: list[str], headline: dict[str, str]) -> Path | None:
    from densecode.rl.report import read_metrics

    train, evals = read_metrics(run_dir)
    if not train:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = PANELS + [("reward", "rollout reward per sample"), ("eval", "held-out score (headline metric)")]
    fig, axes = plt.subplots(2, 4, figsize=(18, 8))
    for ax, (part, title) in zip(axes.flat, panels):
        for task in tasks:
            if part == "eval":
                rows, key = evals, f"eval/{task}/{headline[task]}"
            elif part == "reward":
                rows, key = train, f"reward/{task}/sequence_mean"
            else:
                rows, key = train, f"multi/{task}/{part}"
            pts = [(r["step"], r[key]) for r in rows if _finite(r.get(key))]
            if pts:
                ax.plot(*zip(*pts), marker=".", label=task)
        if part == "eval":
            pts = [(r["step"], r["eval/average/score"]) for r in evals if _finite(r.get("eval/average/score"))]
            if pts:
                ax.plot(*zip(*pts), "k--", marker=".", label="average")
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("step")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    axes.flat[-1].axis("off")
    fig.tight_layout()
    out = Path(run_dir) / "multitask_curves.png"
    fig.savefig(out, dpi=80)
    plt.close(fig)
    header = "| task | quota (last) | utility (last) | beta (last) | held-out first | held-out last |"
    lines = ["# multi-task run: per task", "", header, "|---|---|---|---|---|---|"]
    for task in tasks:
        key = f"eval/{task}/{headline[task]}"
        ev = [r[key] for r in evals if _finite(r.get(key))]
        last = train[-1]
        cells = [last.get(f"multi/{task}/{p}") for p in ("quota", "utility", "beta")]
        cells += [ev[0] if ev else None, ev[-1] if ev else None]
        lines.append(f"| {task} ({headline[task]}) | " + " | ".join(f"{c:.3f}" if _finite(c) else "-" for c in cells) + " |")
    avg = [r["eval/average/score"] for r in evals if _finite(r.get("eval/average/score"))]
    if avg:
        lines += ["", f"- average held-out score: {avg[0]:.3f} -> {avg[-1]:.3f}"]
    lines += ["", "![per-task curves](multitask_curves.png)", ""]
    (Path(run_dir) / "multitask.md").write_text("\n".join(lines))
    return out
