"""Fork-server worker: one per pool slot, runs one sandboxed program at a time.

The worker probes once which isolation this machine allows (`jail.py` builds it), then serves
"run" requests from the pool: it starts the program (`Worker.run_job`), and `_Supervision`
watches it until it ends: it collects its output, enforces its wall-clock, CPU and output limits,
relays API calls, and reports how it ended. Killing B (SIGKILL from the worker) makes the kernel
kill every process in its pid namespace, including children that detached (setsid/double fork)
or ignore SIGTERM. The worker never parses what the child writes: result lines are forwarded to
the parent as opaque strings.
"""

from __future__ import annotations

import gc
import json
import os
import selectors
import signal
import sys
import time

from densecode.sandbox import jail

PRELOAD = (
    "math", "re", "collections", "itertools", "functools", "heapq", "bisect", "string",
    "operator", "random", "statistics", "fractions", "decimal", "copy", "datetime",
    "typing", "dataclasses", "array", "cmath", "json", "sys", "os",
)  # imported once here so each forked program starts with them warm

UID_BASE = 200000  # default; the pool passes its own range so concurrent pools never share a uid
GRACE_S = 0.5  # after the program ended (or was killed): time left to drain its pipes

# How many cores a program may keep busy at once, for planning CPU checks (a program with more busy
# threads than this can overshoot its CPU limit between two checks, up to the RLIMIT_CPU backstop).
_CPU_CHECK_CORES = max(1, min(4, len(os.sched_getaffinity(0))))
_CPU_CHECK_MIN_S = 0.002


class _LineReader:
    def __init__(self, fd: int):
        self.fd = fd
        self.buf = bytearray()  # amortised O(1) appends: a child may send megabytes without a newline
        self.eof = False

    def read_available(self) -> list[bytes]:
        try:
            chunk = os.read(self.fd, 1 << 16)
        except BlockingIOError:
            return []
        if not chunk:
            self.eof = True
            return []
        if b"\n" not in chunk:
            self.buf += chunk
            return []
        self.buf += chunk
        *lines, rest = bytes(self.buf).split(b"\n")
        self.buf = bytearray(rest)
        return lines


def _send(fd: int, msg: dict) -> None:
    data = (json.dumps(msg, separators=(",", ":")) + "\n").encode()
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def process_cpu_s(pid: int) -> float | None:
    """Exact CPU seconds used so far by process `pid` (all its threads), None once it is gone.

    The kernel's per-process CPU clock (CPUCLOCK_SCHED: the scheduler's runtime, the figure wait4 also
    reports); readable for any process in our pid namespace.
    """
    try:
        return time.clock_gettime(((~pid) << 3) | 2)
    except OSError:
        return None


class _RunPipes:
    """The worker's ends of one run's pipes (the child's ends are closed once it is started)."""

    def __init__(self, out_r: int, err_r: int, res_r: int, rep_w: int, stat_r: int | None, pidfd: int | None):
        self.out_r, self.err_r, self.res_r, self.rep_w, self.stat_r, self.pidfd = out_r, err_r, res_r, rep_w, stat_r, pidfd

    def close(self) -> None:
        for fd in (self.out_r, self.err_r, self.res_r, self.rep_w, self.stat_r, self.pidfd):
            try:
                if fd is not None:
                    os.close(fd)
            except OSError:
                pass


