"""Kernel-level isolation primitives used by the sandbox worker (Linux only).

Python 3.11 has no `os.unshare`/`mount`, so they are called through ctypes.
Everything here runs in the trusted worker or in the intermediate process that
prepares a sandbox; nothing here is reachable by the candidate once it runs.
"""

from __future__ import annotations

import ctypes
import os
import resource

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000

MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 1 << 18

AT_FDCWD = -100
AT_RECURSIVE = 0x8000
MOUNT_ATTR_RDONLY = 0x1
MOUNT_ATTR_NOSUID = 0x2
SYS_mount_setattr = 442  # same number on x86_64 and aarch64 (new syscall table)
SYS_capset = {"x86_64": 126, "aarch64": 91}.get(os.uname().machine)

PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38
PR_SET_CHILD_SUBREAPER = 36

# dlopen(NULL): the interpreter's own symbol scope, libc included. Not ctypes.util.find_library, which imports
# subprocess and threading into the worker: threading's at-fork handler and the larger heap cost every forked
# program ~0.6 ms of CPU.
_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


class _MountAttr(ctypes.Structure):
    _fields_ = [
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    ]


def _check(ret: int, what: str) -> None:
    if ret < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def unshare(flags: int) -> None:
    _check(_libc.unshare(ctypes.c_int(flags)), "unshare")


def setns(fd: int, nstype: int) -> None:
    _check(_libc.setns(ctypes.c_int(fd), ctypes.c_int(nstype)), "setns")


def mount(source: str | None, target: str, fstype: str | None, flags: int = 0, data: str | None = None) -> None:
    enc = lambda s: s.encode() if s is not None else None
    _check(_libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)), f"mount {target}")


def make_tree_readonly(path: str = "/") -> None:
    """Recursively mark every mount under `path` read-only + nosuid (this mount namespace only)."""
    attr = _MountAttr(MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID, 0, MS_PRIVATE, 0)
    ret = _libc.syscall(
        ctypes.c_long(SYS_mount_setattr),
        ctypes.c_int(AT_FDCWD),
        ctypes.c_char_p(path.encode()),
        ctypes.c_uint(AT_RECURSIVE),
        ctypes.byref(attr),
        ctypes.c_size_t(ctypes.sizeof(attr)),
    )
    _check(ret, "mount_setattr")


def prctl(option: int, arg: int) -> None:
    _check(_libc.prctl(ctypes.c_int(option), ctypes.c_ulong(arg), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0)), "prctl")


def drop_all_capabilities() -> None:
    """capset(2) with empty sets: needed where the child is root inside its own user namespace."""
    if SYS_capset is None:
        raise OSError("capset syscall number unknown for this architecture")

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]

    header = Header(0x20080522, 0)
    data = (Data * 2)()
    _check(_libc.syscall(ctypes.c_long(SYS_capset), ctypes.byref(header), ctypes.byref(data)), "capset")


def write_id_maps(inside: int, outside_uid: int, outside_gid: int) -> None:
    with open("/proc/self/setgroups", "w") as f:
        f.write("deny")
    with open("/proc/self/uid_map", "w") as f:
        f.write(f"{inside} {outside_uid} 1")
    with open("/proc/self/gid_map", "w") as f:
        f.write(f"{inside} {outside_gid} 1")


def set_rlimit(which: int, soft: int, hard: int | None = None) -> None:
    hard = soft if hard is None else hard
    try:
        resource.setrlimit(which, (soft, hard))
    except (ValueError, OSError):
        # Cannot raise above an existing hard limit: keep the lower of the two.
        cur_soft, cur_hard = resource.getrlimit(which)
        if cur_hard != resource.RLIM_INFINITY:
            resource.setrlimit(which, (min(soft, cur_hard), cur_hard))
