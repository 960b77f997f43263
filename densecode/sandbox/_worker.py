"""Fork-server worker: one per pool slot, runs one sandboxed program at a time.

Process tree for one program (ns mode):

    trainer (SandboxPool) --JSON lines-- worker (this file, trusted, small)
                                            └─ A: setsid, unshare(NEWNS|NEWNET|NEWPID[|NEWUSER]),
                                                  read-only root, private tmpfs /tmp, then waits for B
                                                  └─ B: pid 1 of a fresh pid namespace, fresh /proc,
                                                        rlimits, unprivileged uid, no caps, runs
                                                        the candidate (densecode.sandbox._child)

Killing B (SIGKILL from the worker) makes the kernel kill every process in its
pid namespace, including children that detached (setsid/double fork) or
ignore SIGTERM. The worker never parses what the child writes: result lines
are forwarded to the parent as opaque strings.
"""

from __future__ import annotations

import json
import math
import os
import resource
import selectors
import shutil
import signal
import sys
import time

from densecode.sandbox import isolation as iso

PRELOAD = (
    "math", "re", "collections", "itertools", "functools", "heapq", "bisect", "string",
    "operator", "random", "statistics", "fractions", "decimal", "copy", "datetime",
    "typing", "dataclasses", "array", "cmath", "json", "sys", "os",
)  # imported once here so each forked program starts with them warm

UID_BASE = 200000  # default; the pool passes its own range so concurrent pools never share a uid
GRACE_S = 0.5


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


# ---------------------------------------------------------------- sandbox setup


def _setup_namespaces(plan: dict) -> None:
    """In A: new mount/net/pid namespaces; the child's filesystem view.

    minimal_root: a fresh tmpfs root holding read-only binds of /usr (+ the
    /bin, /lib symlinks), a few /etc files, null/zero/urandom devices and the
    Python installation, then a private writable /tmp; everything else on the
    host (home directories, datasets, the rest of the repo) is absent.
    Otherwise: the host tree recursively read-only plus a private /tmp.
    """
    flags = iso.CLONE_NEWNS | iso.CLONE_NEWPID
    if plan["netns"]:
        flags |= iso.CLONE_NEWNET
    if plan["userns"]:
        uid, gid = os.getuid(), os.getgid()
        iso.unshare(flags | iso.CLONE_NEWUSER)
        iso.write_id_maps(0, uid, gid)
    else:
        iso.unshare(flags)
    iso.mount(None, "/", None, iso.MS_REC | iso.MS_PRIVATE)
    tmp_opts = f"size={plan['tmpfs_mb']}m,nr_inodes=4096,mode=1777"
    if plan["minimal_root"]:
        _build_minimal_root(plan, tmp_opts)
        return
    if plan["readonly_root"]:
        iso.make_tree_readonly("/")
    iso.mount("tmpfs", "/tmp", "tmpfs", iso.MS_NOSUID | iso.MS_NODEV, tmp_opts)


ROOT_DIRS = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32")
ETC_FILES = ("ld.so.cache", "ld.so.conf", "localtime", "passwd", "group", "nsswitch.conf", "hosts", "mime.types")
DEV_FILES = ("null", "zero", "full", "random", "urandom")


def _build_minimal_root(plan: dict, tmp_opts: str) -> None:
    new = "/tmp"  # mounted over in this namespace only; sources are pinned by O_PATH fds first
    sources: list[tuple[str, int, bool]] = []  # (path inside the new root, fd, is_dir)

    def pin(path: str, inside: str) -> None:
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            return
        sources.append((inside, fd, os.path.isdir(path)))

    symlinks = []
    for name in ROOT_DIRS:
        host = "/" + name
        if os.path.islink(host):
            symlinks.append((os.readlink(host), name))
        elif os.path.isdir(host):
            pin(host, host)
    for name in ETC_FILES:
        pin("/etc/" + name, "/etc/" + name)
    for name in DEV_FILES:
        pin("/dev/" + name, "/dev/" + name)
    for path in plan["expose"]:
        pin(path, path)
    iso.mount("tmpfs", new, "tmpfs", iso.MS_NOSUID, "size=1m,nr_inodes=4096,mode=755")
    for target, name in symlinks:
        os.symlink(target, f"{new}/{name}")
    for sub in ("etc", "dev", "proc", "tmp"):
        os.makedirs(f"{new}/{sub}", mode=0o755, exist_ok=True)
    for inside, fd, is_dir in sources:
        target = new + inside
        if is_dir:
            os.makedirs(target, mode=0o755, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(target), mode=0o755, exist_ok=True)
            os.close(os.open(target, os.O_CREAT | os.O_WRONLY, 0o644))
        iso.mount(f"/proc/self/fd/{fd}", target, None, iso.MS_BIND | iso.MS_REC)
        os.close(fd)
    iso.make_tree_readonly(new)
    iso.mount("tmpfs", f"{new}/tmp", "tmpfs", iso.MS_NOSUID | iso.MS_NODEV, tmp_opts)
    os.chroot(new)
    os.chdir("/")


