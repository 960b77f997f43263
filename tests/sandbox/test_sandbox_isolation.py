"""Isolation between responses on the fork-server path: consecutive programs forked from one warm worker (which holds
preloaded modules and a judge's harness, with its heap frozen for the GC) and programs running side by side.

A hostile response tampers with everything it shares an ancestry with -- builtins, preloaded modules, the preloaded
harness, the child harness, the GC, /tmp -- and leaves a thread and a detached child that keep forging result
records. The next response in the same worker must see a pristine interpreter and get its own verdict; a response
running beside it must not see its files or processes; nothing of it may outlive its run.
"""

from __future__ import annotations

import os
import time

import pytest

from densecode.sandbox import AssertJob, Limits, SandboxPool, StdioJob

pytestmark = pytest.mark.timeout(180)

HARNESS = "VALUE = 'original'\n\ndef main(x):\n    return x + 1\n"

TAMPER = (
    "import builtins, gc, json, math, os, signal, sys, threading, time\n"
    "import densecode.sandbox._child as child\n"
    "import isolation_probe_harness as h\n"
    "FORGED = b'{\"t\":\"probe\",\"i\":0,\"j\":0,\"v\":2}\\n{\"t\":\"probe\",\"i\":1,\"j\":0,\"v\":3}\\n{\"t\":\"done\"}\\n'\n"
    "def forge():\n"
    "    while True:\n"
    "        for fd in range(3, 64):\n"
    "            try:\n"
    "                os.write(fd, FORGED)\n"
    "            except OSError:\n"
    "                pass\n"
    "        time.sleep(0.005)\n"
    "threading.Thread(target=forge, daemon=False).start()\n"
    "if os.fork() == 0:\n"
    "    os.setsid()\n"
    "    signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "    forge()\n"
    # Tampering after the thread and the fork: threading.Thread.start itself needs a working len().
    "builtins.len = lambda x: 0\n"
    "builtins.sorted = lambda *a, **k: [42]\n"
    "builtins.AssertionError = type('Nope', (Exception,), {})\n"
    "json.dumps = lambda *a, **k: 'tampered'\n"
    "math.sqrt = lambda x: -1.0\n"
    "h.VALUE = 'tampered'\n"
    "h.main = lambda x: 'tampered'\n"
    "child._send = lambda rec: None\n"
    "sys.modules['collections'] = None\n"
    "gc.unfreeze()\n"
    "gc.collect()\n"
    "open('/tmp/left_behind.txt', 'w').write('x')\n"
    "os.makedirs('/tmp/dir_left_behind', exist_ok=True)\n"
    "def f(x):\n"
    "    return x + 1\n"
)
TESTS = ["assert f(1) == 2", "assert f(2) == 3"]

# The honest response's own checks: every one holds only in a pristine interpreter.
PRISTINE_CODE = (
    "import builtins, collections, gc, json, math, os, threading\n"
    "import isolation_probe_harness as h\n"
    "def f(x):\n"
    "    return x + 1\n"
)
PRISTINE_TESTS = [
    "assert len([1, 2, 3]) == 3",
    "assert sorted([3, 1, 2]) == [1, 2, 3]",
    "assert builtins.AssertionError.__name__ == 'AssertionError'",
    "assert json.dumps([1]) == '[1]'",
    "assert math.sqrt(16) == 4.0",
    "assert h.VALUE == 'original'",
    "assert h.main(1) == 2",
    "assert collections.Counter('aab')['a'] == 2",
    "assert os.listdir('/tmp') == []",
    "assert threading.active_count() == 1",
    "assert gc.get_freeze_count() > 0",  # the worker's frozen heap, though the tamperer unfroze its own copy
    "assert f(1) == 2",
]


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    harness = tmp_path_factory.mktemp("harness") / "probe_harness.py"
    harness.write_text(HARNESS)
    # One worker: every program below is forked from the same warm, preloaded worker, one after another.
    with SandboxPool(max_workers=1, limits=Limits(timeout_s=10.0, cpu_s=2.0, memory_mb=512, max_procs=16)) as p:
        p.require_preload(f"isolation_probe_harness={harness}")
        [warm] = p.run([AssertJob("import isolation_probe_harness as h", ["assert h.main(1) == 2"])])
        assert warm.outcome == "passed", warm
        prot = p.protections
        if not prot["pid_namespace"]:
            pytest.skip(f"no pid namespace for the sandbox on this machine ({prot})")
        yield p


