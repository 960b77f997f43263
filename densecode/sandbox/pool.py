"""SandboxPool: bounded pool of fork-server workers, judges and the API bridge.

Each worker is a fresh small interpreter (not a fork of the trainer, which holds
torch and threads) that forks one isolated child per program. The pool sends
JSON jobs, receives JSON results, and decides every verdict here, in the parent,
on plain data the child cannot fake (see `asserts.py`, `plain.py`).
"""

from __future__ import annotations

import atexit
import collections
import hashlib
import json
import os
import selectors
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

from densecode.sandbox import asserts as _asserts
from densecode.sandbox.compare import compare_stdout, outputs_match
from densecode.sandbox.jobs import (
    ApiError,
    ApiJob,
    ApiRunResult,
    AssertJob,
    FunctionCallJob,
    JudgeResult,
    Limits,
    StdioJob,
)
from densecode.sandbox.plain import EncodeError, decode, encode, to_json_value

_PKG_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_BOOT = f"import sys; sys.path.insert(0, {_PKG_ROOT!r}); from densecode.sandbox._worker import main; main()"
_WORKER_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "PYTHONDONTWRITEBYTECODE": "1",
}
_MAX_SEND_FAILURES = 3
_SEVERITY = {"passed": 0, "wrong_answer": 1, "runtime_error": 2, "memory": 3, "timeout": 3, "output_limit": 3, "sandbox_violation": 4}


class SandboxError(RuntimeError):
    """The sandbox itself could not run (workers fail to start): an infrastructure problem, not a verdict."""


@dataclass
class _Unit:
    """One sandboxed process run."""

    uid: int
    payload: dict
    limits: dict
    stdin: str | None = None
    on_record: object = None  # API runs: callable(record_dict) -> reply dict | ("kill", reason) | None
    result: dict | None = None
    killed_by_parent: str | None = None
    send_failures: int = 0  # workers found dead when this unit was handed to them


@dataclass
class _WorkerProc:
    slot: int
    popen: subprocess.Popen
    to_worker: int
    from_worker: int
    buf: bytearray = field(default_factory=bytearray)
    protections: dict = field(default_factory=dict)
    unit: _Unit | None = None


def _decode_status(status: int | None) -> tuple[str | None, str | None]:
    """waitpid status of the child -> (signal name or None, exit code text or None)."""
    if status is None or status < 0:
        return None, None
    if os.WIFSIGNALED(status):
        return signal.Signals(os.WTERMSIG(status)).name, None
    if os.WIFEXITED(status):
        return None, str(os.WEXITSTATUS(status))
    return None, None


