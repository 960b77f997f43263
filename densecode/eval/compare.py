"""`densecode compare RUN_A RUN_B`: two eval runs or two train runs, side by side.

An eval run is a directory holding `results.json` (from `densecode eval`), or
that file itself; a train run is a directory holding `metrics.jsonl` (from
`densecode train`). The command prints a markdown table (A, B, B - A) and writes
`compare.md` and `compare.png` into `--out` (default: the current directory).
For eval runs the table holds the headline scores, the outcome classes, the
error breakdown, the per-task changes (fixed / broken) and the paired 95% interval of the pass@1
change over the shared tasks; for train runs the
first, last and best value of every metric both logged, and the PNG shows the
curves over steps.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from densecode.errors import DensecodeError
from densecode.eval.report import RESULTS_FILE, markdown_table
from densecode.rl.report import paired_interval

METRICS_FILE = "metrics.jsonl"


# ------------------------------------------------------------------ loading


def load_run(path: str | Path) -> tuple[str, Any]:
    """("eval", results dict) or ("train", list of metric records) for a run path."""
    path = Path(path)
    if path.is_file() and path.name.endswith(".json"):
        results_path = path
    elif path.is_dir() and (path / RESULTS_FILE).is_file():
        results_path = path / RESULTS_FILE
    else:
        results_path = None
    if results_path is not None:
        try:
            results = json.loads(results_path.read_text())
        except json.JSONDecodeError as exc:
            raise DensecodeError(f"{results_path}: not valid JSON ({exc}); was the eval interrupted?") from None
        if not isinstance(results, dict) or "scores" not in results:
            raise DensecodeError(f"{results_path}: not a densecode eval results file (no 'scores')")
        return "eval", results
    metrics_path = path if path.is_file() and path.name.endswith(".jsonl") else path / METRICS_FILE
    if metrics_path.is_file():
        records = []
        for lineno, line in enumerate(metrics_path.read_text().splitlines(), 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                # A run killed mid-write leaves a partial last line: ignore only that one.
                if lineno == len(metrics_path.read_text().splitlines()):
                    continue
                raise DensecodeError(f"{metrics_path}:{lineno}: not a JSON object") from None
            if isinstance(record, dict):
                records.append(record)
        if not records:
            raise DensecodeError(f"{metrics_path}: no metric records yet")
        return "train", records
    if not path.exists():
        raise DensecodeError(f"run not found: {path} (pass a `densecode eval --out` or `densecode train` directory)")
    raise DensecodeError(
        f"{path}: neither {RESULTS_FILE} (eval run) nor {METRICS_FILE} (train run) found; "
        "pass the directory a `densecode eval --out` or `densecode train` wrote"
    )


# ------------------------------------------------------------------ eval runs


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _delta(a: Any, b: Any) -> str:
    fa, fb = _num(a), _num(b)
    if fa is None or fb is None or math.isnan(fa) or math.isnan(fb):
        return ""
    if isinstance(a, int) and isinstance(b, int):
        return f"{b - a:+d}"
    return f"{fb - fa:+.3f}"


def _cmp_rows(a: dict, b: dict, missing: Any = "-") -> list[list[Any]]:
    """Rows [key, A, B, B - A]; counts absent from one run are `missing` there (0 for outcome counts)."""
    keys = list(a) + [k for k in b if k not in a]
    return [[k, a.get(k, missing), b.get(k, missing), _delta(a.get(k, missing), b.get(k, missing))] for k in keys]


def task_pass_at_1(results: dict) -> dict[str, float]:
    """task id -> that task's pass@1 (the share of its samples that pass; 0 or 1 when greedy)."""
    return {str(t["task_id"]): t.get("n_correct", 0) / max(1, t.get("n", 1)) for t in results.get("tasks", [])}


def paired_change(a: dict, b: dict) -> tuple[float, float, float, int] | None:
    """(B - A pass@1, 95% low, 95% high, tasks) over the tasks both runs scored: the interval is paired, so
    the tasks' own difficulty cancels and only the per-task changes count. None when fewer than 2 tasks are
    shared."""
    pa, pb = task_pass_at_1(a), task_pass_at_1(b)
    shared = [k for k in pa if k in pb]
    if len(shared) < 2:
        return None
    mean, lo, hi = paired_interval([pa[k] for k in shared], [pb[k] for k in shared])
    return mean, lo, hi, len(shared)


