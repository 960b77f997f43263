"""SandboxPool: a bounded pool of fork-server workers and the scheduling of runs onto them.

The pool owns the workers' lifecycle (start, replace, stop) and hands each sandboxed run (a
`Unit`) to a free worker. What the runs are and what their results mean lives elsewhere:
`judges.py` plans and assembles AssertJob / FunctionCallJob / StdioJob, `api_bridge.py` relays
ApiJob calls to their handlers; `worker_proc.py` is the pool's side of one worker process.
"""

from __future__ import annotations

import collections
import json
import os
import selectors
import threading
import time

from densecode.sandbox.api_bridge import plan_api
from densecode.sandbox.jobs import (
    ApiJob,
    ApiRunResult,
    JudgeResult,
    Limits,
    SandboxError,
)
from densecode.sandbox.judges import JudgePlanner
from densecode.sandbox.runs import Unit, synthetic
from densecode.sandbox.worker_proc import (
    START_TIMEOUT_S,
    WorkerProc,
    await_hello,
    read_messages,
    send_message,
    spawn_worker,
    stop_worker,
)

__all__ = ["SandboxError", "SandboxPool"]

_MAX_SEND_FAILURES = 3  # a run handed to this many dead workers in a row is given up ("worker_died")


def _checked_preload(entry: str) -> str:
    if "," in entry or ("=" in entry and not entry.split("=", 1)[1].endswith(".py")):
        raise ValueError(f"SandboxPool preload {entry!r}: give a module name, or name=/path/to/file.py (no commas)")
    return entry