class SandboxPool:
    """Runs untrusted programs in isolated processes, `max_workers` at a time.

    Use as a context manager or call `close()`. Thread-safe: batches from
    different threads are served one after another.
    """

    ISOLATION_MODES = ("auto", "jail", "namespaces", "userns", "none")

    def __init__(self, max_workers: int | None = None, limits: Limits | None = None, preload: tuple[str, ...] = (),
                 isolation: str = "auto"):
        """`isolation`: auto picks the strongest mechanism that works here (see `protections`);
        the others force one (mainly for tests). `preload`: modules workers import once (e.g. "numpy")."""
        if isolation not in self.ISOLATION_MODES:
            raise ValueError(f"SandboxPool(isolation={isolation!r}): choose one of {', '.join(self.ISOLATION_MODES)}")
        self.isolation = isolation
        self.max_workers = max(1, int(max_workers or os.cpu_count() or 1))
        self.limits = limits or Limits()
        self.preload = tuple(preload)
        self._workers: list[_WorkerProc | None] = [None] * self.max_workers
        self._lock = threading.RLock()
        self._next_uid = 0
        self._closed = False
        self._owner_pid = os.getpid()  # a forked copy of this object must never drive (or kill) these workers
        self._reference_cache: collections.OrderedDict = collections.OrderedDict()
        self.stats = {"workers_started": 0, "workers_replaced": 0, "programs": 0}
        # When run as root, programs run as uid uid_base + slot: a range unique to this process, so that
        # RLIMIT_NPROC (counted per uid) is never shared with another pool on the machine.
        self.uid_base = 200000 + (os.getpid() % 100000) * 256

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
                    self._stop_worker(w)
                    self._workers[i] = None

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001
            pass

    @property
    def protections(self) -> dict:
        """Which isolation mechanisms are active on this machine (probed by the first worker)."""
        with self._lock:
            w = self._worker(0)
            return dict(w.protections)

    def _spawn_worker(self, slot: int) -> _WorkerProc:
        """Launch a worker process; it is not usable until `_await_hello` has read its start-up message."""
        p2w_r, p2w_w = os.pipe()
        w2p_r, w2p_w = os.pipe()
        debug = os.environ.get("DENSECODE_SANDBOX_DEBUG") == "1"
        popen = subprocess.Popen(
            [sys.executable, "-I", "-c", _BOOT, str(p2w_r), str(w2p_w), str(slot), str(self.uid_base + slot % 256),
             ",".join(self.preload), self.isolation],
            pass_fds=(p2w_r, w2p_w),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=None if debug else subprocess.DEVNULL,
            env=_WORKER_ENV,
            close_fds=True,
        )
        os.close(p2w_r)
        os.close(w2p_w)
        return _WorkerProc(slot, popen, p2w_w, w2p_r)

    def _await_hello(self, w: _WorkerProc, deadline: float) -> None:
        """Wait for a spawned worker's start-up message (it has probed and set up its isolation by then)."""
        hello = self._read_message(w, timeout=max(0.0, deadline - time.monotonic()))
        if hello is None or hello.get("op") != "hello":
            self._stop_worker(w)
            raise SandboxError(
                "sandbox worker failed to start; rerun with DENSECODE_SANDBOX_DEBUG=1 to see its stderr"
            )
        w.protections = hello["protections"]
        os.set_blocking(w.from_worker, False)
        self.stats["workers_started"] += 1

    def _start_workers(self, slots: list[int]) -> None:
        """Start the given slots' workers concurrently and wait until every one of them is up.

        A worker probes its isolation at start-up by running a probe program under the slot's uid.
        Starting all the workers a batch needs before the batch's first program runs means no
        start-up probe ever runs beside a real program (and start-up costs one probe time, not one
        per worker).
        """
        spawned = [self._spawn_worker(slot) for slot in slots]
        deadline = time.monotonic() + 60.0
        try:
            for w in spawned:
                self._await_hello(w, deadline)
                self._workers[w.slot] = w
        except BaseException:
            for w in spawned:
                if self._workers[w.slot] is not w:
                    self._stop_worker(w)
            raise

    def _read_message(self, w: _WorkerProc, timeout: float) -> dict | None:
        """Blocking read of one line from a worker (used only at start-up)."""
        deadline = time.monotonic() + timeout
        while b"\n" not in w.buf:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            sel = selectors.DefaultSelector()
            sel.register(w.from_worker, selectors.EVENT_READ)
            ready = sel.select(timeout=remaining)
            sel.close()
            if not ready:
                return None
            chunk = os.read(w.from_worker, 1 << 16)
            if not chunk:
                return None
            w.buf += chunk
        line, rest = bytes(w.buf).split(b"\n", 1)
        w.buf = bytearray(rest)
        return json.loads(line)

    @staticmethod
    def _stop_worker(w: _WorkerProc) -> None:
        for fd in (w.to_worker, w.from_worker):
            try:
                os.close(fd)
            except OSError:
                pass
        try:
            w.popen.kill()
        except OSError:
            pass
        try:
            w.popen.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass

    def _worker(self, slot: int) -> _WorkerProc:
        self._ensure_workers([slot])
        return self._workers[slot]

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
                self._stop_worker(w)
                self._workers[slot] = None
                self.stats["workers_replaced"] += 1
            missing.append(slot)
        if missing:
            self._start_workers(missing)

    # ------------------------------------------------------------ scheduling

    def _execute(self, units: list[_Unit], deadline_s: float | None, progress: bool, desc: str) -> None:
        """Run every unit; each gets `unit.result` (a worker 'done' dict or a synthetic one)."""
        if not units:
            return
        bar = None
        if progress:
            from tqdm import tqdm

            bar = tqdm(total=len(units), desc=desc, unit="prog", dynamic_ncols=True)
        queue = collections.deque(units)
        deadline = None if deadline_s is None else time.monotonic() + deadline_s
        busy: dict[int, _WorkerProc] = {}
        self._ensure_workers(range(min(len(units), self.max_workers)))
        sel = selectors.DefaultSelector()
        try:
            while queue or busy:
                now = time.monotonic()
                if deadline is not None and now >= deadline:
                    while queue:
                        u = queue.popleft()
                        u.result = _synthetic("deadline", "batch deadline passed before this program started")
                        if bar:
                            bar.update(1)
                    for w in busy.values():
                        if w.unit.killed_by_parent is None:
                            w.unit.killed_by_parent = "deadline"
                            self._send_worker(w, {"op": "kill", "id": w.unit.uid, "reason": "deadline"})
                for slot in range(self.max_workers):
                    if not queue:
                        break
                    if slot in busy:
                        continue
                    w = self._worker(slot)
                    u = queue.popleft()
                    w.unit = u
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
                        u.result = _synthetic("worker_died", "sandbox workers kept dying before the program started")
                        if bar:
                            bar.update(1)
                        continue
                    busy[slot] = w
                    sel.register(w.from_worker, selectors.EVENT_READ, slot)
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
                    w.unit.result = _synthetic("worker_died", "batch aborted")
                self._replace(slot)

    def _replace(self, slot: int) -> None:
        w = self._workers[slot]
        if w is not None:
            self._stop_worker(w)
            self._workers[slot] = None
            self.stats["workers_replaced"] += 1

    def _send_worker(self, w: _WorkerProc, msg: dict) -> bool:
        data = (json.dumps(msg, separators=(",", ":")) + "\n").encode()
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(w.to_worker, view):]
        except OSError:
            return False
        return True

    def _pump(self, w: _WorkerProc) -> str | None:
        """Read what a busy worker sent; returns 'done' / 'died' when its unit finished."""
        u = w.unit
        try:
            chunk = os.read(w.from_worker, 1 << 20)
        except BlockingIOError:
            return None
        except OSError:
            chunk = b""
        if not chunk:
            u.result = _synthetic("worker_died", "sandbox worker died while running this program")
            return "died"
        w.buf += chunk
        if b"\n" not in chunk:
            return None  # a large message still arriving
        *lines, rest = bytes(w.buf).split(b"\n")
        w.buf = bytearray(rest)
        for line in lines:
            msg = json.loads(line)  # the worker's own framing: trusted structure, child text inside strings
            if msg.get("op") == "rec":
                if u.on_record is not None and u.killed_by_parent is None:
                    action = u.on_record(msg["data"])
                    if isinstance(action, tuple) and action[0] == "kill":
                        u.killed_by_parent = action[1]
                        self._send_worker(w, {"op": "kill", "id": u.uid, "reason": action[1]})
                    elif action is not None:
                        self._send_worker(w, {"op": "reply", "id": u.uid, "data": json.dumps(action, separators=(",", ":"))})
            elif msg.get("op") == "done":
                u.result = msg
                return "done"
        return None

    def _unit(self, payload: dict, timeout_s: float | None, stdin: str | None = None, on_record=None) -> _Unit:
        self._next_uid += 1
        return _Unit(self._next_uid, payload, self.limits.as_dict(timeout_s), stdin, on_record)

    # ------------------------------------------------------------ judges

    def run(self, jobs: list, deadline_s: float | None = None, progress: bool = False) -> list[JudgeResult]:
        """Judge a batch of AssertJob / FunctionCallJob / StdioJob; one JudgeResult per job, in order."""
        with self._lock:
            plans = []
            units: list[_Unit] = []
            for job in jobs:
                if isinstance(job, AssertJob):
                    plan = self._plan_assert(job)
                elif isinstance(job, FunctionCallJob):
                    plan = self._plan_call(job)
                elif isinstance(job, StdioJob):
                    plan = self._plan_stdio(job)
                else:
                    raise TypeError(f"SandboxPool.run: unsupported job type {type(job).__name__}; use run_api for ApiJob")
                plans.append(plan)
                units.extend(plan["units"])
            self._execute(units, deadline_s, progress, desc="sandbox")
            return [plan["assemble"]() for plan in plans]

    def _plan_assert(self, job: AssertJob) -> dict:
        # Names the program binds (e.g. its own `sum`) are the program's in the tests, as in plain Python.
        shadowed = _asserts.bound_names(job.setup, job.code)
        tests = [_asserts.split_test(t, shadowed) for t in job.tests]
        probes = [t.probes if t.error is None else [] for t in tests]
        unit = self._unit({"mode": "assert", "setup": job.setup, "code": job.code, "probes": probes}, job.timeout_s)
        return {"units": [unit], "assemble": lambda: _assemble_assert(tests, unit.result)}

    def _plan_call(self, job: FunctionCallJob) -> dict:
        inputs = [encode(list(args)) for args in job.inputs]
        if '"$o"' in json.dumps(inputs):
            raise ValueError(f"FunctionCallJob({job.entry_point!r}): inputs must be plain data "
                             "(str/int/float/bool/None/bytes/complex and list/tuple/set/dict of them)")
        unit = self._unit({"mode": "call", "code": job.code, "entry_point": job.entry_point, "inputs": inputs}, job.timeout_s)
        units = [unit]
        ref_unit = None
        key = None
        if job.expected is None:
            if job.reference is None:
                raise ValueError("FunctionCallJob needs `expected` outputs or a `reference` solution")
            key = hashlib.sha256(json.dumps([job.reference, job.entry_point, inputs]).encode()).hexdigest()
            if key not in self._reference_cache:
                # The reference runs in its own sandbox: the candidate never shares a process with expected values.
                ref_unit = self._unit(
                    {"mode": "call", "code": job.reference, "entry_point": job.entry_point, "inputs": inputs},
                    max(job.timeout_s or self.limits.timeout_s, 10.0),
                )
                units.append(ref_unit)

        def assemble():
            if job.expected is not None:
                expected = [("ok", e) for e in job.expected]
            else:
                if ref_unit is not None:
                    self._reference_cache[key] = _call_outputs(ref_unit.result, len(inputs))
                    while len(self._reference_cache) > 4096:
                        self._reference_cache.popitem(last=False)
                expected = self._reference_cache[key]
            return _assemble_call(job, expected, unit.result)

        return {"units": units, "assemble": assemble}

    def _plan_stdio(self, job: StdioJob) -> dict:
        units = [self._unit({"mode": "stdio", "code": job.code}, job.timeout_s, stdin=stdin) for stdin, _ in job.cases]
        return {"units": units, "assemble": lambda: _assemble_stdio(job, [u.result for u in units])}

    # ------------------------------------------------------------ API bridge

    def run_api(self, jobs: list[ApiJob], deadline_s: float | None = None, progress: bool = False) -> list[ApiRunResult]:
        """Run programs that call back into parent-side handlers (RoboSim, gymnasium simulators)."""
        with self._lock:
            states = []
            units = []
            for job in jobs:
                state = _ApiState(job, job.handler_factory())
                unit = self._unit(
                    {"mode": "api", "code": job.code, "call": job.call, "api_names": list(job.api_names)},
                    job.timeout_s,
                    on_record=state.on_record,
                )
                states.append((state, unit))
                units.append(unit)
            self._execute(units, deadline_s, progress, desc="sandbox-api")
            results = [state.assemble(unit.result, unit.killed_by_parent) for state, unit in states]
            for state, _ in states:
                if state.handler_exception is not None:
                    raise state.handler_exception
            return results