class _Supervision:
    """Watches one running program until it ends; `run()` returns the "done" message for the pool.

    Ends when the program has ended and its pipes are drained (or GRACE_S after that, since
    detached children may hold them open), or GRACE_S after the worker killed it.
    """

    def __init__(self, worker: Worker, pid_a: int | None, pid_b: int | None, pipes: _RunPipes, limits: dict,
                 plan: dict, start: float, relay: bool):
        self.worker = worker
        self.pid_a, self.pid_b = pid_a, pid_b
        self.pipes = pipes
        self.limits, self.plan, self.start, self.relay = limits, plan, start, relay
        self.streams = {"out": bytearray(), "err": bytearray()}
        self.res_reader = _LineReader(pipes.res_r)
        self.stat_reader = _LineReader(pipes.stat_r) if pipes.stat_r is not None else None
        self.records: list[str] = []
        self.res_bytes = 0
        self.res_cap = max(16 << 20, limits["output_bytes"])
        self.status: int | None = None
        self.cpu_s: float | None = None  # CPU seconds of the program's main process and the children it waited for
        self.setup_error: str | None = None
        self.killed: str | None = None  # why the worker killed it: timeout | cpu_limit | output_limit | a pool request
        self.open_fds = {pipes.out_r, pipes.err_r, pipes.res_r} | ({pipes.stat_r} if pipes.stat_r is not None else set())
        self.deadline = start + limits["timeout_s"]
        self.cpu_check_at = start + limits["cpu_s"] / _CPU_CHECK_CORES  # the soonest it could have used it all
        self.drain_until: float | None = None
        self.sel = selectors.DefaultSelector()

    def run(self) -> dict:
        handlers = {"out": self._on_stream, "err": self._on_stream, "res": self._on_results, "stat": self._on_status,
                    "pidfd": self._on_exit, "cmd": self._on_command}
        p = self.pipes
        for fd, name in ((p.out_r, "out"), (p.err_r, "err"), (p.res_r, "res"), (p.stat_r, "stat"), (p.pidfd, "pidfd")):
            if fd is None:
                continue
            if name != "pidfd":
                os.set_blocking(fd, False)
            self.sel.register(fd, selectors.EVENT_READ, name)
        self.sel.register(self.worker.cmd_in, selectors.EVENT_READ, "cmd")  # kill requests (deadline), API replies
        try:
            while True:
                now = time.monotonic()
                self._enforce_limits(now)
                if self._finished(now):
                    break
                wake = self.drain_until if self.drain_until is not None else min(self.deadline, self.cpu_check_at)
                for key, _ in self.sel.select(timeout=max(0.0, min(wake - now, 1.0))):
                    handlers[key.data](key.data, key.fd)
            if self.status is None and self.killed is not None:
                jail.kill_program(self.pid_b, self.plan)
        finally:
            self.sel.close()
        return self._result()

    # -- limits and ending

    def _kill(self, reason: str) -> None:
        if self.killed is None:
            self.killed = reason
            if self.status is None:  # once it has been reaped its pid may belong to another process
                jail.kill_program(self.pid_b, self.plan)

    def _enforce_limits(self, now: float) -> None:
        if self.killed is not None or self.status is not None:
            return
        if now >= self.deadline:
            self._kill("timeout")
        elif self.pid_b is not None and now >= self.cpu_check_at:
            self._check_cpu(now)

    def _check_cpu(self, now: float) -> None:
        """Kill at `cpu_s` of exact CPU time; otherwise check again when it could next have got there."""
        used = process_cpu_s(self.pid_b)
        if used is not None and used >= self.limits["cpu_s"]:
            self._kill("cpu_limit")
            return
        left = self.limits["cpu_s"] - (used or 0.0)
        self.cpu_check_at = now + max(_CPU_CHECK_MIN_S, left / _CPU_CHECK_CORES)

    def _finished(self, now: float) -> bool:
        if self.status is not None or self.setup_error is not None:
            if self.drain_until is None:
                self.drain_until = now + GRACE_S
            if not (self.open_fds - {self.pipes.stat_r}) or now >= self.drain_until:
                return True
        if self.killed is not None and self.drain_until is None:
            self.drain_until = now + GRACE_S
        return self.drain_until is not None and now >= self.drain_until

    def _close(self, fd: int) -> None:
        self.sel.unregister(fd)
        self.open_fds.discard(fd)

    # -- events

    def _on_command(self, name: str, fd: int) -> None:
        for line in self.worker.reader.read_available():
            msg = json.loads(line)
            if msg.get("id") != self.worker.current_id:
                continue  # stale message about an earlier program
            if msg.get("op") == "reply":
                try:
                    os.write(self.pipes.rep_w, (msg["data"] + "\n").encode())
                except OSError:
                    pass
            elif msg.get("op") == "kill":
                self._kill(msg.get("reason", "killed"))
        if self.worker.reader.eof:
            os._exit(0)  # parent gone

    def _on_exit(self, name: str, fd: int) -> None:
        """Jail mode: the program (our child) ended."""
        _, self.status, usage = os.wait4(self.pid_b, 0)
        self.cpu_s = usage.ru_utime + usage.ru_stime
        self.sel.unregister(fd)

    def _on_status(self, name: str, fd: int) -> None:
        """Modes with an intermediate process A: B's pid, then its wait status and CPU time, or a set-up error."""
        for line in self.stat_reader.read_available():
            text = line.decode(errors="replace")
            if text.startswith("setup-error"):
                self.setup_error = text
            elif self.pid_b is None:
                self.pid_b = int(text)
            else:
                status_text, _, cpu_text = text.partition(" ")
                self.status = int(status_text)
                self.cpu_s = float(cpu_text) if cpu_text else None
        if self.stat_reader.eof:
            self._close(fd)
            if self.status is None and self.setup_error is None and self.pid_b is None:
                self.setup_error = "setup-error: sandbox process died before starting"
            elif self.status is None and self.setup_error is None:
                self.status = -1  # A died (killed); B died with it via PDEATHSIG

    def _on_results(self, name: str, fd: int) -> None:
        for line in self.res_reader.read_available():
            self.res_bytes += len(line) + 1
            text = line.decode("utf-8", errors="replace")
            if self.relay:
                _send(self.worker.cmd_out, {"op": "rec", "data": text})
            else:
                self.records.append(text)
        if self.res_bytes + len(self.res_reader.buf) > self.res_cap:
            self._kill("output_limit")
        if self.res_reader.eof:
            self._close(fd)

    def _on_stream(self, name: str, fd: int) -> None:
        try:
            chunk = os.read(fd, 1 << 16)
        except BlockingIOError:
            return
        if not chunk:
            self._close(fd)
            return
        room = self.limits["output_bytes"] - len(self.streams["out"]) - len(self.streams["err"])
        self.streams[name] += chunk[: max(0, room)]
        if len(chunk) > room:
            self._kill("output_limit")

    def _result(self) -> dict:
        return {
            "op": "done",
            "status": self.status,
            "pid_b": self.pid_b,
            "setup_error": self.setup_error,
            "killed": self.killed,
            "records": self.records,
            "stdout": self.streams["out"].decode("utf-8", errors="replace"),
            "stderr": self.streams["err"].decode("utf-8", errors="replace"),
            "duration_s": time.monotonic() - self.start,
            "cpu_s": self.cpu_s,
            "cpu_limit_s": self.limits["cpu_s"],
        }


