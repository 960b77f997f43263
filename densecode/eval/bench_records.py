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


class CpuMeter:
    """CPU seconds of this process, a sandbox pool's workers and the programs they ran, over a measured span.

        meter = CpuMeter(pool)          # starts now
        ...                             # the measured work
        meter.stop()                    # meter.ms_per(n) -> {"parent": .., "workers": .., "programs": .., "total": ..}

    CPU time, unlike throughput, barely depends on what else the machine runs: `capacity(n, cores)` is the rate the
    measured CPU cost allows on `cores` otherwise idle cores (a bound, not a measurement of wall-clock speed).
    Also records the 1-minute load average at the start and the end.
    """

    def __init__(self, pool=None):
        self.pool = pool
        self.load = [os.getloadavg()[0]]
        self._start = self._read()
        self.used: dict[str, float] | None = None

    def _read(self) -> dict[str, float]:
        import resource

        own = resource.getrusage(resource.RUSAGE_SELF)
        kids = resource.getrusage(resource.RUSAGE_CHILDREN)  # reaped subprocesses (a naive baseline's pythons)
        out = {"parent": own.ru_utime + own.ru_stime, "children": kids.ru_utime + kids.ru_stime}
        pool_times = self.pool.cpu_times() if self.pool is not None else {}
        out["workers"] = pool_times.get("workers_s", 0.0)
        out["programs"] = pool_times.get("programs_s", 0.0)
        return out

    def stop(self) -> dict[str, float]:
        end = self._read()
        self.load.append(os.getloadavg()[0])
        self.used = {k: end[k] - self._start[k] for k in end}
        self.used["total"] = sum(self.used.values())
        return self.used

    def ms_per(self, n: int) -> dict[str, float]:
        return {k: 1000.0 * v / max(n, 1) for k, v in (self.used or {}).items()}

    def capacity(self, n: int, cores: int = 2) -> float:
        """Samples/s that `cores` idle cores would allow at the measured CPU cost per sample."""
        total = (self.used or {}).get("total", 0.0)
        return cores * n / total if total > 0 else float("nan")

    def load_text(self) -> str:
        return f"load average {self.load[0]:.1f} -> {self.load[-1]:.1f}"


def peak_rss_mib() -> float:
    """This process's peak resident memory, MiB: Linux's VmHWM, the high-water mark of this process image
    alone (getrusage's ru_maxrss also keeps the parent's RSS at the fork that started it); ru_maxrss elsewhere."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource
    import sys

    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / (1024 * 1024) if sys.platform == "darwin" else rss / 1024  # bytes on macOS, KiB on Linux


def _call_and_measure(fn, args):
    result = fn(*args)
    return result, peak_rss_mib()


def in_child_process(fn, *args):
    """(fn(*args), peak RSS in MiB) with fn run in a fresh spawned process: each implementation's peak memory is
    its own, not the high-water mark an earlier run left in this process. fn must be a module-level function and
    its arguments and result picklable."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(_call_and_measure, fn, args).result()