def _descendants(root: int) -> set[int]:
    table = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    table[int(name)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    out, frontier = set(), {root}
    while frontier:
        frontier = {pid for pid, ppid in table.items() if ppid in frontier} - out
        out |= frontier
    return out


def test_a_tampering_response_changes_nothing_for_the_next_one(pool):
    wrong = "def f(x):\n    return 0\n"
    results = pool.run([AssertJob(TAMPER, TESTS), AssertJob(PRISTINE_CODE, PRISTINE_TESTS),
                        AssertJob(TAMPER, TESTS), AssertJob(wrong, TESTS),
                        AssertJob(TAMPER, TESTS), AssertJob(PRISTINE_CODE, PRISTINE_TESTS)])
    for honest in (results[1], results[5]):
        failed = [t for t, ok in zip(PRISTINE_TESTS, honest.per_test) if not ok]
        assert honest.outcome == "passed" and not failed, (honest.outcome, failed, honest.exc_message)
    # The correct values forged by the previous response's thread and daemon never reach the next verdict.
    assert results[3].outcome == "wrong_answer" and results[3].per_test == [False, False]


def test_nothing_of_a_response_outlives_its_run(pool):
    [r] = pool.run([AssertJob(TAMPER, TESTS)])
    assert r.outcome != "timeout", r  # ended with its program, not at the wall limit
    worker = next(w for w in pool._workers if w is not None)
    assert _descendants(worker.popen.pid) == set(), "a thread or detached child of the response is still alive"
    time.sleep(0.3)  # a survivor would have forked or written by now
    assert _descendants(worker.popen.pid) == set()
    [clean] = pool.run([AssertJob(PRISTINE_CODE, PRISTINE_TESTS)])
    assert clean.outcome == "passed", (clean.per_test, clean.exc_message)


def test_the_preloaded_harness_is_a_private_copy_in_each_program(pool):
    """The harness the worker holds is imported, not re-read: changing it in one program is invisible to the next."""
    set_it = "import isolation_probe_harness as h\nh.VALUE = 'mine'\nprint(h.VALUE)\n"
    read_it = "import isolation_probe_harness as h\nprint(h.VALUE, h.__file__ is not None)\n"
    a, b = pool.run([StdioJob(set_it, [("", "mine\n")]), StdioJob(read_it, [("", "original True\n")])])
    assert a.outcome == "passed" and b.outcome == "passed", (a.stdout, b.stdout)


def test_side_by_side_responses_cannot_see_each_other():
    """Two workers: one response holds a secret in its /tmp and its memory while the other searches for it."""
    hold = (
        "import os, time\n"
        "secret = 'isolation-' + 'secret-' + str(7 * 6)\n"
        "open('/tmp/secret.txt', 'w').write(secret)\n"
        "time.sleep(1.5)\n"
        "def f(x):\n    return x + 1\n"
    )
    search = (
        "import glob, os, time\n"
        "def found():\n"
        "    hits = []\n"
        "    end = time.time() + 1.0\n"
        "    while time.time() < end:\n"
        "        for path in glob.glob('/tmp/**', recursive=True) + glob.glob('/proc/*/*'):\n"
        "            try:\n"
        "                if 'secret-42' in open(path, errors='replace').read():\n"
        "                    hits.append(path)\n"
        "            except OSError:\n"
        "                pass\n"
        "        time.sleep(0.05)\n"
        "    return sorted(set(hits)) + os.listdir('/tmp')\n"
    )
    with SandboxPool(max_workers=2, limits=Limits(timeout_s=10.0, cpu_s=3.0)) as pool:
        pool.run([AssertJob("x = 1", ["assert x == 1"])] * 2)  # both workers up, so the two runs overlap
        holder, searcher = pool.run([AssertJob(hold, ["assert f(1) == 2"]), AssertJob(search, ["assert found() == []"])])
    assert holder.outcome == "passed", holder
    assert searcher.outcome == "passed", (searcher.outcome, searcher.exc_message, searcher.details)


def test_a_harness_that_cannot_load_fails_the_start_clearly(tmp_path):
    from densecode.sandbox import SandboxError

    with pytest.raises(ValueError, match="name=/path/to/file.py"):
        SandboxPool(preload=("broken=/some/harness.txt",))
    with SandboxPool(max_workers=1) as pool:
        pool.require_preload(f"missing_harness={tmp_path / 'missing.py'}")
        with pytest.raises(SandboxError, match="failed to start"):
            pool.run([AssertJob("x = 1", ["assert x == 1"])])