class Worker:
    def __init__(self, cmd_in: int, cmd_out: int, slot: int, uid: int | None = None, mode: str = "auto"):
        self.uid = UID_BASE + slot if uid is None else uid
        self.mode = mode
        self.cmd_in = cmd_in
        self.cmd_out = cmd_out
        self.slot = slot
        self.reader = _LineReader(cmd_in)
        self.pending: list[bytes] = []
        self.current_id = None
        self.pidns_fd: int | None = None
        self.plan = self._probe()

    # -- capability probe: decide once which protections this kernel allows

    def _probe(self) -> dict:
        """Strongest isolation that works here, verified by running a probe program under it.

        `self.mode` narrows the choice (tests use it to exercise the fallbacks):
        jail | namespaces | userns | none | auto.
        """
        is_root = os.getuid() == 0
        if is_root and self.mode in ("auto", "jail"):
            plan = jail.jail_plan(self.uid)
            if self._try_jail(plan):
                self.pidns_fd = jail.jail_current_process(plan)
                return plan
        *candidates, unprotected = jail.fallback_plans(self.mode, is_root, self.uid)
        for plan in candidates:
            if self._try_plan(plan):
                return plan
        return unprotected

    def _try_jail(self, plan: dict) -> bool:
        """Try the jail in a throw-away fork first: jailing the worker itself cannot be undone."""
        pid = os.fork()
        if pid == 0:
            ok = False
            try:
                self.pidns_fd = jail.jail_current_process(plan)
                ok = self._try_plan(plan)
            finally:
                os._exit(0 if ok else 1)
        _, status = os.waitpid(pid, 0)
        return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0

    def _try_plan(self, plan: dict) -> bool:
        limits = {"memory_mb": 512, "cpu_s": 5, "file_size_mb": 1, "max_procs": 16, "output_bytes": 4096, "timeout_s": 10}
        # The import checks that the interpreter's own files are reachable from inside the sandbox.
        probe = {"mode": "assert", "setup": "", "code": "import xml.dom.minidom, zlib", "probes": [["1+1"]]}
        result = self.run_job(probe, limits, plan=plan, relay=False)
        return result["status"] is not None and result["setup_error"] is None and any('"probe"' in r for r in result["records"])

    def protections(self) -> dict:
        return jail.describe(self.plan)

    # -- one job

    def run_job(self, payload: dict, limits: dict, stdin_data: str | None = None, plan: dict | None = None,
                relay: bool = False) -> dict:
        plan = plan or self.plan
        fds: dict = {}  # the child's ends, by role
        out_r, fds["out_w"] = os.pipe()
        err_r, fds["err_w"] = os.pipe()
        res_r, fds["res_w"] = os.pipe()
        fds["rep_r"], rep_w = os.pipe()
        stat_r, fds["stat_w"] = os.pipe()
        if stdin_data is not None:
            fds["stdin"] = os.memfd_create("stdin")
            os.write(fds["stdin"], stdin_data.encode())
            os.lseek(fds["stdin"], 0, os.SEEK_SET)
        else:
            fds["stdin"] = os.open(os.devnull, os.O_RDONLY)
        workdir = None
        if not plan["ns"]:
            import tempfile

            workdir = tempfile.mkdtemp(prefix="densecode-sbx-")
            if plan["setuid"] is not None:
                os.chown(workdir, plan["setuid"], plan["setuid"])
            fds["workdir"] = workdir
        start = time.monotonic()
        pid_a = pid_b = pidfd = None
        if plan.get("jail"):
            pid_b = jail.fork_jailed(plan, limits, payload, fds, (out_r, err_r, res_r, rep_w, stat_r), self.pidns_fd)
            pidfd = os.pidfd_open(pid_b)
            os.close(stat_r)
            stat_r = None
        else:
            pid_a = os.fork()
            if pid_a == 0:
                for fd in (out_r, err_r, res_r, rep_w, stat_r, self.cmd_in, self.cmd_out):
                    os.close(fd)
                jail.run_in_a(plan, limits, payload, fds)
        for key in ("out_w", "err_w", "res_w", "rep_r", "stat_w", "stdin"):
            os.close(fds[key])
        pipes = _RunPipes(out_r, err_r, res_r, rep_w, stat_r, pidfd)
        supervision = _Supervision(self, pid_a, pid_b, pipes, limits, plan, start, relay)
        try:
            return supervision.run()
        finally:
            self._reap(pid_a, pid_b, pidfd, ended=supervision.status is not None)
            pipes.close()
            if plan.get("jail"):
                jail.clear_tmp()
            if workdir is not None:
                import shutil

                shutil.rmtree(workdir, ignore_errors=True)

    @staticmethod
    def _reap(pid_a: int | None, pid_b: int | None, pidfd: int | None, ended: bool) -> None:
        """Wait for the run's own child: A, or in jail mode B (killed first if supervision failed midway)."""
        if pidfd is not None and not ended:
            try:
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)  # by pidfd: never a recycled pid
            except ProcessLookupError:
                pass
        for pid in (pid_a, pid_b):
            if pid is not None:
                try:
                    os.waitpid(pid, 0)
                except ChildProcessError:
                    pass

    def serve(self) -> None:
        # Everything the worker holds now (preloaded modules, the harness) moves to the GC's permanent generation:
        # a collection in a forked program then never walks (and so never copies) the worker's pages.
        gc.freeze()
        _send(self.cmd_out, {"op": "hello", "protections": self.protections(), "pid": os.getpid()})
        while True:
            sel_lines = self.reader.read_available() if not self.pending else []
            self.pending.extend(sel_lines)
            if self.reader.eof and not self.pending:
                return
            while self.pending:
                msg = json.loads(self.pending.pop(0))
                if msg.get("op") != "run":
                    continue
                self.current_id = msg["id"]
                result = self.run_job(msg["payload"], msg["limits"], msg.get("stdin"), relay=msg["payload"]["mode"] == "api")
                self.current_id = None
                result["id"] = msg["id"]
                _send(self.cmd_out, result)


