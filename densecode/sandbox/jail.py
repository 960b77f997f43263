"""Jail set-up: the isolation a sandboxed program runs in, and the plans that choose it.

Process tree for one program (ns mode):

    trainer (SandboxPool) --JSON lines-- worker (_worker.py, trusted, small)
                                            └─ A: setsid, unshare(NEWNS|NEWNET|NEWPID[|NEWUSER]),
                                                  read-only root, private tmpfs /tmp, then waits for B
                                                  └─ B: pid 1 of a fresh pid namespace, fresh /proc,
                                                        rlimits, unprivileged uid, no caps, runs
                                                        the candidate (densecode.sandbox._child)

Jail mode (root): the worker itself is jailed once (own mount + network namespace, minimal
root) and forks each program B straight into a new pid namespace, without A.

A *plan* is a dict of the protections to apply (keys: ns, userns, netns, jail, setuid,
readonly_root, minimal_root, fresh_proc, tmpfs_mb, expose); the worker tries `candidate_plans`
strongest first and keeps the first one under which a probe program runs.
Everything here runs in the trusted worker or in a process that has not yet run candidate code.
"""

from __future__ import annotations

import math
import os
import resource
import shutil
import signal
import sys

from densecode.sandbox import isolation as iso

# ---------------------------------------------------------------- choosing a plan


def jail_plan(uid: int) -> dict:
    """The fast path (root): the worker is jailed once, each program is one fork into a new pid namespace."""
    return {**_base_plan(), "jail": True, "fresh_proc": False, "ns": True, "userns": False, "netns": True, "setuid": uid}


def fallback_plans(mode: str, is_root: bool, uid: int) -> list[dict]:
    """Plans with an intermediate process A per program, strongest first; the last one isolates nothing."""
    base = _base_plan()
    candidates = []
    if mode in ("auto", "namespaces") and is_root:
        candidates.append({**base, "ns": True, "userns": False, "netns": True, "setuid": uid})
    if mode in ("auto", "userns"):
        candidates.append({**base, "ns": True, "userns": True, "netns": True, "setuid": None})
    if mode in ("auto", "namespaces") and is_root:
        # Namespaces, but the interpreter unreadable by a slot uid: stay uid 0 (NPROC not enforced).
        candidates.append({**base, "ns": True, "userns": False, "netns": True, "setuid": None})
    plans = []
    for plan in candidates:
        plans += [
            plan,
            {**plan, "fresh_proc": False},
            {**plan, "minimal_root": False},
            {**plan, "minimal_root": False, "fresh_proc": False},
            {**plan, "minimal_root": False, "fresh_proc": False, "readonly_root": False},
        ]
    none = {"ns": False, "userns": False, "netns": False, "readonly_root": False, "fresh_proc": False,
            "minimal_root": False, "tmpfs_mb": 0, "setuid": None}
    if is_root:
        plans.append({**none, "setuid": uid})
    plans.append(none)
    return plans


def _base_plan() -> dict:
    return {"tmpfs_mb": 64, "fresh_proc": True, "readonly_root": True, "minimal_root": True, "expose": exposed_paths()}


def describe(plan: dict) -> dict:
    """What a plan protects, as reported by `SandboxPool.protections`."""
    p = plan
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


# ---------------------------------------------------------------- setting it up


def setup_namespaces(plan: dict) -> None:
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
        build_minimal_root(plan, tmp_opts)
        return
    if plan["readonly_root"]:
        iso.make_tree_readonly("/")
    iso.mount("tmpfs", "/tmp", "tmpfs", iso.MS_NOSUID | iso.MS_NODEV, tmp_opts)


ROOT_DIRS = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32")
ETC_FILES = ("ld.so.cache", "ld.so.conf", "localtime", "passwd", "group", "nsswitch.conf", "hosts", "mime.types")
DEV_FILES = ("null", "zero", "full", "random", "urandom")


def build_minimal_root(plan: dict, tmp_opts: str) -> None:
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


def exposed_paths(extra: tuple[str, ...] = ()) -> list[str]:
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


def cpu_rlimits(limits: dict) -> tuple[int, int]:
    """RLIMIT_CPU (soft, hard) of a program and of every process it forks: ceil(cpu_s), and one second more.

    For the program itself this is only a backstop: the worker ends it at exactly `cpu_s` (RLIMIT_CPU counts
    whole seconds of tick-sampled CPU time, which runs ahead of the exact runtime on a busy machine). As pid 1
    of its pid namespace it never gets the soft limit's SIGXCPU (the kernel drops signals a namespace init has
    no handler for); the hard limit's SIGKILL does reach it. Processes it forks get SIGXCPU at the soft limit.
    """
    soft = max(1, math.ceil(limits["cpu_s"]))
    return soft, soft + 1


