"""codegen throughput: generated tasks' responses judged per second in the sandbox pool vs one fresh python each.

    python -m benchmarks.speed.codegen_throughput                       # 300 test tasks, 2 responses each
    python -m benchmarks.speed.codegen_throughput --tasks 100 --naive-limit 60   # quick size

Responses: each task's canonical body and a wrong one (`return None`), so half pass and half fail, judged through the
domain's own scoring path (`CodegenDomain.score`: the tests component, one AssertJob per response). The naive baseline
runs the same programs and asserts as one fresh interpreter per response, sequentially, with no isolation (pass = exit
code 0), on the first `--naive-limit` responses. Both verdicts must agree on the responses both judged.

Machine-readable figures (benchmarks/run_all.py convention) go to --json PATH or $DENSECODE_BENCH_JSON.
"""

from __future__ import annotations

import argparse
import sys
import time

from benchmarks.common import naive


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=300, help="generated test-split tasks (2 responses each)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--naive-limit", type=int, default=100, help="responses the naive baseline judges")
    ap.add_argument("--timeout", type=float, default=5.0, help="naive baseline: wall-clock limit per program")
    ap.add_argument("--quick", action="store_true", help="100 tasks, naive baseline on 60 responses")
    ap.add_argument("--json", default=None, help="also write machine-readable figures here (run_all convention)")
    args = ap.parse_args()
    if args.quick:
        args.tasks, args.naive_limit = 100, 60

    from densecode.domains import get_domain_class
    from densecode.eval.bench_records import CpuMeter, emit, figure
    from densecode.sandbox import AssertJob, get_default_pool

    domain = get_domain_class("codegen")()
    tasks = domain.tasks("test", args.tasks, args.seed)
    pairs = [(t, r) for t in tasks for r in (domain.canonical_response(t), "    return None\n")]
    pool = get_default_pool()
    pool.run([AssertJob("x = 1", ["assert x == 1"])] * pool.max_workers)  # start-up is not part of the throughput
    meter = CpuMeter(pool)
    start = time.perf_counter()
    records = domain.score([t for t, _ in pairs], [r for _, r in pairs])
    pool_s = time.perf_counter() - start
    meter.stop()
    passed = [r["outcome"] == "success" for r in records]
    canonical_ok = sum(passed[0::2])

    scripts = ["\n".join([t["setup"], t["prompt"] + r, *t["tests"]]) for t, r in pairs[: args.naive_limit]]
    naive_meter = CpuMeter()
    naive_s, naive_verdicts = naive(scripts, args.timeout)
    naive_meter.stop()
    agree = sum(a == b for a, b in zip(passed, naive_verdicts))

    pool_rate, naive_rate = len(pairs) / pool_s, len(scripts) / naive_s
    print(f"pool  : {len(pairs)} responses in {pool_s:6.1f} s = {pool_rate:6.1f} samples/s "
          f"({pool.max_workers} workers); canonical passed {canonical_ok}/{len(tasks)}, "
          f"wrong passed {sum(passed[1::2])}/{len(tasks)}")
    print(f"naive : {len(scripts)} responses in {naive_s:6.1f} s = {naive_rate:6.1f} samples/s")
    print(f"ratio : the pool is {pool_rate / naive_rate:.2f}x the naive baseline; verdicts agree on "
          f"{agree}/{len(scripts)}")
    cpu, naive_cpu = meter.ms_per(len(pairs)), naive_meter.ms_per(len(scripts))
    capacity = meter.capacity(len(pairs), cores=2)
    print(f"cpu   : pool {cpu['total']:.2f} ms/sample (parent {cpu['parent']:.2f}, workers {cpu['workers']:.2f}, "
          f"programs {cpu['programs']:.2f}) = {capacity:.0f} samples/s on 2 idle cores; naive {naive_cpu['total']:.2f} "
          f"ms/sample; {meter.load_text()}")
    emit([figure("samples/s, codegen responses judged by hidden asserts, sandbox pool", pool_rate, "samples/s",
                 baseline=f"one fresh python per response, sequential, no isolation (first {len(scripts)})",
                 baseline_value=naive_rate,
                 note=f"{len(tasks)} test tasks x 2 responses; canonical passed {canonical_ok}/{len(tasks)}; "
                      f"verdicts agree {agree}/{len(scripts)}; {pool.max_workers} workers; {meter.load_text()}"),
          figure("CPU ms per codegen sample, all processes (judge, workers, programs)", cpu["total"], "ms/sample",
                 baseline="one fresh python per response (CPU of parent + pythons)", baseline_value=naive_cpu["total"],
                 ratio=naive_cpu["total"] / cpu["total"] if cpu["total"] else None,
                 note=f"ratio = naive CPU / pool CPU; parent {cpu['parent']:.2f}, workers {cpu['workers']:.2f}, "
                      f"programs {cpu['programs']:.2f} ms; allows {capacity:.0f} samples/s on 2 idle cores")],
         args.json)
    return 0 if canonical_ok == len(tasks) and agree == len(scripts) else 1


if __name__ == "__main__":
    sys.exit(main())
