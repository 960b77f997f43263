"""RoboSim throughput: programs judged per second, and where the time goes.

Judges the reference programs of N generated tasks (default 500) in every
world of their task, two ways, side by side:

- baseline: the trusted in-process driver (the programs are densecode's own
  references, so running them unsandboxed is safe here): simulator cost only;
- densecode: the shipped path, each run in the sandbox with the API bridged
  call by call to RoboSimEnv.step in this process.

It prints runs/s for both, the ratio, and the share of the sandboxed runs' time
spent in the simulator (handler) vs the sandbox (process start, IPC, the
program itself). Also checks that every reference succeeds.

    .venv/bin/python -m benchmarks.speed.robosim_throughput --tasks 500
    .venv/bin/python -m benchmarks.speed.robosim_throughput --tasks 100   # quick size (what run_all passes in quick mode)

Machine-readable figures (benchmarks/run_all.py convention) go to --json PATH or
$DENSECODE_BENCH_JSON when either is set.
"""

from __future__ import annotations

import argparse
import collections
import os
import time

from densecode_robosim.checks import judge
from densecode.simulators.robosim import run_programs, world_runs
from densecode_robosim.tasks import generate_tasks
from densecode_robosim.world import API_NAMES, RobotError, World
from tqdm import tqdm


class _Budget(Exception):
    pass


def run_in_process(program: str, world: dict, max_calls: int) -> tuple[str, World]:
    """Trusted baseline driver: exec a reference with the API bound to a World."""
    w = World.from_dict(world)
    calls = [0]

    def bind(name):
        def call(*args, **kwargs):
            calls[0] += 1
            if calls[0] > max_calls:
                raise _Budget()
            return w.call(name, args, kwargs)

        return call

    namespace = {name: bind(name) for name in API_NAMES}
    exec(compile(program, "<reference>", "exec"), namespace)  # noqa: S102 (densecode's own reference programs)
    try:
        namespace["task_program"]()
        return "ok", w
    except _Budget:
        return "call_limit", w
    except RobotError:
        return "robot_error", w


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=500)
    parser.add_argument("--split", default="train")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-calls", type=int, default=200, help="robot calls per run (the shipped default)")
    parser.add_argument("--timeout", type=float, default=1.0, help="per-run wall limit in the sandbox (s)")
    parser.add_argument("--json", default=None, help="also write machine-readable figures here (run_all convention)")
    args = parser.parse_args()

    tasks = generate_tasks(args.split, n=args.tasks, seed=args.seed)
    jobs = [(t.program, run) for t in tasks for run in world_runs(t.to_dict())]
    print(f"{len(tasks)} tasks, {len(jobs)} (program, world) runs, "
          f"{sum(r.timeout for _, r in jobs)} of them in 'keep checking' worlds that run to the call limit")

    start = time.perf_counter()
    base_ok = 0
    for program, run in tqdm(jobs, desc="baseline (in-process)", unit="run"):
        status, world = run_in_process(program, run.world, args.max_calls)
        verdicts = judge(run.checks, world.trace, world, world.start)
        base_ok += status == ("call_limit" if run.timeout else "ok") and all(ok for _, ok in verdicts)
    base_s = time.perf_counter() - start

    from densecode.sandbox import get_default_pool

    pool = get_default_pool()
    run_programs(jobs[:4], pool=pool)  # start the pool's workers outside the timing
    start = time.perf_counter()
    results = run_programs(jobs, pool=pool, timeout_s=args.timeout, max_calls=args.max_calls, progress=True)
    sand_s = time.perf_counter() - start
    outcomes = collections.Counter(r.outcome for r in results)
    run_s = sum(r.duration_s for r in results)
    sim_s = sum(r.sim_s for r in results)
    calls = sum(r.n_calls for r in results)

    print()
    print(f"workers: {pool.max_workers} on {os.cpu_count()} CPUs; robot API calls bridged: {calls}")
    print(f"{'path':<34}{'wall s':>9}{'runs/s':>10}{'ratio':>8}  references passing")
    print(f"{'baseline: in-process, no sandbox':<34}{base_s:>9.2f}{len(jobs) / base_s:>10.1f}{1.0:>8.2f}  "
          f"{base_ok}/{len(jobs)}")
    print(f"{'densecode: sandbox + API bridge':<34}{sand_s:>9.2f}{len(jobs) / sand_s:>10.1f}"
          f"{(len(jobs) / sand_s) / (len(jobs) / base_s):>8.3f}  {outcomes['success']}/{len(jobs)}")
    print(f"sandboxed run time (summed over runs): {run_s:.2f} s; in the simulator (handler): {sim_s:.2f} s "
          f"= {100 * sim_s / run_s:.1f}%; sandbox (process, IPC, program): {100 * (run_s - sim_s) / run_s:.1f}%")
    print(f"per bridged API call: {1e6 * run_s / max(calls, 1):.0f} us of run time, "
          f"{1e6 * sim_s / max(calls, 1):.0f} us in the simulator")
    # where the sandbox time goes: a run with no calls vs one with 100 calls
    from densecode.simulators.robosim import WorldRun

    probe = WorldRun({"rooms": ["a", "b"], "robot": "a"})
    costs = {}
    for n_calls in (0, 100):
        body = "    pass\n" if n_calls == 0 else f"    for _ in range({n_calls}):\n        is_in_room(\"x\")\n"
        res = run_programs([("def task_program():\n" + body, probe)] * 40, pool=pool, max_calls=1000)
        costs[n_calls] = sum(r.duration_s for r in res) / len(res)
    print(f"sandbox cost: {1e3 * costs[0]:.1f} ms per run without calls, "
          f"{1e3 * (costs[100] - costs[0]) / 100:.2f} ms per bridged call")
    if outcomes["success"] != len(jobs):
        print(f"WARNING: not every reference succeeded: {dict(outcomes)}")

    from densecode.eval.bench_records import emit, figure

    emit([
        figure(f"runs/s, RoboSim reference programs in the sandbox ({len(tasks)} tasks, {len(jobs)} runs)",
               len(jobs) / sand_s, "runs/s", baseline="in-process driver, no sandbox",
               baseline_value=len(jobs) / base_s,
               note=f"run time: simulator {100 * sim_s / run_s:.0f}%, sandbox {100 * (run_s - sim_s) / run_s:.0f}%; "
                    f"references passing {outcomes['success']}/{len(jobs)} (baseline {base_ok}/{len(jobs)}); "
                    f"{pool.max_workers} workers"),
        figure("sandbox cost per bridged robot API call", 1e3 * (costs[100] - costs[0]) / 100, "ms/call",
               note=f"{1e3 * costs[0]:.1f} ms per run without calls"),
    ], args.json)


if __name__ == "__main__":
    main()
