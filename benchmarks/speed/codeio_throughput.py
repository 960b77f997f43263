"""codeio throughput: predicted values judged per second -- the true value computed in the sandbox pool, the answer
judged in the parent -- vs one fresh python per answer running `assert CALL == ANSWER`.

    python -m benchmarks.speed.codeio_throughput                        # 300 test tasks, one answer each
    python -m benchmarks.speed.codeio_throughput --tasks 100 --naive-limit 60   # quick size

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

from benchmarks.common import naive


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
    from densecode.eval.bench_records import CpuMeter, emit, figure
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
    same_values = sum(c.ok and c.text == t["canonical"].strip() for c, t in zip(computed, tasks))
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
    # The input direction: every answer's arguments run through the function in the sandbox (one program per
    # distinct call, no cache): canonical arguments on even tasks, `None)` (a call that fails or returns another
    # value) on odd ones.
    in_domain = get_domain_class("codeio")({"direction": "input"})
    in_tasks = in_domain.tasks("test", args.tasks, args.seed)
    in_answers = [t["canonical"] if i % 2 == 0 else "None)" for i, t in enumerate(in_tasks)]
    values._CACHE.clear()
    meter = CpuMeter(pool)
    start = time.perf_counter()
    in_records = in_domain.score(in_tasks, in_answers)
    in_s = time.perf_counter() - start
    meter.stop()
    in_verdicts = [r["outcome"] == "success" for r in in_records]
    in_scripts = [f"{t['setup']}\n{t['code']}\nassert ({t['expected']}) == {t['entry']}({a}\n"
                  for t, a in list(zip(in_tasks, in_answers))[: args.naive_limit]]
    in_naive_s, in_naive_verdicts = naive(in_scripts, args.timeout)
    in_agree = sum(a == b for a, b in zip(in_verdicts, in_naive_verdicts))
    in_rate, in_naive_rate = len(in_tasks) / in_s, len(in_scripts) / in_naive_s
    cpu = meter.ms_per(len(in_tasks))
    print(f"input : {len(in_tasks)} proposed inputs in {in_s:6.2f} s = {in_rate:7.1f} samples/s (each run in the "
          f"sandbox); canonical correct {sum(in_verdicts[0::2])}/{len(in_verdicts[0::2])}, `None)` correct "
          f"{sum(in_verdicts[1::2])}; naive {in_naive_rate:.1f} samples/s = {in_rate / in_naive_rate:.2f}x; verdicts "
          f"agree {in_agree}/{len(in_scripts)}; CPU {cpu['total']:.2f} ms/sample = "
          f"{meter.capacity(len(in_tasks)):.0f} samples/s on 2 idle cores; {meter.load_text()}")
    emit([figure("samples/s, codeio answers judged, each value computed in the sandbox pool", rate, "samples/s",
                 baseline=f"one fresh python per answer running assert CALL == ANSWER (first {len(scripts)})",
                 baseline_value=naive_rate,
                 note=f"{len(tasks)} test tasks, one answer each, no cache; judge alone {judge_rate:.0f} samples/s; "
                      f"verdicts agree {agree}/{len(scripts)}; {pool.max_workers} workers"),
          figure("samples/s, codeio input direction: proposed arguments run through the function in the sandbox",
                 in_rate, "samples/s",
                 baseline=f"one fresh python per answer running assert TARGET == f(ANSWER (first {len(in_scripts)})",
                 baseline_value=in_naive_rate,
                 note=f"{len(in_tasks)} test tasks, canonical arguments on half, `None)` on half, no cache; verdicts "
                      f"agree {in_agree}/{len(in_scripts)}; CPU {cpu['total']:.2f} ms/sample "
                      f"({meter.capacity(len(in_tasks)):.0f}/s on 2 idle cores); {meter.load_text()}")], args.json)
    in_ok = all(in_verdicts[0::2]) and in_agree == len(in_scripts)
    return 0 if same_values == len(tasks) and agree == len(scripts) and in_ok else 1


if __name__ == "__main__":
    sys.exit(main())