class SandboxPool:
    """Runs untrusted programs in isolated processes, `max_workers` at a time.

    Use as a context manager or call `close()`. Thread-safe: batches from
    different threads are served one after another.
    """

    ISOLATION_MODES = ("auto", "jail", "namespaces", "userns", "none")

    def __init__(self, max_workers: int | None = None, limits: Limits | None = None, preload: tuple[str, ...] = (),
                 isolation: str = "auto"):
        """`isolation`: auto picks the strongest mechanism that works here (see `protections`);
        the others force one (mainly for tests). `preload`: modules workers import once (e.g. "numpy"), or
        "name=/path/file.py" to load a file as module `name` (see `require_preload`)."""
        if isolation not in self.ISOLATION_MODES:
            raise ValueError(f"SandboxPool(isolation={isolation!r}): choose one of {', '.join(self.ISOLATION_MODES)}")
        self.isolation = isolation
        self.max_workers = max(1, int(max_workers or os.cpu_count() or 1))
        self.limits = limits or Limits()
        self.preload = tuple(_checked_preload(p) for p in preload)
        self._workers: list[WorkerProc | None] = [None] * self.max_workers
        self._lock = threading.RLock()
        self._next_uid = 0
        self._closed = False
        self._owner_pid = os.getpid()  # a forked copy of this object must never drive (or kill) these workers
        self._judges = JudgePlanner(self._unit, lambda: self.limits.timeout_s)
        self.stats = {"workers_started": 0, "workers_replaced": 0, "programs": 0}
        # When run as root, programs run as uid uid_base + slot: a range unique to this process, so that
        # RLIMIT_NPROC (counted per uid) is never shared with another pool on the machine.
        self.uid_base = 200000 + (os.getpid() % 100000) * 256

    # ------------------------------------------------------------ public API

    def run(self, jobs: list, deadline_s: float | None = None, progress: bool = False) -> list[JudgeResult]:
        """Judge a batch of AssertJob / FunctionCallJob / StdioJob; one JudgeResult per job, in order."""
        with self._lock:
            plans = [self._judges.plan(job) for job in jobs]
            self._execute([u for plan in plans for u in plan.units], deadline_s, progress, desc="sandbox")
            return [plan.assemble() for plan in plans]

    def run_api(self, jobs: list[ApiJob], deadline_s: float | None = None, progress: bool = False) -> list[ApiRunResult]:
        """Run programs that call back into parent-side handlers (RoboSim, gymnasium simulators)."""
        with self._lock:
            runs = [plan_api(job, self._unit) for job in jobs]
            self._execute([unit for _, unit in runs], deadline_s, progress, desc="sandbox-api")
            results = [run.assemble(unit.result, unit.killed_by_parent) for run, unit in runs]
            for run, _ in runs:
                if run.handler_exception is not None:
                    raise run.handler_exception
            return results

    def require_preload(self, *entries: str) -> None:
        """Make the workers hold these modules before they fork any program (entries as in `preload`).

        A judge whose harness is a Python file calls this once with "name=/path/harness.py"; its programs are then
        `import name; name.main(...)` (no harness to compile per program). Workers already running are restarted
        (they are jailed, and the file is outside their root); a file that fails to load fails the worker's start.
        Each program still runs in its own forked process: it sees a private copy-on-write copy of the module.
        """
        with self._lock:
            new = tuple(_checked_preload(e) for e in entries if e not in self.preload)
            if not new:
                return
            if os.getpid() != self._owner_pid:  # a forked copy must never stop the parent's workers
                raise SandboxError("this SandboxPool was created in another process (before a fork); "
                                   "create a new pool in this process, or use get_default_pool()")
            self.preload += new
            for slot, w in enumerate(self._workers):
                if w is not None:  # not a failure: not counted in stats["workers_replaced"]
                    stop_worker(w)
                    self._workers[slot] = None

    def cpu_times(self) -> dict[str, float]:
        """CPU seconds used so far by the live workers ("workers_s") and by the programs they ran and reaped
        ("programs_s"), from /proc (Linux). For benchmarks: a replaced worker's seconds are no longer counted."""
        tick = os.sysconf("SC_CLK_TCK")
        workers_s = programs_s = 0.0
        with self._lock:
            pids = [w.popen.pid for w in self._workers if w is not None]
        for pid in pids:
            try:
                with open(f"/proc/{pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            utime, stime, cutime, cstime = (int(x) / tick for x in fields[11:15])
            workers_s += utime + stime
            programs_s += cutime + cstime
        return {"workers_s": workers_s, "programs_s": programs_s}

    @property
    def protections(self) -> dict:
        """Which isolation mechanisms are active on this machine (probed by the first worker)."""
        with self._lock:
            self._ensure_workers([0])
            return dict(self._workers[0].protections)

    # ------------------------------------------------------------ lifecycle

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self) -> None:
        if os.getpid() != self._owner_pid:
            return  # we are a forked copy: the workers belong to the parent process
        with self._lock:
            self._closed = True
            for i, w in enumerate(self._workers):
                if w is not None:
                    stop_worker(w)
                    self._workers[i] = None

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001, S110 - interpreter shutdown: nothing left to report to
            pass

    def _ensure_workers(self, slots) -> None:
        """Make every given slot hold a live worker; dead ones are replaced, missing ones started, all at once."""
        if self._closed:
            raise SandboxError("SandboxPool is closed")
        if os.getpid() != self._owner_pid:
            raise SandboxError("this SandboxPool was created in another process (before a fork); "
                               "create a new pool in this process, or use get_default_pool()")
        missing = []
        for slot in slots:
            w = self._workers[slot]
            if w is not None and w.popen.poll() is None:
                continue
            if w is not None:
                stop_worker(w)
                self._workers[slot] = None
                self.stats["workers_replaced"] += 1
            missing.append(slot)
        if missing:
            self._start_workers(missing)

    def _start_workers(self, slots: list[int]) -> None:
        """Start the given slots' workers concurrently and wait until every one of them is up.

        A worker probes its isolation at start-up by running a probe program under the slot's uid.
        Starting all the workers a batch needs before the batch's first program runs means no
        start-up probe ever runs beside a real program (and start-up costs one probe time, not one
        per worker).
        """
        spawned = [spawn_worker(slot, self.uid_base + slot % 256, self.preload, self.isolation) for slot in slots]
        deadline = time.monotonic() + START_TIMEOUT_S
        try:
            for w in spawned:
                await_hello(w, deadline)
                self._workers[w.slot] = w
                self.stats["workers_started"] += 1
        except BaseException:
            for w in spawned:
                if self._workers[w.slot] is not w:
                    stop_worker(w)
            raise

    def _replace(self, slot: int) -> None:
        """Stop the slot's worker; the next run for this slot starts a fresh one."""
        w = self._workers[slot]
        if w is not None:
            stop_worker(w)
            self._workers[slot] = None
            self.stats["workers_replaced"] += 1

    # ------------------------------------------------------------ scheduling

    def _unit(self, payload: dict, timeout_s: float | None, stdin: str | None = None, on_record=None) -> Unit:
        self._next_uid += 1
        return Unit(self._next_uid, payload, self.limits.as_dict(timeout_s), stdin, on_record)

    def _send_worker(self, w: WorkerProc, msg: dict) -> bool:
        return send_message(w, msg)

    def _execute(self, units: list[Unit], deadline_s: float | None, progress: bool, desc: str) -> None:
        """Run every unit; each gets `unit.result` (a worker 'done' dict or a synthetic one)."""
        if not units:
            return
        bar = None
        if progress:
            from tqdm import tqdm

            bar = tqdm(total=len(units), desc=desc, unit="prog", dynamic_ncols=True)
        queue = collections.deque(units)
        deadline = None if deadline_s is None else time.monotonic() + deadline_s
        busy: dict[int, WorkerProc] = {}
        self._ensure_workers(range(min(len(units), self.max_workers)))
        sel = selectors.DefaultSelector()
        try:
            while queue or busy:
                if deadline is not None and time.monotonic() >= deadline:
                    self._expire(queue, busy, bar)
                self._dispatch(queue, busy, sel, bar)
                timeout = 1.0 if deadline is None else max(0.0, min(1.0, deadline - time.monotonic()))
                for key, _ in sel.select(timeout=timeout):
                    slot = key.data
                    w = busy[slot]
                    finished = self._pump(w)
                    if finished:
                        sel.unregister(w.from_worker)
                        del busy[slot]
                        w.unit = None
                        self.stats["programs"] += 1
                        if bar:
                            bar.update(1)
                        if w.popen.poll() is not None or finished == "died":
                            self._replace(slot)
        finally:
            sel.close()
            if bar:
                bar.close()
            # Anything still busy after an exception: kill those workers so no program keeps running.
            for slot, w in list(busy.items()):
                if w.unit is not None and w.unit.result is None:
                    w.unit.result = synthetic("worker_died", "batch aborted")
                self._replace(slot)

    def _dispatch(self, queue: collections.deque, busy: dict, sel: selectors.BaseSelector, bar) -> None:
        """Hand queued units to idle workers (starting a fresh worker for a slot whose worker died)."""
        for slot in range(self.max_workers):
            if not queue:
                return
            if slot in busy:
                continue
            self._ensure_workers([slot])
            w = self._workers[slot]
            u = queue.popleft()
            msg = {"op": "run", "id": u.uid, "payload": u.payload, "limits": u.limits}
            if u.stdin is not None:
                msg["stdin"] = u.stdin
            if not self._send_worker(w, msg):
                # The worker died while idle: the program never started, so it goes to a fresh worker.
                self._replace(slot)
                u.send_failures += 1
                if u.send_failures < _MAX_SEND_FAILURES:
                    queue.appendleft(u)
                    continue
                u.result = synthetic("worker_died", "sandbox workers kept dying before the program started")
                if bar:
                    bar.update(1)
                continue
            w.unit = u
            busy[slot] = w
            sel.register(w.from_worker, selectors.EVENT_READ, slot)

    def _expire(self, queue: collections.deque, busy: dict, bar) -> None:
        """The batch deadline passed: queued units get a synthetic result, running ones are killed."""
        while queue:
            u = queue.popleft()
            u.result = synthetic("deadline", "batch deadline passed before this program started")
            if bar:
                bar.update(1)
        for w in busy.values():
            if w.unit.killed_by_parent is None:
                w.unit.killed_by_parent = "deadline"
                self._send_worker(w, {"op": "kill", "id": w.unit.uid, "reason": "deadline"})

    def _pump(self, w: WorkerProc) -> str | None:
        """Read what a busy worker sent; returns 'done' / 'died' when its unit finished."""
        u = w.unit
        messages = read_messages(w)
        if messages is None:
            u.result = synthetic("worker_died", "sandbox worker died while running this program")
            return "died"
        for msg in messages:
            if msg.get("op") == "rec":
                self._relay(w, u, msg["data"])
            elif msg.get("op") == "done":
                u.result = msg
                return "done"
        return None

    def _relay(self, w: WorkerProc, u: Unit, line: str) -> None:
        """An API run's record: its handler decides the reply, or to end the run."""
        if u.on_record is None or u.killed_by_parent is not None:
            return
        action = u.on_record(line)
        if isinstance(action, tuple) and action[0] == "kill":
            u.killed_by_parent = action[1]
            self._send_worker(w, {"op": "kill", "id": u.uid, "reason": action[1]})
        elif action is not None:
            self._send_worker(w, {"op": "reply", "id": u.uid, "data": json.dumps(action, separators=(",", ":"))})
