"""What one sandboxed program costs at the least: CPU of a fork + exit of an interpreter holding the sandbox worker's
preloads, against a trivial program judged through the pool (worker + program), in the same run.

    python -m benchmarks.speed.fork_cost [--n 300] [--json PATH]

Figures (CPU milliseconds per program, parent + child, from getrusage; the load barely changes them):
- the floor: fork + os._exit of a process that imported the worker's PRELOAD modules, its heap frozen for the GC
  (as the worker's is), with and without allocating the child's 4 MiB emergency reserve as bytes (calloc'd, untouched,
  what the sandbox does) or as a bytearray (zero-filled, what it did before);
- a trivial AssertJob (`def f(x): return x + 1` and two asserts) judged by a one-worker SandboxPool: judge, worker and
  program CPU, from `CpuMeter`. Its ratio to the floor is the share of a program's cost that is not the fork itself.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys


def fork_cpu_ms(n: int, body) -> float:
    """CPU ms (parent + child) of `n` fork + `body()` + _exit, per fork."""
    r0, c0 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    for _ in range(n):
        pid = os.fork()
        if pid == 0:
            try:
                body()
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
    r1, c1 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    used = (r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime) + (c1.ru_utime + c1.ru_stime - c0.ru_utime
                                                                       - c0.ru_stime)
    return 1000.0 * used / n


def floor_in_worker_sized_process(n: int) -> dict:
    """Run the fork measurements in a fresh interpreter that imports what a sandbox worker imports (started the way
    the pool starts its workers), not in this process, which holds the pool and more."""
    import inspect
    import json
    import subprocess

    from densecode.sandbox import worker_proc

    boot = worker_proc._BOOT.replace("from densecode.sandbox._worker import main\nmain()\n", "")
    code = (boot + "import gc, json\nfrom densecode.sandbox._worker import PRELOAD\nimport densecode.sandbox._child\n"
            "for _m in PRELOAD:\n    __import__(_m)\ngc.freeze()\n"
            "import os, resource\n" + inspect.getsource(fork_cpu_ms) +
            f"print(json.dumps({{'floor': fork_cpu_ms({n}, lambda: None), "
            f"'bytes': fork_cpu_ms({n}, lambda: bytes(4 << 20)), "
            f"'bytearray': fork_cpu_ms({n}, lambda: bytearray(4 << 20))}}))\n")
    out = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, check=True,
                         env=worker_proc._WORKER_ENV)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=300, help="forks (and programs) per figure")
    ap.add_argument("--quick", action="store_true", help="100 per figure")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    n = 100 if args.quick else args.n

    from densecode.eval.bench_records import CpuMeter, emit, figure
    from densecode.sandbox import AssertJob, SandboxPool

    forks = floor_in_worker_sized_process(n)
    floor, with_bytes, with_bytearray = forks["floor"], forks["bytes"], forks["bytearray"]
    load0 = os.getloadavg()[0]

    with SandboxPool(max_workers=1) as pool:
        pool.run([AssertJob("x = 1", ["assert x == 1"])])
        jobs = [AssertJob("def f(x):\n    return x + 1\n", ["assert f(1) == 2", "assert f(2) == 3"]) for _ in range(n)]
        meter = CpuMeter(pool)
        results = pool.run(jobs)
        meter.stop()
    passed = sum(r.outcome == "passed" for r in results)
    cpu = meter.ms_per(n)
    print(f"fork + exit of a worker-sized interpreter: {floor:.2f} ms CPU; + bytes(4 MiB) {with_bytes:.2f}; "
          f"+ bytearray(4 MiB) {with_bytearray:.2f}")
    print(f"trivial program through the pool: {cpu['total']:.2f} ms CPU (judge {cpu['parent']:.2f}, worker "
          f"{cpu['workers']:.2f}, program {cpu['programs']:.2f}); {cpu['total'] / floor:.1f}x the bare fork; "
          f"passed {passed}/{n}; load average {load0:.1f} -> {os.getloadavg()[0]:.1f}")
    emit([figure("CPU ms per fork + exit of an interpreter holding the worker's preloads (the floor)", floor, "ms",
                 note=f"{n} forks; with the child's reserve as bytes(4 MiB) {with_bytes:.2f} ms, as bytearray(4 MiB) "
                      f"{with_bytearray:.2f} ms"),
          figure("CPU ms per trivial AssertJob through a 1-worker pool (judge + worker + program)", cpu["total"], "ms",
                 baseline="bare fork + exit (the floor above)", baseline_value=floor,
                 note=f"judge {cpu['parent']:.2f}, worker {cpu['workers']:.2f}, program {cpu['programs']:.2f} ms; "
                      f"passed {passed}/{n}; load average {load0:.1f}")], args.json)
    return 0 if passed == n else 1


if __name__ == "__main__":
    sys.exit(main())