def compare_eval(a: dict, b: dict, label_a: str, label_b: str) -> tuple[str, dict]:
    if a.get("benchmark") != b.get("benchmark"):
        note = f"\n> note: different benchmarks ({a.get('benchmark')} vs {b.get('benchmark')})\n"
    else:
        note = ""
    header = ["metric", label_a, label_b, "B - A"]
    parts = [f"# compare: {a.get('benchmark')}{note}", "",
             f"- A = {label_a}: model `{a.get('model')}`", f"- B = {label_b}: model `{b.get('model')}`", "",
             "## Scores", "", markdown_table(header, _cmp_rows(a.get("scores", {}), b.get("scores", {})))]
    if a.get("breakdown") or b.get("breakdown"):
        parts += ["", "## Error breakdown", "",
                  markdown_table(header, _cmp_rows(a.get("breakdown") or {}, b.get("breakdown") or {}, 0))]
    parts += ["", "## Outcome classes", "",
              markdown_table(header, _cmp_rows(a.get("outcomes", {}), b.get("outcomes", {}), 0))]
    verdict_a = {str(t["task_id"]): t.get("n_correct", 0) > 0 for t in a.get("tasks", [])}
    verdict_b = {str(t["task_id"]): t.get("n_correct", 0) > 0 for t in b.get("tasks", [])}
    shared = [k for k in verdict_a if k in verdict_b]
    fixed = [k for k in shared if verdict_b[k] and not verdict_a[k]]
    broken = [k for k in shared if verdict_a[k] and not verdict_b[k]]
    parts += ["", "## Per-task changes", "",
              markdown_table(["", "count", "tasks"], [
                  ["tasks in both runs", len(shared), ""],
                  ["solved by both", sum(verdict_a[k] and verdict_b[k] for k in shared), ""],
                  ["fixed (B solves, A does not)", len(fixed), ", ".join(fixed[:30])],
                  ["broken (A solves, B does not)", len(broken), ", ".join(broken[:30])],
              ])]
    change = paired_change(a, b)
    if change is not None:
        mean, lo, hi, n = change
        parts += ["", "## Paired change", "",
                  f"pass@1 on the {n} tasks in both runs: B - A = {mean:+.3f}, paired 95% interval "
                  f"[{lo:+.3f}, {hi:+.3f}] over tasks ({'above 0' if lo > 0 else 'below 0' if hi < 0 else 'spans 0'})."]
    summary = {"kind": "eval", "fixed": fixed, "broken": broken, "paired_change": change}
    return "\n".join(parts) + "\n", summary