# ------------------------------------------------------------------ result assembly


def _synthetic(reason: str, message: str) -> dict:
    return {"op": "done", "status": None, "setup_error": None, "killed": reason, "records": [], "stdout": "",
            "stderr": "", "duration_s": 0.0, "message": message}


def _parse_records(result: dict) -> tuple[list[dict], bool]:
    """Child lines -> dicts; returns (records, protocol_violation)."""
    out, bad = [], False
    for line in result.get("records", []):
        try:
            rec = json.loads(line)
        except (ValueError, RecursionError):
            bad = True
            continue
        if not isinstance(rec, dict) or not isinstance(rec.get("t"), str):
            bad = True
            continue
        out.append(rec)
    return out, bad


def _base_outcome(result: dict) -> tuple[str | None, dict]:
    """Outcome decided by how the process ended (before looking at test values)."""
    info: dict = {}
    if isinstance(result.get("cpu_s"), (int, float)):
        info["cpu_s"] = round(float(result["cpu_s"]), 4)
    killed = result.get("killed")
    sig, code = _decode_status(result.get("status"))
    if sig:
        info["signal"] = sig
    if result.get("setup_error"):
        info["setup_error"] = result["setup_error"]
        return "sandbox_violation", info
    if killed in ("timeout", "deadline", "cpu_limit"):
        if killed == "deadline":
            info["deadline"] = True
        if killed == "cpu_limit":
            info["cpu_limit"] = True
        return "timeout", info
    if killed == "output_limit":
        return "output_limit", info
    if killed == "worker_died":
        info["message"] = result.get("message")
        return "sandbox_violation", info
    if sig == "SIGXCPU" or (sig == "SIGKILL" and killed is None and _reached_cpu_limit(result)):
        info["cpu_limit"] = True
        return "timeout", info  # the RLIMIT_CPU backstop (soft = hard): the kernel's SIGKILL
    if code == "70":
        info["setup_error"] = "sandbox child failed before running the program"
        return "sandbox_violation", info
    return None, info


