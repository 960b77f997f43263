"""codeio throughput: predicted values judged per second -- the true value computed in the sandbox pool, the answer
judged in the parent -- vs one fresh python per answer running `assert CALL == ANSWER`.

    python benchmarks/codeio_throughput.py                        # 300 test tasks, one answer each
    python benchmarks/codeio_throughput.py --tasks 100 --naive-limit 60   # quick size

Each task gets one answer (every other one its canonical literal, the rest a wrong value) and nothing is cached: the
timed path computes every task's value in the sandbox (as the generator does: 16 calls per sandboxed program,
`compute_values` with its cache emptied) and then judges every answer (`CodeioDomain.score`: literal_eval,
tolerant equality, the departure matcher), so it is the worst case of one answer per task. The judge-only rate (answers to tasks whose value is known, as in
training with several samples per prompt) is printed too. The naive baseline runs code + `assert CALL == ANSWER` as
one fresh interpreter per answer, sequentially, with no isolation, on the first `--naive-limit` answers; the verdicts
must agree (the tasks' values compare exactly, no float tolerance is needed).

Machine-readable figures (benchmarks/run_all.py convention) go to --json PATH or $DENSECODE_BENCH_JSON.
"""

from __future__ import annotations

import argparse
import sys
import time

from codegen_throughput import naive


def wrong(text: str) -> str:
    """A wrong answer of the same shape: the canonical text with its first digit or letter changed."""
    for i, c in enumerate(text):
        if c.isdigit():
            return text[:i] + str((int(c) + 1) % 10) + text[i + 1:]
        if c.isalpha() and c not in "TFN" and text[max(i - 1, 0)] in "'\"" + c:
            return text[:i] + ("b" if c != "b" else "c") + text[i + 1:]
    return "None" if text != "None" else "0"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=300, help="generated test-split tasks (one answer each)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--naive-limit", type=int, default=100, help="answers the naive baseline judges")
    ap.add_argument("--timeout", type=float, default=5.0, help="naive baseline: wall-clock limit per program")
    ap.add_argument("--quick", action="store_true", help="100 tasks, naive baseline on 60 answers")
    ap.add_argument("--json", default=None, help="also write machine-readable figures here (run_all convention)")
    args = ap.parse_args()
    if args.quick:
        args.tasks, args.naive_limit = 100, 60

    from densecode.domains import get_domain_class
    from densecode.domains.codeio import values
    from densecode.domains.codeio.tasks import GENERATED_BATCH
    from densecode.eval.bench_records import emit, figure
    from densecode.sandbox import get_default_pool

    domain = get_domain_class("codeio")()
    tasks = domain.tasks("test", args.tasks, args.seed)
    answers = [t["canonical"] if i % 2 == 0 else wrong(t["canonical"]) for i, t in enumerate(tasks)]
    pool = get_default_pool()
    values._CACHE.clear()  # the timed run computes every value again
    start = time.perf_counter()
    computed = values.compute_values([(t["setup"], t["code"], t["call"]) for t in tasks], pool,
                                     max_chars=max(len(t["canonical"]) for t in tasks), batch=GENERATED_BATCH)
    records = domain.score(tasks, answers)
    full_s = time.perf_counter() - start
    start = time.perf_counter()
    domain.score(tasks, answers)
    judge_s = time.perf_counter() - start
    same_values = sum(c.ok and c.text == t["canonical"] for c, t in zip(computed, tasks))
    verdicts = [r["outcome"] == "success" for r in records]

    scripts = [f"{t['setup']}\n{t['code']}\nassert ({t['call']}) == ({a})\n"
               for t, a in list(zip(tasks, answers))[: args.naive_limit]]
    naive_s, naive_verdicts = naive(scripts, args.timeout)
    agree = sum(a == b for a, b in zip(verdicts, naive_verdicts))

    rate, judge_rate, naive_rate = len(tasks) / full_s, len(tasks) / judge_s, len(scripts) / naive_s
    print(f"pool  : {len(tasks)} answers in {full_s:6.2f} s = {rate:7.1f} samples/s (value in the sandbox + judge; "
          f"{pool.max_workers} workers); values reproduced {same_values}/{len(tasks)}; correct answers "
          f"{sum(verdicts)}/{len(tasks)}")
    print(f"judge : {len(tasks)} answers in {judge_s:6.3f} s = {judge_rate:7.0f} samples/s (value known)")
    print(f"naive : {len(scripts)} answers in {naive_s:6.1f} s = {naive_rate:7.1f} samples/s")
    print(f"ratio : {rate / naive_rate:.2f}x the naive baseline; verdicts agree on {agree}/{len(scripts)}")
    emit([figure("samples/s, codeio answers judged, each value computed in the sandbox pool", rate, "samples/s",
                 baseline=f"one fresh python per answer running assert CALL == ANSWER (first {len(scripts)})",
                 baseline_value=naive_rate,
                 note=f"{len(tasks)} test tasks, one answer each, no cache; judge alone {judge_rate:.0f} samples/s; "
                      f"verdicts agree {agree}/{len(scripts)}; {pool.max_workers} workers")], args.json)
    return 0 if same_values == len(tasks) and agree == len(scripts) else 1


if __name__ == "__main__":
    sys.exit(main())
