"""Machine-readable figures for benchmarks/run_all.py (the convention documented there).

A benchmark script adds, after printing its figures:

    from densecode.eval.bench_records import figure, emit
    emit([figure("programs/s, MBPP references", pool_rate, "programs/s",
                 baseline="one python subprocess per program", baseline_value=naive_rate,
                 note=f"{passed}/974 passed")])

`emit` writes to the path in DENSECODE_BENCH_JSON (set by run_all) or the one
given (a script's own `--json PATH`), and does nothing when neither is set, so
scripts run by hand behave as before.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

ENV_JSON = "DENSECODE_BENCH_JSON"


def _num(value):
    if value is None or isinstance(value, bool):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def figure(name: str, value, unit: str = "", *, baseline: str | None = None, baseline_value=None,
           ratio=None, note: str = "") -> dict:
    """One record; `ratio` defaults to value / baseline_value when both are given."""
    v, b = _num(value), _num(baseline_value)
    if ratio is None and v is not None and b not in (None, 0.0):
        ratio = v / b
    return {"figure": name, "value": v, "unit": unit, "baseline": baseline, "baseline_value": b,
            "ratio": _num(ratio), "note": note}


def emit(records: list[dict], path: str | os.PathLike | None = None) -> Path | None:
    """Write the records as a JSON list (appending to records already there); None when no path is set."""
    target = path or os.environ.get(ENV_JSON)
    if not target:
        return None
    target = Path(target)
    existing = []
    if target.is_file():
        try:
            existing = json.loads(target.read_text())
        except json.JSONDecodeError:
            existing = []
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(list(existing) + list(records), indent=1))
    return target