def _reached_cpu_limit(result: dict) -> bool:
    """The program used its whole CPU limit (so the RLIMIT_CPU backstop, not something else, SIGKILLed it)."""
    cpu, limit = result.get("cpu_s"), result.get("cpu_limit_s")
    if not isinstance(cpu, (int, float)) or not isinstance(limit, (int, float)):
        return False  # not shown to be the CPU limit
    return cpu >= limit - 0.05  # rusage vs the kernel's own accounting: a scheduler tick of slack


def _first_error(records: list[dict], kinds: tuple[str, ...]) -> dict | None:
    for rec in records:
        if rec["t"] in kinds:
            return rec
    return None


def _error_fields(err: dict | None) -> dict:
    if not err:
        return {"exc_type": None, "exc_message": None, "error_line": None}
    line = err.get("line")
    return {
        "exc_type": str(err.get("exc_type"))[:200],
        "exc_message": str(err.get("exc_message"))[:2000],
        "error_line": line if isinstance(line, int) and not isinstance(line, bool) else None,
    }


def _finish(outcome_hint: str | None, per_test: list[bool], err: dict | None, result: dict, details: dict,
            done: bool, violation: bool) -> JudgeResult:
    fields = _error_fields(err)
    if outcome_hint is not None:
        outcome = outcome_hint
    elif violation:
        outcome = "sandbox_violation"
    elif fields["exc_type"] == "MemoryError":
        outcome = "memory"
    elif not done:
        outcome = "runtime_error"
        if fields["exc_type"] is None:
            sig, code = _decode_status(result.get("status"))
            fields.update(exc_type="EarlyExit", exc_message=f"program ended before the tests finished ({sig or 'exit ' + str(code)})")
    elif per_test and all(per_test):
        outcome = "passed"
    elif err is not None:
        outcome = "runtime_error"
    else:
        outcome = "wrong_answer"
    if outcome == "passed" and not per_test:
        outcome = "wrong_answer"  # no test ran: nothing was shown to be correct
    return JudgeResult(
        outcome=outcome,
        per_test=per_test,
        n_passed=sum(per_test),
        n_tests=len(per_test),
        stdout=result.get("stdout", ""),
        stderr=result.get("stderr", ""),
        duration_s=float(result.get("duration_s", 0.0)),
        details=details,
        **fields,
    )


