"""Sandbox throughput: SandboxPool vs one fresh `python` subprocess per program.

    python -m benchmarks.speed.sandbox_throughput [--data ../shared/data/mbpp/mbpp.jsonl] [--workers N]
    python -m benchmarks.speed.sandbox_throughput --naive-limit 100 --skip-mix   # quick size (what run_all passes in quick mode)

1. Judges every MBPP reference solution against its asserts (974 programs) with
   the pool, then with the naive baseline (a fresh interpreter per program, run
   one after another, no isolation), and prints programs/s for both and the ratio.
   Expected: 971/974 pass (tasks 367 and 927 reference `Node` before defining it
   in their setup code and fail upstream too; 123 needs 2.5 s of CPU, over the 2 s limit).
   The naive baseline has only a wall-clock limit (subprocess timeout), like most harnesses.
2. Judges a mix in which 10% of the programs are hostile (fork bomb, memory bomb,
   infinite loop, output flood, sleeping, SIGTERM-ignoring, detached child,
   file writes, network, reward hacks) and prints throughput and outcome classes.
   The naive baseline is not run on the mix: it has no isolation to survive it.

Machine-readable figures (benchmarks/run_all.py convention) go to --json PATH or
$DENSECODE_BENCH_JSON when either is set.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import sys
import time

from benchmarks.common import MBPP, naive
from densecode.sandbox import AssertJob, Limits, SandboxPool

DEFAULT_DATA = str(MBPP)

HOSTILE = [
    ("fork_bomb", "import os\nwhile True:\n    os.fork()\n"),
    ("memory_bomb", "x = bytes(10 ** 11)\n"),
    ("infinite_loop", "while True:\n    pass\n"),
    ("deep_recursion", "def r(n):\n    return r(n + 1)\nr(0)\n"),
    ("output_flood", "while True:\n    print('y' * 4096)\n"),
    ("sleep", "import time\ntime.sleep(60)\n"),
    ("ignore_sigterm", "import signal\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nwhile True:\n    pass\n"),
    ("detached_child", "import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(120)\n"),
    ("write_outside", "open('/etc/densecode-bench', 'w').write('x')\n"),
    ("network", "import socket\nsocket.create_connection(('1.1.1.1', 80), timeout=1)\n"),
    ("always_true_eq", "class A:\n    def __eq__(self, o):\n        return True\n"),
    ("sys_exit", "import sys\nsys.exit(0)\n"),
]


def load_mbpp(path: str) -> list[dict]:
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def mbpp_jobs(rows: list[dict]) -> list[AssertJob]:
    return [AssertJob(r["code"], r["test_list"], setup=r.get("test_setup_code", "")) for r in rows]


def hostile_job(name: str, code: str, row: dict) -> AssertJob:
    """A hostile program in place of a reference solution (the always-True __eq__ one returns it from every function)."""
    if name == "always_true_eq":
        fn = row["test_list"][0].split("assert", 1)[1].strip().lstrip("(").split("(", 1)[0].strip()
        code += f"def {fn}(*a, **k):\n    return A()\n"
    return AssertJob(code, row["test_list"], setup=row.get("test_setup_code", ""))


def run_naive(rows: list[dict], timeout_s: float) -> tuple[float, int]:
    """One fresh interpreter per program, sequentially; pass = exit code 0."""
    seconds, verdicts = naive(["\n".join([r.get("test_setup_code", ""), r["code"], *r["test_list"]]) for r in rows],
                              timeout_s)
    return seconds, sum(verdicts)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=DEFAULT_DATA, help="path to mbpp.jsonl")
    ap.add_argument("--workers", type=int, default=None, help="pool size (default: CPU count)")
    ap.add_argument("--timeout", type=float, default=5.0, help="wall-clock limit per program, seconds")
    ap.add_argument("--cpu", type=float, default=2.0, help="CPU-time limit per program, seconds (sandbox default)")
    ap.add_argument("--naive-limit", type=int, default=None, help="run the naive baseline on the first N programs only")
    ap.add_argument("--skip-mix", action="store_true", help="skip the 10%% hostile mix")
    ap.add_argument("--json", default=None, help="also write machine-readable figures here (run_all convention)")
    args = ap.parse_args()

    if not os.path.exists(args.data):
        print(f"SKIP: MBPP data not found at {os.path.abspath(args.data)} (expected ../shared/data/mbpp/mbpp.jsonl "
              "beside the repo; pass --data PATH)")
        return 0
    rows = load_mbpp(args.data)
    limits = Limits(timeout_s=args.timeout, cpu_s=args.cpu)

    with SandboxPool(max_workers=args.workers, limits=limits) as pool:
        print(f"pool: {pool.max_workers} workers; protections: {json.dumps(pool.protections)}")
        pool.run([AssertJob("x = 1", ["assert x == 1"])])  # start-up is not part of the throughput
        start = time.perf_counter()
        results = pool.run(mbpp_jobs(rows), progress=True)
        pool_s = time.perf_counter() - start
        outcomes = collections.Counter(r.outcome for r in results)
        failed = [(row["task_id"], r.outcome, r.exc_type) for row, r in zip(rows, results) if r.outcome != "passed"]
        slowest = sorted(((r.details.get("cpu_s") or 0.0, row["task_id"]) for row, r in zip(rows, results)), reverse=True)[:3]

        mix_report = None
        if not args.skip_mix:
            rng = random.Random(0)
            n_hostile = len(rows) // 10
            jobs, kinds = mbpp_jobs(rows), ["mbpp"] * len(rows)
            for k, idx in enumerate(rng.sample(range(len(rows)), n_hostile)):
                name, code = HOSTILE[k % len(HOSTILE)]
                jobs[idx], kinds[idx] = hostile_job(name, code, rows[idx]), name
            start = time.perf_counter()
            mixed = pool.run(jobs, progress=True)
            mix_s = time.perf_counter() - start
            by_kind: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
            for kind, r in zip(kinds, mixed):
                by_kind[kind][r.outcome] += 1
            hostile_passed = sum(r.outcome == "passed" for kind, r in zip(kinds, mixed) if kind != "mbpp")
            mix_report = (len(jobs), n_hostile, mix_s, by_kind, hostile_passed)
        still_ok = pool.run([AssertJob("x = 1", ["assert x == 1"])])[0].outcome == "passed"

    naive_rows = rows[: args.naive_limit] if args.naive_limit else rows
    naive_s, naive_passed = run_naive(naive_rows, args.timeout)

    pool_rate = len(rows) / pool_s
    naive_rate = len(naive_rows) / naive_s
    print()
    print("== MBPP reference solutions (974 programs, their asserts) ==")
    print(f"pool  : {len(rows)} programs in {pool_s:7.1f} s = {pool_rate:6.1f} programs/s; passed {outcomes['passed']}/{len(rows)}")
    print(f"naive : {len(naive_rows)} programs in {naive_s:7.1f} s = {naive_rate:6.1f} programs/s; passed {naive_passed}/{len(naive_rows)}")
    print(f"ratio : pool is {pool_rate / naive_rate:.1f}x the naive baseline")
    print(f"pool outcome classes: {dict(outcomes)}")
    print(f"not passed: {failed}")
    print(f"most CPU (s, task_id): {slowest}")
    if mix_report:
        n, n_hostile, mix_s, by_kind, hostile_passed = mix_report
        print()
        print(f"== mix with 10% hostile programs ({n_hostile} of {n}) ==")
        print(f"pool  : {n} programs in {mix_s:7.1f} s = {n / mix_s:6.1f} programs/s")
        for kind in sorted(by_kind):
            print(f"  {kind:16s} {dict(by_kind[kind])}")
        print(f"hostile programs judged passed: {hostile_passed}")
    print(f"pool still serving after the batch: {still_ok}")

    from densecode.eval.bench_records import emit, figure

    naive_what = "one fresh python per program, sequential, no isolation"
    if len(naive_rows) < len(rows):
        naive_what += f" (first {len(naive_rows)} programs)"
    records = [figure("programs/s, MBPP reference solutions + asserts, sandbox pool", pool_rate, "programs/s",
                      baseline=naive_what, baseline_value=naive_rate,
                      note=f"{outcomes['passed']}/{len(rows)} passed in the pool; "
                           f"{naive_passed}/{len(naive_rows)} in the baseline; {pool.max_workers} workers")]
    if mix_report:
        n, n_hostile, mix_s, by_kind, hostile_passed = mix_report
        records.append(figure(f"programs/s, MBPP with {n_hostile} of {n} programs hostile, sandbox pool",
                              n / mix_s, "programs/s",
                              note=f"hostile judged passed: {hostile_passed}; pool still serving: {still_ok}; "
                                   "naive baseline not run (no isolation)"))
    emit(records, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
