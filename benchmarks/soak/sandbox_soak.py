"""Sandbox soak: does a pool that has judged N programs hold more resources than after its first 1,000?

    python -m benchmarks.soak.sandbox_soak                      # N = 100,000 (about 30-60 min on 2 busy cores)
    python -m benchmarks.soak.sandbox_soak --programs 5000 --workers 2

Machine-readable figures (benchmarks/run_all.py convention) go to --json PATH or
$DENSECODE_BENCH_JSON when either is set.

Judges N programs in batches through one SandboxPool: a mix of passing, failing and crashing
solutions, hostile ones (detached daemons, fork + exit, output floods, sleepers past the wall limit,
CPU loops past the CPU limit, forged result lines), function-call, stdio and API-bridge jobs. Between
batches, when no program runs, it counts for the pool process and its workers together:

  fds        open file descriptors (/proc/PID/fd)
  threads    threads (/proc/PID/task)
  processes  the pool process and every process below it, zombies included

It prints the counts after the first 1,000 programs and at the end, with the ratio end / first, and
exits 1 if any of them grew (resident memory is printed too, for information: allocator noise makes it
no pass/fail figure). Workers replaced during the run (none are expected) are reported.
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import time

from densecode.sandbox import (
    ApiJob,
    AssertJob,
    FunctionCallJob,
    Limits,
    SandboxPool,
    StdioJob,
)

GOOD = "def f(x):\n    return x + 1\n"
TESTS = ["assert f(1) == 2", "assert f(5) == 6"]

# name -> job factory; the cycle below draws from this list in order, so every N has the same mix.
ASSERT_PROGRAMS = {
    "passes": GOOD,
    "wrong_answer": "def f(x):\n    return x\n",
    "runtime_error": "def f(x):\n    return 1 / 0\n",
    "syntax_error": "def f(x)\n    return x\n",
    "prints_and_passes": "print('hello ' * 100)\n" + GOOD,
    "forks_and_exits": "import os\nif os.fork() == 0:\n    os._exit(0)\nos.wait()\n" + GOOD,
    "detached_daemon": "import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(60)\n" + GOOD,
    "forged_results": "import os\nos.write(3, b'{\"t\":\"done\"}\\n')\nos._exit(0)\n",
    "garbage_results": "import os\nos.write(3, b'\\xff\\xfe{]\\n')\n" + GOOD,
    "output_flood": "while True:\n    print('y' * 4096)\n",
    "memory_bomb": "x = bytearray(10 ** 10)\n",
}
RARE_PROGRAMS = {  # each costs its limit in wall or CPU time: one in every 100 programs
    "sleeps_past_wall_limit": "import time\ntime.sleep(60)\n",
    "cpu_loop": "while True:\n    pass\n",
}


class CountingHandler:
    def __init__(self):
        self.calls = 0

    def handle(self, name, args, kwargs, line):
        self.calls += 1
        return self.calls


def make_jobs(start: int, count: int) -> tuple[list, list]:
    """Programs start .. start+count-1 of the fixed cycle: (judge jobs, API jobs)."""
    judge, api = [], []
    names = list(ASSERT_PROGRAMS)
    rare = list(RARE_PROGRAMS)
    for i in range(start, start + count):
        k = i % 100
        if k == 99:
            code = RARE_PROGRAMS[rare[(i // 100) % len(rare)]]
            judge.append(AssertJob(code, TESTS))
        elif k % 10 == 7:
            judge.append(FunctionCallJob(GOOD if k % 20 == 7 else "def f(x):\n    return -x\n", "f", [[1], [2]], expected=[2, 3]))
        elif k % 10 == 8:
            judge.append(StdioJob("print(int(input()) * 2)\n", [(f"{i}\n", f"{2 * i}\n")]))
        elif k % 10 == 9:
            api.append(ApiJob("def task_program():\n    for _ in range(3):\n        step()\n", ["step"], CountingHandler))
        else:
            judge.append(AssertJob(ASSERT_PROGRAMS[names[i % len(names)]], TESTS))
    return judge, api


def _proc_tree(root: int) -> list[int]:
    """root and all its descendants (zombies included)."""
    parent = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    parent[int(name)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    tree, frontier = [root], {root}
    while frontier:
        frontier = {pid for pid, ppid in parent.items() if ppid in frontier}
        tree.extend(sorted(frontier))
    return tree


def _count(path: str) -> int:
    try:
        return len(os.listdir(path))
    except OSError:
        return 0


def _rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def snapshot(pool: SandboxPool) -> dict:
    tree = _proc_tree(os.getpid())
    return {
        "programs": pool.stats["programs"],
        "fds": sum(_count(f"/proc/{pid}/fd") for pid in tree),
        "threads": sum(_count(f"/proc/{pid}/task") for pid in tree),
        "processes": len(tree),
        "rss_mb": round(sum(_rss_mb(pid) for pid in tree), 1),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--programs", type=int, default=100_000, help="programs to judge (default 100,000)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=200, help="programs per pool.run call")
    ap.add_argument("--report-every", type=int, default=10_000,
                    help="also print the counts every this many programs (a long run cut short still tells)")
    ap.add_argument("--json", default=None, help="also write the figures here (run_all's record format)")
    args = ap.parse_args(argv)
    if args.programs < 1000 or args.batch < 1 or 1000 % args.batch:
        ap.error("--programs must be >= 1000 and --batch must divide 1000 (the first snapshot is at 1,000)")

    from tqdm import tqdm

    limits = Limits(timeout_s=1.0, cpu_s=0.5, memory_mb=512)
    first = None
    outcomes: collections.Counter = collections.Counter()
    start = time.perf_counter()
    with SandboxPool(max_workers=args.workers, limits=limits) as pool:
        bar = tqdm(total=args.programs, desc="soak", unit="prog", dynamic_ncols=True)
        done = 0
        while done < args.programs:
            count = min(args.batch, args.programs - done)
            judge, api = make_jobs(done, count)
            outcomes.update(r.outcome for r in pool.run(judge))
            outcomes.update("api:" + r.outcome for r in pool.run_api(api))
            done += count
            bar.update(count)
            if done == 1000:
                first = snapshot(pool)
                bar.write(f"after {done:,}: {first}")
            elif args.report_every and done % args.report_every == 0:
                bar.write(f"after {done:,}: {snapshot(pool)}")
        bar.close()
        last = snapshot(pool)
        replaced = pool.stats["workers_replaced"]
        protections = pool.protections
    elapsed = time.perf_counter() - start

    keys = ("fds", "threads", "processes", "rss_mb")
    print(f"isolation: {protections['fork_path']}; workers: {args.workers}; programs: {done:,} "
          f"in {elapsed:.0f} s ({done / elapsed:.1f} programs/s); workers replaced: {replaced}")
    print("outcomes:", ", ".join(f"{k} {v:,}" for k, v in sorted(outcomes.items())))
    print(f"{'':>12} {'after 1,000':>12} {f'after {done:,}':>14} {'ratio':>7}")
    for key in keys:
        ratio = last[key] / first[key] if first[key] else float("nan")
        print(f"{key:>12} {first[key]:>12} {last[key]:>14} {ratio:>7.3f}")
    grew = [key for key in ("fds", "threads", "processes") if last[key] > first[key]]
    from densecode.eval.bench_records import emit, figure

    note = f"{done:,} programs, {args.workers} workers, {replaced} replaced; ratio = end / after 1,000"
    emit([figure(f"sandbox soak: {key} (pool + workers) after {done:,} programs", last[key], "count",
                 baseline="after 1,000 programs", baseline_value=first[key], note=note)
          for key in keys], args.json)
    if grew:
        print(f"FAIL: grew over the run: {', '.join(grew)}")
        return 1
    print("OK: no growth in fds, threads or processes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