def _assemble_assert(tests: list, result: dict) -> JudgeResult:
    records, violation = _parse_records(result)
    hint, details = _base_outcome(result)
    values: dict[tuple, object] = {}
    errors: dict[int, dict] = {}
    for rec in records:
        i, j = rec.get("i"), rec.get("j")
        if rec["t"] == "probe" and (i, j) not in values and (i, j) not in errors:
            try:
                values[(i, j)] = decode(rec.get("v"))
            except (EncodeError, TypeError, ValueError, RecursionError, KeyError, IndexError):
                violation = True
        elif rec["t"] == "probe_error" and isinstance(i, int):
            errors.setdefault(i, rec)
    per_test = []
    test_errors = {}
    for i, test in enumerate(tests):
        if test.error is not None or i in errors:
            per_test.append(False)
            if test.error is not None:
                test_errors[i] = test.error
            continue
        if isinstance(test.probes, str):
            per_test.append((i, 0) in values)
            continue
        if any((i, j) not in values for j in range(len(test.probes))):
            per_test.append(False)
            continue
        try:
            per_test.append(_asserts.evaluate_check(test, [values[(i, j)] for j in range(len(test.probes))]))
        except Exception as exc:  # noqa: BLE001 - e.g. comparing a non-plain value: the test failed
            per_test.append(False)
            test_errors[i] = f"{type(exc).__name__}: {exc}"[:300]
    if test_errors:
        details["test_errors"] = test_errors
    code_err = _first_error(records, ("code_error",))
    if code_err is not None:
        per_test = [False] * len(per_test)  # the program crashed on load: no test ran
    err = code_err or (errors[min(errors)] if errors else None)
    done = any(r["t"] == "done" for r in records)
    setup_err = _first_error(records, ("setup_error",))
    if setup_err:
        details["setup_error"] = f"{setup_err.get('exc_type')}: {setup_err.get('exc_message')}"
    return _finish(hint, per_test, err, result, details, done, violation)


