"""Writing an evaluation run: results.json, report.md and a PNG chart.

Every benchmark produces the same `results` dict, so `densecode compare` and
the report work on all of them:

    {"benchmark", "model", "created", "command", "settings": {...},
     "scores": {label: number},            # headline figures, e.g. "MBPP+ pass@1"
     "outcomes": {outcome class: count},   # over all judged samples
     "breakdown": {label: count} | absent, # RoboEval/robotics, paper layout
     "breakdown_total": int,
     "timing": {...},
     "tasks": [{"task_id", "prompt", "completion", "verdict", "outcome", "error",
                "n", "n_correct", "samples": [...]}]}
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

RESULTS_FILE = "results.json"
REPORT_FILE = "report.md"
CHART_FILE = "chart.png"

# The paper's RoboEval error-breakdown columns, in its order.
BREAKDOWN_COLUMNS = ("Python error", "robot-execution error", "task failure", "success")


def _fmt(value: Any) -> str:
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "n/a"
        return f"{value:.3f}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value)


def _cell(text: Any, limit: int = 80) -> str:
    """One markdown table cell: no newlines or pipes, clipped."""
    text = "" if text is None else str(text)
    text = text.replace("\r", " ").replace("\n", " ⏎ ").replace("|", "\\|")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def markdown_table(header: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for row in rows:
        lines.append("| " + " | ".join(_cell(_fmt(v)) for v in row) + " |")
    return "\n".join(lines)


def render_markdown(results: dict) -> str:
    """report.md: headline scores, outcome classes, breakdown (RoboEval layout), timing, per-task table."""
    bench = results.get("benchmark", "?")
    out = [f"# densecode eval: {bench}", ""]
    out.append(f"- model: `{results.get('model', '?')}`")
    if results.get("created"):
        out.append(f"- date: {results['created']}")
    if results.get("command"):
        out.append(f"- command: `{results['command']}`")
    settings = results.get("settings") or {}
    if settings:
        out.append("- settings: " + ", ".join(f"{k}={v}" for k, v in settings.items() if v is not None))
    out += ["", "## Scores", ""]
    scores = results.get("scores") or {}
    out.append(markdown_table(["metric", "value"], [[k, v] for k, v in scores.items()]))

    breakdown = results.get("breakdown")
    if breakdown:
        total = results.get("breakdown_total") or sum(breakdown.values())
        out += ["", f"## Error breakdown (out of {total} prompts)", ""]
        columns = [c for c in BREAKDOWN_COLUMNS if c in breakdown] + [c for c in breakdown if c not in BREAKDOWN_COLUMNS]
        out.append(markdown_table(["model", *columns], [[results.get("model_label") or results.get("model"),
                                                          *(breakdown[c] for c in columns)]]))

    outcomes = results.get("outcomes") or {}
    if outcomes:
        total = sum(outcomes.values())
        out += ["", "## Outcome classes (all judged samples)", ""]
        out.append(markdown_table(["outcome", "count", "share"],
                                  [[k, v, f"{v / total:.1%}" if total else "-"] for k, v in
                                   sorted(outcomes.items(), key=lambda kv: -kv[1])]))

    timing = results.get("timing") or {}
    if timing:
        out += ["", "## Timing", ""]
        out.append(markdown_table(["phase", "value"], [[k, v] for k, v in timing.items()]))

    tasks = results.get("tasks") or []
    groups: dict[str, list[dict]] = {}
    for t in tasks:
        if t.get("task"):  # RoboEval: several phrasings (prompts) per task
            groups.setdefault(str(t["task"]), []).append(t)
    if groups:
        out += ["", f"## Per task ({len(groups)} tasks, pass@1 summed over their prompts)", ""]
        out.append(markdown_table(["task", "prompts", "success (pass@1 sum)"], [
            [name, len(ts), round(sum(t.get("pass@1", 0.0) for t in ts), 2)] for name, ts in groups.items()]))
    if tasks:
        out += ["", f"## Per {'prompt' if groups else 'task'} ({len(tasks)})", ""]
        many = any(t.get("n", 1) > 1 for t in tasks)
        header = ["task", "correct/n" if many else "verdict", "outcome", "error"]
        rows = []
        for t in tasks:
            verdict = f"{t.get('n_correct', 0)}/{t.get('n', 1)}" if many else t.get("verdict", "")
            rows.append([t.get("task_id"), verdict, t.get("outcome", ""), t.get("error") or ""])
        out.append(markdown_table(header, rows))
    return "\n".join(out) + "\n"


def render_chart(results: dict, path: str | Path) -> Path:
    """PNG: headline scores (left) and outcome classes or the error breakdown (right)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    scores = {k: v for k, v in (results.get("scores") or {}).items()
              if isinstance(v, float) and 0.0 <= v <= 1.0}
    counts = results.get("breakdown") or results.get("outcomes") or {}
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    ax = axes[0]
    if scores:
        bars = ax.bar(range(len(scores)), list(scores.values()), color="#4C72B0")
        ax.set_xticks(range(len(scores)), list(scores.keys()), rotation=20, ha="right")
        ax.bar_label(bars, fmt="%.3f")
    ax.set_ylim(0, 1.05)
    ax.set_title(f"{results.get('benchmark', '')}: scores")
    ax = axes[1]
    if counts:
        labels = list(counts.keys())
        bars = ax.bar(range(len(labels)), [counts[k] for k in labels], color="#DD8452")
        ax.set_xticks(range(len(labels)), labels, rotation=20, ha="right")
        ax.bar_label(bars)
        ax.margins(y=0.15)  # room for the labels above the tallest bar
    ax.set_title("error breakdown" if results.get("breakdown") else "outcome classes")
    fig.suptitle(str(results.get("model", "")), fontsize=9)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def write_run(out_dir: str | Path, results: dict) -> dict[str, Path]:
    """Write results.json, report.md and chart.png into `out_dir`; return their paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"results": out / RESULTS_FILE, "report": out / REPORT_FILE, "chart": out / CHART_FILE}
    _atomic_write(paths["results"], json.dumps(results, indent=1, default=str))
    _atomic_write(paths["report"], render_markdown(results))
    render_chart(results, paths["chart"])
    return paths