def enter_child(plan: dict, limits: dict, fds: dict) -> None:
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
    iso.set_rlimit(resource.RLIMIT_CPU, *cpu_rlimits(limits))
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
        block_sockets()
    sys.stdin = open(0, "r", closefd=False)
    sys.stdout = open(1, "w", closefd=False)
    sys.stderr = open(2, "w", closefd=False)


def block_sockets() -> None:
    """Fallback when no network namespace is available: best effort, Python-level only."""
    import socket

    def refuse(*args, **kwargs):
        raise PermissionError("network access is disabled in the sandbox")

    socket.socket = refuse  # type: ignore[assignment]
    socket.create_connection = refuse  # type: ignore[assignment]
    socket.socketpair = refuse  # type: ignore[assignment]
    sys.modules["_socket"] = None  # type: ignore[assignment]


def sweep_descendants() -> None:
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


def run_in_a(plan: dict, limits: dict, payload: dict, fds: dict) -> None:
    """Body of the intermediate process A; never returns."""
    code = 0
    try:
        os.setsid()
        iso.prctl(iso.PR_SET_PDEATHSIG, signal.SIGKILL)
        if plan["ns"]:
            setup_namespaces(plan)
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
                enter_child(plan, limits, fds)
                from densecode.sandbox import _child

                _child.main(payload)
            finally:
                os._exit(70)
        os.write(fds["stat_w"], f"{pid_b}\n".encode())
        for key in ("out_w", "err_w", "res_w", "rep_r", "stdin"):
            os.close(fds[key])
        _, status, usage = os.wait4(pid_b, 0)
        if not plan["ns"]:
            sweep_descendants()
        os.write(fds["stat_w"], f"{status} {usage.ru_utime + usage.ru_stime:.4f}\n".encode())
    except BaseException as exc:  # noqa: BLE001
        try:
            os.write(fds["stat_w"], f"setup-error {type(exc).__name__}: {exc}\n".encode())
        except OSError:
            pass
        code = 71
    os._exit(code)


def jail_current_process(plan: dict) -> int:
    """Fast path (root): put the WORKER itself in its own mount + network namespace and minimal root.

    Done once per worker; each program then only needs a new pid namespace and
    one fork. Returns an fd of the worker's own pid namespace, used to reset
    `pid_ns_for_children` after each fork.
    """
    pidns_fd = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
    iso.unshare(iso.CLONE_NEWNS | iso.CLONE_NEWNET)
    iso.mount(None, "/", None, iso.MS_REC | iso.MS_PRIVATE)
    build_minimal_root(plan, f"size={plan['tmpfs_mb']}m,nr_inodes=4096,mode=1777")
    return pidns_fd


def clear_tmp() -> None:
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


def fork_jailed(plan: dict, limits: dict, payload: dict, fds: dict, parent_fds: tuple, pidns_fd: int) -> int:
    """Jail mode: fork the program straight into a new pid namespace (it becomes its pid 1).

    `pidns_fd` is the worker's own pid namespace, restored for the worker's later forks.
    """
    iso.unshare(iso.CLONE_NEWPID)
    try:
        pid_b = os.fork()
    except BaseException:
        iso.setns(pidns_fd, iso.CLONE_NEWPID)
        raise
    if pid_b == 0:
        try:
            os.setsid()
            iso.prctl(iso.PR_SET_PDEATHSIG, signal.SIGKILL)
            for fd in parent_fds:
                os.close(fd)
            enter_child(plan, limits, fds)
            from densecode.sandbox import _child

            _child.main(payload)
        finally:
            os._exit(70)
    iso.setns(pidns_fd, iso.CLONE_NEWPID)  # later forks of the worker stay in its own pid namespace
    return pid_b


def kill_program(pid_b: int | None, plan: dict) -> None:
    """SIGKILL the program and everything it started."""
    if pid_b is None:
        return
    try:
        os.kill(pid_b, signal.SIGKILL)  # pid-ns init: the kernel kills the whole namespace
    except ProcessLookupError:
        pass
    if not plan["ns"]:
        try:
            os.killpg(pid_b, signal.SIGKILL)  # B's group; A then sweeps the detached rest
        except (ProcessLookupError, PermissionError):
            pass