def _call_outputs(result: dict, n: int) -> list[tuple[str, object]]:
    """Worker result of a 'call' run -> per input ("ok", value) or ("error", text)."""
    records, _ = _parse_records(result)
    outs: list[tuple[str, object]] = [("error", "no output")] * n
    for rec in records:
        i = rec.get("i")
        if not isinstance(i, int) or not 0 <= i < n or outs[i][0] == "ok":
            continue
        if rec["t"] == "out":
            try:
                outs[i] = ("ok", decode(rec.get("v")))
            except (EncodeError, TypeError, ValueError, RecursionError):
                outs[i] = ("error", "malformed output")
        elif rec["t"] == "out_error":
            outs[i] = ("error", f"{rec.get('exc_type')}: {rec.get('exc_message')}")
    return outs


def _assemble_call(job: FunctionCallJob, expected: list, result: dict) -> JudgeResult:
    records, violation = _parse_records(result)
    hint, details = _base_outcome(result)
    outs = _call_outputs(result, len(job.inputs))
    per_test = []
    ref_errors = []
    for i, ((ok_o, out), (ok_e, exp)) in enumerate(zip(outs, expected)):
        if ok_e != "ok":
            ref_errors.append(i)
            per_test.append(False)
        else:
            per_test.append(ok_o == "ok" and outputs_match(out, exp, job.atol))
    if ref_errors:
        details["reference_errors"] = ref_errors
    err = _first_error(records, ("code_error",)) or _first_error(records, ("out_error",))
    done = any(r["t"] == "done" for r in records)
    return _finish(hint, per_test, err, result, details, done, violation)


