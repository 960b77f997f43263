"""The pool's side of one worker process: start it, talk JSON lines to it, stop it.

Each worker is a fresh small interpreter (not a fork of the trainer, which holds torch and
threads) started with `-I` and a scrubbed environment; `_worker.py` is what runs in it.
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import time
from dataclasses import dataclass, field

from densecode.sandbox.jobs import SandboxError
from densecode.sandbox.runs import Unit

_PKG_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The worker imports only what it runs: the `densecode` and `densecode.sandbox` packages are registered as bare
# namespaces, so their __init__ files (the pool, the defaults, threading) are not loaded into the process every
# program is forked from (a smaller heap and no threading at-fork handler: less CPU per forked program).
_BOOT = (
    "import sys, types\n"
    f"for _n, _p in (('densecode', {os.path.join(_PKG_ROOT, 'densecode')!r}), "
    f"('densecode.sandbox', {os.path.join(_PKG_ROOT, 'densecode', 'sandbox')!r})):\n"
    "    _m = types.ModuleType(_n); _m.__path__ = [_p]; sys.modules[_n] = _m\n"
    "from densecode.sandbox._worker import main\n"
    "main()\n"
)
_WORKER_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "PYTHONDONTWRITEBYTECODE": "1",
}
START_TIMEOUT_S = 60.0  # a worker probes its isolation before it says hello: slow on a loaded machine


@dataclass
class WorkerProc:
    slot: int
    popen: subprocess.Popen
    to_worker: int
    from_worker: int
    buf: bytearray = field(default_factory=bytearray)
    protections: dict = field(default_factory=dict)
    unit: Unit | None = None  # the run it is busy with


def spawn_worker(slot: int, uid: int, preload: tuple[str, ...], isolation: str) -> WorkerProc:
    """Launch a worker process; it is not usable until `await_hello` has read its start-up message."""
    p2w_r, p2w_w = os.pipe()
    w2p_r, w2p_w = os.pipe()
    debug = os.environ.get("DENSECODE_SANDBOX_DEBUG") == "1"
    popen = subprocess.Popen(
        [sys.executable, "-I", "-c", _BOOT, str(p2w_r), str(w2p_w), str(slot), str(uid), ",".join(preload), isolation],
        pass_fds=(p2w_r, w2p_w),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=None if debug else subprocess.DEVNULL,
        env=_WORKER_ENV,
        close_fds=True,
    )
    os.close(p2w_r)
    os.close(w2p_w)
    return WorkerProc(slot, popen, p2w_w, w2p_r)


def await_hello(w: WorkerProc, deadline: float) -> None:
    """Wait for a spawned worker's start-up message (it has probed and set up its isolation by then)."""
    hello = _read_message(w, timeout=max(0.0, deadline - time.monotonic()))
    if hello is None or hello.get("op") != "hello":
        stop_worker(w)
        raise SandboxError("sandbox worker failed to start; rerun with DENSECODE_SANDBOX_DEBUG=1 to see its stderr")
    w.protections = hello["protections"]
    os.set_blocking(w.from_worker, False)


def _read_message(w: WorkerProc, timeout: float) -> dict | None:
    """Blocking read of one line from a worker (used only at start-up)."""
    deadline = time.monotonic() + timeout
    while b"\n" not in w.buf:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        with selectors.DefaultSelector() as sel:
            sel.register(w.from_worker, selectors.EVENT_READ)
            if not sel.select(timeout=remaining):
                return None
        chunk = os.read(w.from_worker, 1 << 16)
        if not chunk:
            return None
        w.buf += chunk
    line, rest = bytes(w.buf).split(b"\n", 1)
    w.buf = bytearray(rest)
    return json.loads(line)


def stop_worker(w: WorkerProc) -> None:
    """Close its pipes and SIGKILL it (its programs die by PDEATHSIG / with their pid namespace)."""
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


def send_message(w: WorkerProc, msg: dict) -> bool:
    """Write one JSON line to the worker; False if it is gone."""
    data = (json.dumps(msg, separators=(",", ":")) + "\n").encode()
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(w.to_worker, view):]
    except OSError:
        return False
    return True


def read_messages(w: WorkerProc) -> list[dict] | None:
    """The complete messages a busy worker has sent so far ([] if none yet); None when it has died."""
    try:
        chunk = os.read(w.from_worker, 1 << 20)
    except BlockingIOError:
        return []
    except OSError:
        chunk = b""
    if not chunk:
        return None
    w.buf += chunk
    if b"\n" not in chunk:
        return []  # a large message still arriving
    *lines, rest = bytes(w.buf).split(b"\n")
    w.buf = bytearray(rest)
    # The worker's own framing: trusted structure, the child's text only inside strings.
    return [json.loads(line) for line in lines]
