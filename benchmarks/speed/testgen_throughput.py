"""testgen judging throughput: responses judged per second in the sandbox pool vs one fresh python per program.

    python -m benchmarks.speed.testgen_throughput [--tasks 100] [--naive-limit 30] [--workers N] [--json PATH]

Judges generated test-split tasks' canonical asserts (short answers, 2-8 asserts) plus, for every other task, the
canonical asserts with one failing assert appended: one harness program per response (reference, up to 10 mutants,
equivalence check, traced asserts), nothing cached. A second figure judges 4 responses per task (a GRPO group:
canonical, canonical + a failing assert, the first assert alone, the canonical again), where the judge finds each
task's live mutants once and reuses them. The baseline runs the same programs one after another, each in a fresh
`python -c` with no isolation (the sandbox's naive baseline, as in sandbox_throughput.py), on the first
`--naive-limit` responses. Both sides must agree on every verdict they share.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

from densecode.domains.testgen import judge as judge_mod
from densecode.domains.testgen.asserts import parse_asserts
from densecode.domains.testgen.generator import generate_tasks
from densecode.domains.testgen.judge import JudgeOptions, _result_line, build_program, judge
from densecode.eval.bench_records import CpuMeter, emit, figure
from densecode.sandbox import SandboxPool


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tasks", type=int, default=100)
    ap.add_argument("--naive-limit", type=int, default=30)
    ap.add_argument("--workers", type=int, default=0, help="pool workers (0 = CPU count)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    from tqdm import tqdm

    tasks = generate_tasks("test", args.tasks, seed=0)
    responses = [t["canonical"] + (f"assert {t['entry_point']}(0) == 'never'\n" if i % 2 else "")
                 for i, t in enumerate(tasks)]
    opts = JudgeOptions()
    with SandboxPool(max_workers=args.workers or None) as pool:
        judge(tasks[:2], responses[:2], pool, opts)  # start the workers (with the harness preloaded)
        judge_mod._STATUS_CACHE.clear()  # cold: every task's mutants are found anew
        judge_mod._mutant_sources.cache_clear()  # ... and made anew
        meter = CpuMeter(pool)
        start = time.perf_counter()
        reports = judge(tasks, responses, pool, opts)
        pool_s = time.perf_counter() - start
        meter.stop()
        workers = pool.max_workers
        judge_mod._STATUS_CACHE.clear()
        group_tasks = [t for t in tasks[: max(1, len(tasks) // 4)] for _ in range(4)]
        group_responses = []
        for k, t in enumerate(group_tasks):
            lines = t["canonical"].splitlines()
            group_responses.append([t["canonical"], t["canonical"] + f"assert {t['entry_point']}(0) == 'never'\n",
                                    lines[0] + "\n", t["canonical"]][k % 4])
        start = time.perf_counter()
        group_reports = judge(group_tasks, group_responses, pool, opts)
        group_rate = len(group_tasks) / (time.perf_counter() - start)
    group_ok = sum(r.error is None for r in group_reports)
    print(f"pool, groups of 4 responses per task: {group_rate:.1f} responses/s; judged {group_ok}/{len(group_tasks)}")
    pool_rate = len(tasks) / pool_s
    ok = sum(r.outcome(t["target_coverage"]) == ("success" if i % 2 == 0 else "failing_assert")
             for i, (t, r) in enumerate(zip(tasks, reports)))
    print(f"pool: {len(tasks)} responses in {pool_s:.2f} s = {pool_rate:.1f} responses/s ({workers} workers); "
          f"verdicts as expected: {ok}/{len(tasks)}")

    n_naive = min(args.naive_limit, len(tasks))
    agree = 0
    naive_meter = CpuMeter()
    start = time.perf_counter()
    for t, resp, rep in tqdm(list(zip(tasks, responses, reports))[:n_naive], desc="naive", unit="prog"):
        asserts = [p.source for p in parse_asserts(resp, t["reference"]) if p.valid]
        program, nonce = build_program(t, asserts, opts)
        proc = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=False,
                              stdin=subprocess.DEVNULL)
        data = _result_line(proc.stdout, nonce)
        holds = [a["holds"] for a in (data or {}).get("asserts", [])]
        agree += holds == [a.status == "holds" for a in rep.asserts if a.status in ("holds", "fails")]
    naive_s = time.perf_counter() - start
    naive_meter.stop()
    naive_rate = n_naive / naive_s
    print(f"naive: {n_naive} responses in {naive_s:.2f} s = {naive_rate:.1f} responses/s; "
          f"same verdicts as the pool: {agree}/{n_naive}")
    print(f"ratio: {pool_rate / naive_rate:.2f}x")
    cpu, naive_cpu = meter.ms_per(len(tasks)), naive_meter.ms_per(n_naive)
    capacity = meter.capacity(len(tasks), cores=2)
    print(f"cpu: pool {cpu['total']:.2f} ms/response (parent {cpu['parent']:.2f}, workers {cpu['workers']:.2f}, "
          f"programs {cpu['programs']:.2f}) = {capacity:.0f} responses/s on 2 idle cores; naive "
          f"{naive_cpu['total']:.2f} ms/response; {meter.load_text()}")
    base = f"one fresh python per program, sequential, no isolation (first {n_naive})"
    emit([figure(f"responses/s, testgen canonical asserts (+1 failing on half), {len(tasks)} tasks, sandbox pool",
                 pool_rate, "responses/s", baseline=base, baseline_value=naive_rate,
                 note=f"verdicts as expected {ok}/{len(tasks)}; naive agrees {agree}/{n_naive}; {workers} workers; "
                      f"{meter.load_text()}"),
          figure("CPU ms per testgen response, all processes (judge, workers, programs), nothing cached",
                 cpu["total"], "ms/response", baseline="one fresh python per program (CPU of parent + pythons)",
                 baseline_value=naive_cpu["total"],
                 ratio=naive_cpu["total"] / cpu["total"] if cpu["total"] else None,
                 note=f"ratio = naive CPU / pool CPU; parent {cpu['parent']:.2f}, workers {cpu['workers']:.2f}, "
                      f"programs {cpu['programs']:.2f} ms; allows {capacity:.0f} responses/s on 2 idle cores"),
          figure(f"responses/s, testgen groups of 4 responses per task, {len(group_tasks)} responses, sandbox pool",
                 group_rate, "responses/s", baseline=base, baseline_value=naive_rate,
                 note=f"live mutants found once per task; judged {group_ok}/{len(group_tasks)}")],
         args.json)
    return 0 if ok == len(tasks) and agree == n_naive and group_ok == len(group_tasks) else 1


if __name__ == "__main__":
    sys.exit(main())