def _assemble_stdio(job: StdioJob, results: list[dict]) -> JudgeResult:
    per_test, methods, fallthrough = [], [], {}
    worst: JudgeResult | None = None
    for i, ((_, expected), result) in enumerate(zip(job.cases, results)):
        records, violation = _parse_records(result)
        hint, details = _base_outcome(result)
        err = _first_error(records, ("code_error",))
        done = any(r["t"] == "done" for r in records)
        ok, method, errors = (False, None, {})
        if hint is None and err is None and done and not violation:
            ok, method, errors = compare_stdout(result.get("stdout", ""), expected, job.rtol, job.atol)
        if errors:
            fallthrough[i] = errors
        per_test.append(ok)
        methods.append(method)
        case = _finish(hint, [ok], err, result, details, done, violation)
        if worst is None or _SEVERITY[case.outcome] > _SEVERITY[worst.outcome]:
            worst = case
    if worst is None:
        return JudgeResult("wrong_answer", [], 0, 0, details={"methods": []})
    details = dict(worst.details)
    details["methods"] = methods
    if fallthrough:
        details["comparator_errors"] = fallthrough
    worst.details = details
    worst.per_test = per_test
    worst.n_passed = sum(per_test)
    worst.n_tests = len(per_test)
    worst.duration_s = sum(float(r.get("duration_s", 0.0)) for r in results)
    if worst.outcome == "passed" and not all(per_test):
        worst.outcome = "wrong_answer"
    return worst


class _ApiState:
    """Parent side of one API run: calls the handler for each child call."""

    def __init__(self, job: ApiJob, handler):
        self.job = job
        self.handler = handler
        self.n_calls = 0
        self.api_error: dict | None = None
        self.violation: str | None = None
        self.handler_exception: BaseException | None = None
        self.records: list[dict] = []
        self.api_error_type = "ApiError"

    def on_record(self, line: str):
        try:
            rec = json.loads(line)
        except (ValueError, RecursionError):
            self.violation = "malformed message from the program"
            return ("kill", "violation")
        if not isinstance(rec, dict):
            self.violation = "malformed message from the program"
            return ("kill", "violation")
        kind = rec.get("t")
        if kind == "bad_call":
            self.api_error = {"name": str(rec.get("name")), "message": str(rec.get("message")), "line": _int_or_none(rec.get("line"))}
            self.api_error_type = "TypeError"
            return None
        if kind != "call":
            self.records.append(rec)
            return None
        self.n_calls += 1
        if self.n_calls > self.job.max_calls:
            return ("kill", "call_limit")
        name, args, kwargs = rec.get("name"), rec.get("args"), rec.get("kwargs")
        line = _int_or_none(rec.get("line"))
        if name not in self.job.api_names or not isinstance(args, list) or not isinstance(kwargs, dict):
            self.violation = f"call to an unknown API function {str(name)[:80]!r}"
            return ("kill", "violation")
        try:
            value = self.handler.handle(name, args, kwargs, line)
        except ApiError as exc:
            self.api_error = {"name": name, "message": str(exc), "line": line}
            return ("kill", "api_error")
        except Exception as exc:  # noqa: BLE001 - a bug in the simulator: end the run, re-raise after the batch
            self.handler_exception = exc
            return ("kill", "handler_error")
        return {"value": to_json_value(value)}

    def assemble(self, result: dict, killed_by_parent: str | None) -> ApiRunResult:
        hint, _ = _base_outcome(result)
        for line in result.get("records", []):  # non-relayed leftovers (none in api mode, kept for safety)
            self.on_record(line)
        err = next((r for r in self.records if r.get("t") == "code_error"), None)
        fields = _error_fields(err)
        done = any(r.get("t") == "done" for r in self.records)
        if killed_by_parent == "call_limit":
            outcome = "call_limit"
        elif self.api_error is not None:
            outcome = "api_error"
            fields = {"exc_type": self.api_error_type, "exc_message": self.api_error["message"],
                      "error_line": self.api_error["line"]}
        elif self.violation or killed_by_parent in ("violation", "handler_error"):
            outcome = "sandbox_violation"
            fields["exc_message"] = fields["exc_message"] or self.violation
        elif hint is not None:
            outcome = hint
        elif fields["exc_type"] == "MemoryError":
            outcome = "memory"
        elif err is not None:
            outcome = "python_error"
        elif not done:
            outcome = "python_error"
            sig, code = _decode_status(result.get("status"))
            fields.update(exc_type="EarlyExit", exc_message=f"program ended early ({sig or 'exit ' + str(code)})")
        else:
            outcome = "ok"
        return ApiRunResult(
            outcome=outcome,
            api_error=self.api_error,
            n_calls=min(self.n_calls, self.job.max_calls),
            handler=self.handler,
            stdout=result.get("stdout", ""),
            stderr=result.get("stderr", ""),
            duration_s=float(result.get("duration_s", 0.0)),
            **fields,
        )