def _eval_chart(a: dict, b: dict, label_a: str, label_b: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    scores = [k for k in a.get("scores", {}) if k in b.get("scores", {})
              and _num(a["scores"][k]) is not None and _num(b["scores"][k]) is not None
              and 0 <= a["scores"][k] <= 1 and 0 <= b["scores"][k] <= 1]
    counts_a = a.get("breakdown") or a.get("outcomes") or {}
    counts_b = b.get("breakdown") or b.get("outcomes") or {}
    classes = list(counts_a) + [k for k in counts_b if k not in counts_a]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, keys, va, vb, title in (
        (axes[0], scores, a.get("scores", {}), b.get("scores", {}), "scores"),
        (axes[1], classes, counts_a, counts_b, "error breakdown" if a.get("breakdown") else "outcome classes"),
    ):
        x = np.arange(len(keys))
        ax.bar(x - 0.2, [va.get(k, 0) for k in keys], 0.4, label=label_a)
        ax.bar(x + 0.2, [vb.get(k, 0) for k in keys], 0.4, label=label_b)
        ax.set_xticks(x, keys, rotation=20, ha="right")
        ax.set_title(title)
        ax.legend()
    fig.suptitle(f"{a.get('benchmark')}: {label_a} vs {label_b}")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


# ------------------------------------------------------------------ train runs


def _series(records: list[dict]) -> dict[str, list[tuple[float, float]]]:
    """metric -> [(step, value)], numeric metrics only."""
    series: dict[str, list[tuple[float, float]]] = {}
    for i, record in enumerate(records):
        step = _num(record.get("step"))
        step = float(i) if step is None else step
        for key, value in record.items():
            v = _num(value)
            if key == "step" or v is None or math.isnan(v) or math.isinf(v):
                continue
            series.setdefault(key, []).append((step, v))
    return series


_LOWER_IS_BETTER = ("loss", "kl", "error", "clipfrac", "violation")


def _lower_is_better(key: str) -> bool:
    seconds = key.startswith("time/") or (key.endswith("_s") and not key.endswith("per_s"))
    return seconds or any(tag in key for tag in _LOWER_IS_BETTER)
_PRIORITY = ("eval/", "reward/total", "reward/mean", "loss", "perf/")


def _ordered(keys: list[str]) -> list[str]:
    """Held-out eval first, then total reward, losses and throughput, then the rest in logged order."""
    def rank(key: str) -> int:
        return next((i for i, p in enumerate(_PRIORITY) if key.startswith(p)), len(_PRIORITY))

    return sorted(keys, key=rank)  # stable: logged order within a rank


def compare_train(a: list[dict], b: list[dict], label_a: str, label_b: str) -> tuple[str, dict]:
    sa, sb = _series(a), _series(b)
    shared = _ordered([k for k in sa if k in sb])
    if not shared:
        raise DensecodeError("the two train runs log no metric in common; nothing to compare")
    rows = []
    for key in shared:
        best = min if _lower_is_better(key) else max
        va, vb = [v for _, v in sa[key]], [v for _, v in sb[key]]
        rows.append([key, va[-1], vb[-1], _delta(va[-1], vb[-1]), best(va), best(vb), va[0], vb[0]])
    header = ["metric", f"{label_a} last", f"{label_b} last", "B - A (last)", f"{label_a} best",
              f"{label_b} best", f"{label_a} first", f"{label_b} first"]
    steps = f"{label_a}: {len(a)} records, {label_b}: {len(b)} records"
    text = "\n".join(["# compare: train runs", "", f"- {steps}", "- best = min for losses/KL/times, max otherwise",
                      "", markdown_table(header, rows)]) + "\n"
    return text, {"kind": "train", "metrics": shared}


def _train_chart(a: list[dict], b: list[dict], label_a: str, label_b: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sa, sb = _series(a), _series(b)
    shared = _ordered([k for k in sa if k in sb])[:12]
    cols = min(3, len(shared))
    rows = math.ceil(len(shared) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.5 * cols, 3 * rows), squeeze=False)
    for ax, key in zip(axes.flat, shared):
        for series, label in ((sa[key], label_a), (sb[key], label_b)):
            ax.plot([s for s, _ in series], [v for _, v in series], label=label)
        ax.set_title(key, fontsize=9)
        ax.set_xlabel("step")
    for ax in list(axes.flat)[len(shared):]:
        ax.axis("off")
    axes.flat[0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


# ------------------------------------------------------------------ command


def compare_runs(run_a: str | Path, run_b: str | Path, out: str | Path = ".", label_a: str | None = None,
                 label_b: str | None = None) -> tuple[str, dict[str, Path]]:
    """The markdown comparison, and the paths of compare.md / compare.png written to `out`."""
    kind_a, data_a = load_run(run_a)
    kind_b, data_b = load_run(run_b)
    if kind_a != kind_b:
        raise DensecodeError(f"cannot compare a {kind_a} run ({run_a}) with a {kind_b} run ({run_b})")
    label_a = label_a or Path(run_a).resolve().name or "A"
    label_b = label_b or Path(run_b).resolve().name or "B"
    if label_a == label_b:
        label_a, label_b = f"A:{label_a}", f"B:{label_b}"
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"markdown": out / "compare.md", "chart": out / "compare.png"}
    if kind_a == "eval":
        text, _ = compare_eval(data_a, data_b, label_a, label_b)
        _eval_chart(data_a, data_b, label_a, label_b, paths["chart"])
    else:
        text, _ = compare_train(data_a, data_b, label_a, label_b)
        _train_chart(data_a, data_b, label_a, label_b, paths["chart"])
    paths["markdown"].write_text(text, encoding="utf-8")
    return text, paths