def _exposed_paths(extra: tuple[str, ...] = ()) -> list[str]:
    """Directories the child needs besides /usr: the interpreter and its site-packages.

    densecode itself is not exposed: the worker imports the harness before it
    forks, so programs cannot read the repository (tests, evaluation code).
    """
    import site

    wanted = {sys.base_prefix, sys.prefix, sys.exec_prefix, *site.getsitepackages(), *extra}
    real = sorted({os.path.realpath(p) for p in wanted if p and os.path.isdir(p)})
    out: list[str] = []
    for p in real:
        if p == "/" or p.split("/")[1] in ROOT_DIRS or p.split("/")[1] in ("etc", "dev", "proc", "tmp"):
            continue
        if any(p == q or p.startswith(q + "/") for q in out):
            continue
        out.append(p)
    return out


def cpu_backstop_seconds(limits: dict) -> int:
    """The program's RLIMIT_CPU: one whole second past `cpu_s`.

    RLIMIT_CPU counts whole seconds of tick-sampled CPU time, which on a busy machine runs up to ~10%
    ahead of the scheduler's exact runtime; the worker's own check (exact, fractional) comes first.
    """
    return math.ceil(limits["cpu_s"]) + 1


def process_cpu_s(pid: int) -> float | None:
    """Exact CPU seconds used so far by process `pid` (all its threads), None once it is gone.

    The kernel's per-process CPU clock (CPUCLOCK_SCHED: the scheduler's runtime, the figure wait4 also
    reports); readable for any process in our pid namespace.
    """
    try:
        return time.clock_gettime(((~pid) << 3) | 2)
    except OSError:
        return None


# How many cores a program may keep busy at once, for planning CPU checks (a program with more busy
# threads than this can overshoot its CPU limit between two checks, up to the RLIMIT_CPU backstop).
_CPU_CHECK_CORES = max(1, min(4, len(os.sched_getaffinity(0))))
_CPU_CHECK_MIN_S = 0.002


def _enter_child(plan: dict, limits: dict, fds: dict) -> None:
    """In B, before the candidate runs: fds, /proc, rlimits, identity, env."""
    os.dup2(fds["stdin"], 0)
    os.dup2(fds["out_w"], 1)
    os.dup2(fds["err_w"], 2)
    os.dup2(fds["res_w"], 3)
    os.dup2(fds["rep_r"], 4)
    os.closerange(5, 65536)
    if plan["ns"]:
        if plan["fresh_proc"] and not plan.get("jail"):
            iso.mount("proc", "/proc", "proc", iso.MS_NOSUID | iso.MS_NODEV | 0x8)  # 0x8 = MS_NOEXEC
        os.chdir("/tmp")
    else:
        os.chdir(fds["workdir"])
    mb = 1024 * 1024
    iso.set_rlimit(resource.RLIMIT_AS, limits["memory_mb"] * mb)
    # Only a backstop: the worker enforces `cpu_s` itself (see Worker._check_cpu). Soft = hard, so the
    # kernel sends SIGKILL, which it delivers even to a pid-namespace init (the program is pid 1 of its
    # namespace in the ns modes); a SIGXCPU would be dropped there, or ignored by a hostile program.
    backstop = cpu_backstop_seconds(limits)
    iso.set_rlimit(resource.RLIMIT_CPU, backstop, backstop)
    iso.set_rlimit(resource.RLIMIT_FSIZE, limits["file_size_mb"] * mb)
    iso.set_rlimit(resource.RLIMIT_CORE, 0)
    iso.set_rlimit(resource.RLIMIT_NOFILE, 256)
    iso.set_rlimit(resource.RLIMIT_NPROC, limits["max_procs"])
    if plan["setuid"] is not None:
        uid = plan["setuid"]
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)  # drops all capabilities; RLIMIT_NPROC now applies
    elif plan["userns"]:
        iso.drop_all_capabilities()
    iso.prctl(iso.PR_SET_NO_NEW_PRIVS, 1)
    # Again after the uid change, which clears it: if the worker (or A) dies, this program dies.
    iso.prctl(iso.PR_SET_PDEATHSIG, signal.SIGKILL)
    os.environ.clear()
    os.environ.update({"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8", "TMPDIR": "/tmp"})
    if not plan["netns"]:
        _block_sockets()
    sys.stdin = open(0, "r", closefd=False)
    sys.stdout = open(1, "w", closefd=False)
    sys.stderr = open(2, "w", closefd=False)