def _int_or_none(x):
    return x if isinstance(x, int) and not isinstance(x, bool) else None


_DEFAULT_POOL: SandboxPool | None = None
_DEFAULT_LOCK = threading.Lock()


_DEFAULT_CONFIG = None


def get_default_pool() -> SandboxPool:
    """Process-wide shared pool (created on first use, closed at interpreter exit)."""
    global _DEFAULT_POOL
    with _DEFAULT_LOCK:
        if _DEFAULT_POOL is None or _DEFAULT_POOL._closed or _DEFAULT_POOL._owner_pid != os.getpid():
            _DEFAULT_POOL = pool_from_config(_DEFAULT_CONFIG) if _DEFAULT_CONFIG is not None else SandboxPool()
            atexit.register(_DEFAULT_POOL.close)
        return _DEFAULT_POOL


def _limits_from_config(cfg) -> Limits:
    from densecode.errors import DensecodeError

    if cfg.isolation not in SandboxPool.ISOLATION_MODES:
        raise DensecodeError(f"sandbox.isolation={cfg.isolation!r} is not one of {', '.join(SandboxPool.ISOLATION_MODES)}")
    for key in ("timeout_s", "cpu_s", "memory_mb", "max_procs", "file_size_mb", "output_bytes"):
        if getattr(cfg, key) <= 0:
            raise DensecodeError(f"sandbox.{key} must be > 0 (got {getattr(cfg, key)!r})")
    if cfg.workers < 0:
        raise DensecodeError(f"sandbox.workers must be >= 0 (0 = CPU count; got {cfg.workers})")
    return Limits(timeout_s=cfg.timeout_s, cpu_s=cfg.cpu_s, memory_mb=cfg.memory_mb, max_procs=cfg.max_procs,
                  file_size_mb=cfg.file_size_mb, output_bytes=cfg.output_bytes)


def pool_from_config(cfg) -> SandboxPool:
    """A pool from a `SandboxConfig` (the `sandbox:` section of a densecode config)."""
    return SandboxPool(max_workers=cfg.workers or None, limits=_limits_from_config(cfg), isolation=cfg.isolation)


def configure_default_pool(cfg) -> None:
    """Make `get_default_pool()` use these settings (closes an existing default pool)."""
    global _DEFAULT_POOL, _DEFAULT_CONFIG
    _limits_from_config(cfg)  # fail fast on a bad config
    with _DEFAULT_LOCK:
        _DEFAULT_CONFIG = cfg
        if _DEFAULT_POOL is not None:
            _DEFAULT_POOL.close()
            _DEFAULT_POOL = None