def load_file_module(name: str, path: str) -> None:
    """Import the Python file `path` as module `name` (a judge's harness: programs then `import name` instead of
    compiling the harness each time). Done before the worker is jailed, so the file need not be visible to programs;
    each program gets its own copy-on-write copy of the module, so one program's changes to it die with it."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path} as module {name}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)


def main() -> None:
    cmd_in, cmd_out, slot, uid = (int(x) for x in sys.argv[1:5])
    mode = sys.argv[6] if len(sys.argv) > 6 else "auto"
    # No PDEATHSIG here: it fires when the creating *thread* exits, and pools may be made in worker
    # threads. The worker exits on EOF of its command pipe instead (the pool's process closed or died).
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C in the trainer is handled by the parent
    for name in PRELOAD:
        try:
            __import__(name)
        except ImportError:
            pass
    for entry in sys.argv[5].split(",") if len(sys.argv) > 5 and sys.argv[5] else []:
        if "=" in entry:
            load_file_module(*entry.split("=", 1))  # a trusted harness: failing to load it fails the start
            continue
        try:
            __import__(entry)
        except ImportError:
            pass
    import densecode.sandbox._child  # noqa: F401 - warm for the forked children

    Worker(cmd_in, cmd_out, slot, uid, mode).serve()


if __name__ == "__main__":
    main()