def _block_sockets() -> None:
    """Fallback when no network namespace is available: best effort, Python-level only."""
    import socket

    def refuse(*args, **kwargs):
        raise PermissionError("network access is disabled in the sandbox")

    socket.socket = refuse  # type: ignore[assignment]
    socket.create_connection = refuse  # type: ignore[assignment]
    socket.socketpair = refuse  # type: ignore[assignment]
    sys.modules["_socket"] = None  # type: ignore[assignment]


def _sweep_descendants() -> None:
    """Subreaper A: SIGKILL and reap every remaining descendant (they are all our children by now)."""
    me = os.getpid()
    for _ in range(1000):
        try:
            with open(f"/proc/{me}/task/{me}/children") as f:
                children = [int(x) for x in f.read().split()]
        except OSError:
            children = []
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            pid, _ = os.waitpid(-1, 0 if children else os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0 and not children:
            return


def _run_in_a(plan: dict, limits: dict, payload: dict, fds: dict) -> None:
    """Body of the intermediate process A; never returns."""
    code = 0
    try:
        os.setsid()
        iso.prctl(iso.PR_SET_PDEATHSIG, signal.SIGKILL)
        if plan["ns"]:
            _setup_namespaces(plan)
        else:
            # No pid namespace: orphans of the program (double fork, setsid) are re-parented to A,
            # which kills them all once the program ends.
            iso.prctl(iso.PR_SET_CHILD_SUBREAPER, 1)
        pid_b = os.fork()
        if pid_b == 0:
            try:
                if not plan["ns"]:
                    os.setpgid(0, 0)  # its own group, so the worker's killpg spares A
                iso.prctl(iso.PR_SET_PDEATHSIG, signal.SIGKILL)
                _enter_child(plan, limits, fds)
                from densecode.sandbox import _child

                _child.main(payload)
            finally:
                os._exit(70)
        os.write(fds["stat_w"], f"{pid_b}\n".encode())
        for key in ("out_w", "err_w", "res_w", "rep_r", "stdin"):
            os.close(fds[key])
        _, status, usage = os.wait4(pid_b, 0)
        if not plan["ns"]:
            _sweep_descendants()
        os.write(fds["stat_w"], f"{status} {usage.ru_utime + usage.ru_stime:.4f}\n".encode())
    except BaseException as exc:  # noqa: BLE001
        try:
            os.write(fds["stat_w"], f"setup-error {type(exc).__name__}: {exc}\n".encode())
        except OSError:
            pass
        code = 71
    os._exit(code)


def _jail_current_process(plan: dict) -> int:
    """Fast path (root): put the WORKER itself in its own mount + network namespace and minimal root.

    Done once per worker; each program then only needs a new pid namespace and
    one fork. Returns an fd of the worker's own pid namespace, used to reset
    `pid_ns_for_children` after each fork.
    """
    pidns_fd = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
    iso.unshare(iso.CLONE_NEWNS | iso.CLONE_NEWNET)
    iso.mount(None, "/", None, iso.MS_REC | iso.MS_PRIVATE)
    _build_minimal_root(plan, f"size={plan['tmpfs_mb']}m,nr_inodes=4096,mode=1777")
    return pidns_fd


def _clear_tmp() -> None:
    """Jail mode: /tmp is shared by the worker's consecutive programs, so empty it after each one."""
    for name in os.listdir("/tmp"):
        path = "/tmp/" + name
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                os.unlink(path)
        except OSError:
            pass


# ---------------------------------------------------------------- one job


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
        mode = self.mode
        base = {"tmpfs_mb": 64, "fresh_proc": True, "readonly_root": True, "minimal_root": True, "expose": _exposed_paths()}
        if is_root and mode in ("auto", "jail"):
            jail = {**base, "jail": True, "fresh_proc": False, "ns": True, "userns": False, "netns": True, "setuid": self.uid}
            if self._try_jail(jail):
                self.pidns_fd = _jail_current_process(jail)
                return jail
        candidates = []
        if mode in ("auto", "namespaces") and is_root:
            candidates.append({**base, "ns": True, "userns": False, "netns": True, "setuid": self.uid})
        if mode in ("auto", "userns"):
            candidates.append({**base, "ns": True, "userns": True, "netns": True, "setuid": None})
        if mode in ("auto", "namespaces") and is_root:
            # Namespaces, but the interpreter unreadable by a slot uid: stay uid 0 (NPROC not enforced).
            candidates.append({**base, "ns": True, "userns": False, "netns": True, "setuid": None})
        for plan in candidates:
            for variant in (
                plan,
                {**plan, "fresh_proc": False},
                {**plan, "minimal_root": False},
                {**plan, "minimal_root": False, "fresh_proc": False},
                {**plan, "minimal_root": False, "fresh_proc": False, "readonly_root": False},
            ):
                if self._try_plan(variant):
                    return variant
        none = {"ns": False, "userns": False, "netns": False, "readonly_root": False, "fresh_proc": False,
                "minimal_root": False, "tmpfs_mb": 0, "setuid": None}
        if is_root and self._try_plan({**none, "setuid": self.uid}):
            return {**none, "setuid": self.uid}
        return none

    def _try_jail(self, plan: dict) -> bool:
        """Try the jail in a throw-away fork first: jailing the worker itself cannot be undone."""
        pid = os.fork()
        if pid == 0:
            ok = False
            try:
                self.pidns_fd = _jail_current_process(plan)
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
        p = self.plan
        return {
            "pid_namespace": p["ns"],
            "kill_scope": "pid namespace (all descendants)" if p["ns"] else "process group + subreaper sweep of descendants",
            "network": "network namespace (no interfaces)" if p["netns"] else "python-level socket block (best effort)",
            "user_namespace": p["userns"],
            "readonly_root": p["readonly_root"] or p["minimal_root"],
            "minimal_root": p["minimal_root"],
            "exposed_paths": p.get("expose", []) if p["minimal_root"] else "whole host tree (read-only)",
            "private_tmp": p["ns"],
            "fresh_proc": p["fresh_proc"],
            "proc_mounted": p["fresh_proc"] or not p["minimal_root"],
            "fork_path": "jailed worker: one fork per program" if p.get("jail") else "intermediate process per program",
            "uid": p["setuid"] if p["setuid"] is not None else ("mapped user in own user namespace" if p["userns"] else os.getuid()),
            # Root's own processes are exempt from RLIMIT_NPROC, also when mapped to root in a user namespace.
            "nproc_limit_enforced": bool(p["setuid"] is not None or (p["userns"] and os.getuid() != 0)),
            "rlimits": ["AS", "CPU", "FSIZE", "NPROC", "NOFILE", "CORE"],
        }

    def run_job(self, payload: dict, limits: dict, stdin_data: str | None = None, plan: dict | None = None, relay: bool = False) -> dict:
        plan = plan or self.plan
        fds: dict = {}
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
            pid_b = self._fork_jailed(plan, limits, payload, fds, (out_r, err_r, res_r, rep_w, stat_r))
            pidfd = os.pidfd_open(pid_b)
            os.close(stat_r)
            stat_r = None
        else:
            pid_a = os.fork()
            if pid_a == 0:
                for fd in (out_r, err_r, res_r, rep_w, stat_r, self.cmd_in, self.cmd_out):
                    os.close(fd)
                _run_in_a(plan, limits, payload, fds)
        for key in ("out_w", "err_w", "res_w", "rep_r", "stat_w", "stdin"):
            os.close(fds[key])
        try:
            return self._supervise(pid_a, pid_b, pidfd, out_r, err_r, res_r, rep_w, stat_r, limits, plan, start, relay)
        finally:
            for fd in (out_r, err_r, res_r, rep_w, stat_r, pidfd):
                try:
                    if fd is not None:
                        os.close(fd)
                except OSError:
                    pass
            for pid in (pid_a, pid_b):
                if pid is None:
                    continue
                try:
                    if pid == pid_b:
                        os.kill(pid_b, signal.SIGKILL)  # no-op unless supervision failed midway
                except ProcessLookupError:
                    pass
                try:
                    os.waitpid(pid, 0)
                except ChildProcessError:
                    pass
            if plan.get("jail"):
                _clear_tmp()
            if workdir is not None:
                import shutil

                shutil.rmtree(workdir, ignore_errors=True)

    def _fork_jailed(self, plan, limits, payload, fds, parent_fds) -> int:
        """Jail mode: fork the program straight into a new pid namespace (it becomes its pid 1)."""
        iso.unshare(iso.CLONE_NEWPID)
        try:
            pid_b = os.fork()
        except BaseException:
            iso.setns(self.pidns_fd, iso.CLONE_NEWPID)
            raise
        if pid_b == 0:
            try:
                os.setsid()
                iso.prctl(iso.PR_SET_PDEATHSIG, signal.SIGKILL)
                for fd in parent_fds:
                    os.close(fd)
                _enter_child(plan, limits, fds)
                from densecode.sandbox import _child

                _child.main(payload)
            finally:
                os._exit(70)
        iso.setns(self.pidns_fd, iso.CLONE_NEWPID)  # later forks of the worker stay in its own pid namespace
        return pid_b

    def _kill(self, pid_a: int | None, pid_b: int | None, plan: dict) -> None:
        if pid_b is not None:
            try:
                os.kill(pid_b, signal.SIGKILL)  # pid-ns init: the kernel kills the whole namespace
            except ProcessLookupError:
                pass
        if not plan["ns"] and pid_b is not None:
            try:
                os.killpg(pid_b, signal.SIGKILL)  # B's group; A then sweeps the detached rest
            except (ProcessLookupError, PermissionError):
                pass

    def _supervise(self, pid_a, pid_b, pidfd, out_r, err_r, res_r, rep_w, stat_r, limits, plan, start, relay) -> dict:
        sel = selectors.DefaultSelector()
        for fd, name in ((out_r, "out"), (err_r, "err"), (res_r, "res"), (stat_r, "stat"), (pidfd, "pidfd")):
            if fd is None:
                continue
            if name != "pidfd":
                os.set_blocking(fd, False)
            sel.register(fd, selectors.EVENT_READ, name)
        sel.register(self.cmd_in, selectors.EVENT_READ, "cmd")  # kill requests (deadline) and API replies
        streams = {"out": bytearray(), "err": bytearray()}
        res_reader = _LineReader(res_r)
        stat_reader = _LineReader(stat_r) if stat_r is not None else None
        records: list[str] = []
        res_bytes = 0
        res_cap = max(16 << 20, limits["output_bytes"])
        out_cap = limits["output_bytes"]
        status = None
        cpu_s = None  # CPU seconds of the program's main process and the children it waited for (wait4)
        setup_error = None
        killed = None
        open_fds = {out_r, err_r, res_r}
        if stat_r is not None:
            open_fds.add(stat_r)
        deadline = start + limits["timeout_s"]
        cpu_check_at = start + limits["cpu_s"] / _CPU_CHECK_CORES  # the soonest it could have used it all
        drain_until = None
        while True:
            now = time.monotonic()
            if killed is None and status is None and now >= deadline:
                killed = "timeout"
                self._kill(pid_a, pid_b, plan)
            if killed is None and status is None and pid_b is not None and now >= cpu_check_at:
                used = process_cpu_s(pid_b)
                if used is not None and used >= limits["cpu_s"]:
                    killed = "cpu_limit"
                    self._kill(pid_a, pid_b, plan)
                else:
                    left = limits["cpu_s"] - (used or 0.0)
                    cpu_check_at = now + max(_CPU_CHECK_MIN_S, left / _CPU_CHECK_CORES)
            if status is not None or setup_error is not None:
                if drain_until is None:
                    drain_until = now + GRACE_S
                if not (open_fds - {stat_r}) or now >= drain_until:
                    break
            if killed is not None and drain_until is None:
                drain_until = now + GRACE_S
            if drain_until is not None and now >= drain_until:
                break
            wait = (drain_until if drain_until is not None else min(deadline, cpu_check_at)) - now
            for key, _ in sel.select(timeout=max(0.0, min(wait, 1.0))):
                name = key.data
                if name == "cmd":
                    for line in self.reader.read_available():
                        msg = json.loads(line)
                        if msg.get("id") != self.current_id:
                            continue  # stale message about an earlier program
                        if msg.get("op") == "reply":
                            try:
                                os.write(rep_w, (msg["data"] + "\n").encode())
                            except OSError:
                                pass
                        elif msg.get("op") == "kill" and killed is None:
                            killed = msg.get("reason", "killed")
                            self._kill(pid_a, pid_b, plan)
                    if self.reader.eof:
                        os._exit(0)  # parent gone
                    continue
                fd = key.fd
                if name == "pidfd":
                    _, status, usage = os.wait4(pid_b, 0)
                    cpu_s = usage.ru_utime + usage.ru_stime
                    sel.unregister(fd)
                    continue
                if name == "stat":
                    for line in stat_reader.read_available():
                        text = line.decode(errors="replace")
                        if text.startswith("setup-error"):
                            setup_error = text
                        elif pid_b is None:
                            pid_b = int(text)
                        else:
                            status_text, _, cpu_text = text.partition(" ")
                            status = int(status_text)
                            cpu_s = float(cpu_text) if cpu_text else None
                    if stat_reader.eof:
                        sel.unregister(fd)
                        open_fds.discard(fd)
                        if status is None and setup_error is None and pid_b is None:
                            setup_error = "setup-error: sandbox process died before starting"
                        elif status is None and setup_error is None:
                            status = -1  # A died (killed); B died with it via PDEATHSIG
                    continue
                if name == "res":
                    lines = res_reader.read_available()
                    for line in lines:
                        res_bytes += len(line) + 1
                        text = line.decode("utf-8", errors="replace")
                        if relay:
                            _send(self.cmd_out, {"op": "rec", "data": text})
                        else:
                            records.append(text)
                    res_bytes_now = res_bytes + len(res_reader.buf)
                    if res_bytes_now > res_cap and killed is None:
                        killed = "output_limit"
                        self._kill(pid_a, pid_b, plan)
                    if res_reader.eof:
                        sel.unregister(fd)
                        open_fds.discard(fd)
                    continue
                try:
                    chunk = os.read(fd, 1 << 16)
                except BlockingIOError:
                    continue
                if not chunk:
                    sel.unregister(fd)
                    open_fds.discard(fd)
                    continue
                buf = streams[name]
                room = out_cap - len(streams["out"]) - len(streams["err"])
                buf += chunk[: max(0, room)]
                if len(chunk) > room and killed is None:
                    killed = "output_limit"
                    self._kill(pid_a, pid_b, plan)
        if status is None and killed is not None:
            self._kill(pid_a, pid_b, plan)
        sel.close()
        return {
            "op": "done",
            "status": status,
            "pid_b": pid_b,
            "setup_error": setup_error,
            "killed": killed,
            "records": records,
            "stdout": streams["out"].decode("utf-8", errors="replace"),
            "stderr": streams["err"].decode("utf-8", errors="replace"),
            "duration_s": time.monotonic() - start,
            "cpu_s": cpu_s,
            "cpu_limit_s": limits["cpu_s"],
        }

    def serve(self) -> None:
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
    for name in sys.argv[5].split(",") if len(sys.argv) > 5 and sys.argv[5] else []:
        try:
            __import__(name)
        except ImportError:
            pass
    import densecode.sandbox._child  # noqa: F401 - warm for the forked children

    Worker(cmd_in, cmd_out, slot, uid, mode).serve()


if __name__ == "__main__":
    main()
