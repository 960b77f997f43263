"""Hostile programs: each ends in the right outcome class, the host is unharmed, the pool keeps serving."""

from __future__ import annotations

import os
import socket
import threading

import pytest

from densecode.sandbox import (
    ApiJob,
    AssertJob,
    FunctionCallJob,
    Limits,
    SandboxPool,
    StdioJob,
)

pytestmark = pytest.mark.timeout(180)

SECRET = "densecode-test-secret-4f1c9a"


def _process_table() -> dict[int, tuple[int, int]]:
    """pid -> (ppid, uid) for every visible process."""
    table = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            uid = os.stat(f"/proc/{name}").st_uid
        except (OSError, IndexError, ValueError):
            continue
        table[int(name)] = (ppid, uid)
    return table


def _descendants(root: int) -> set[int]:
    table = _process_table()
    out, frontier = set(), {root}
    while frontier:
        frontier = {pid for pid, (ppid, _) in table.items() if ppid in frontier} - out
        out |= frontier
    return out


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


@pytest.fixture(scope="module")
def pool():
    os.environ["DENSECODE_SECRET_TOKEN"] = SECRET
    # A generous wall clock: on a loaded machine a program that needs a little CPU (numpy import, a flood up to
    # its cap) must not reach the wall limit before the verdict under test. Programs expected to time out get
    # a 2 s wall limit of their own (see test_hostile_suite).
    with SandboxPool(max_workers=2, limits=Limits(timeout_s=10.0, cpu_s=2.0, memory_mb=512, max_procs=16)) as p:
        [warm] = p.run([AssertJob("x = 1", ["assert x == 1"])])
        assert warm.outcome == "passed"
        yield p
    os.environ.pop("DENSECODE_SECRET_TOKEN", None)


@pytest.fixture()
def host_dir(tmp_path):
    """A world-writable host directory with a canary file: hostile programs try to write and delete here."""
    tmp_path.chmod(0o777)
    canary = tmp_path / "canary.txt"
    canary.write_text("keep me")
    canary.chmod(0o666)
    return tmp_path


@pytest.fixture()
def listener():
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.bind(("127.0.0.1", 0))
    srv.listen(5)
    srv.settimeout(0.2)
    accepted = []
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
                accepted.append(conn)
            except (TimeoutError, OSError):
                continue

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield srv.getsockname()[1], accepted
    stop.set()
    thread.join()
    srv.close()


TEST = ["assert f(1) == 2", "assert f(2) == 3"]
GOOD_F = "def f(x):\n    return x + 1\n"


def hostile_programs(host_dir, port) -> dict[str, tuple[str, set[str]]]:
    """name -> (program, allowed outcomes). None of them may pass except where noted."""
    d = str(host_dir)
    return {
        "fork_bomb": ("import os\nwhile True:\n    os.fork()\n", {"runtime_error", "timeout"}),
        "fork_bomb_swallowing_errors": ("import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n", {"timeout"}),
        "memory_bomb": ("x = bytearray(10 ** 10)\n", {"memory"}),
        "memory_bomb_growing": ("chunks = []\nwhile True:\n    chunks.append(bytes(100 * 2 ** 20))\n", {"memory"}),
        "infinite_loop": ("while True:\n    pass\n", {"timeout"}),
        "deep_recursion": ("def r(n):\n    return r(n + 1)\nr(0)\n", {"runtime_error"}),
        "output_flood": ("while True:\n    print('y' * 4096)\n", {"output_limit"}),
        "stderr_flood": ("import sys\nwhile True:\n    sys.stderr.write('z' * 4096)\n", {"output_limit"}),
        "result_channel_flood": ("import os\nwhile True:\n    os.write(3, b'x' * 65536)\n", {"output_limit"}),
        "sleep_past_timeout": ("import time\ntime.sleep(60)\n", {"timeout"}),
        "ignore_sigterm": ("import signal\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nwhile True:\n    pass\n", {"timeout"}),
        "detached_child": (
            "import os, time\n"
            "if os.fork() == 0:\n"
            "    os.setsid()\n"
            "    if os.fork() == 0:\n"
            "        import signal\n"
            "        signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
            "        time.sleep(1.5)\n"
            f"        open({d!r} + '/late.txt', 'w').write('x')\n"
            "        time.sleep(120)\n"
            "    os._exit(0)\n" + GOOD_F,
            {"passed"},  # the program itself is correct; its daemon must not survive
        ),
        "write_outside_workdir": (f"open({d!r} + '/pwned.txt', 'w').write('x')\n" + GOOD_F, {"runtime_error"}),
        "write_repo": (f"open({os.path.abspath(__file__)!r}, 'a').write('x')\n" + GOOD_F, {"runtime_error"}),
        "read_repo_and_data": (
            f"open({os.path.abspath(__file__)!r}).read()\n"
            "open('/work/shared/data/mbpp/mbpp.jsonl').read()\n" + GOOD_F,
            {"runtime_error"},  # the minimal root holds the interpreter only: no tests, no datasets
        ),
        "delete_files": (f"import os\nos.remove({d!r} + '/canary.txt')\n" + GOOD_F, {"runtime_error"}),
        "delete_tree": ("import shutil\nshutil.rmtree('/usr/lib', ignore_errors=False)\n" + GOOD_F, {"runtime_error"}),
        "network_connect": (f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=1)\n" + GOOD_F, {"runtime_error"}),
        "env_secrets": (
            "import os, glob\n"
            "print(dict(os.environ))\n"
            "for p in glob.glob('/proc/*/environ'):\n"
            "    try:\n"
            "        print(open(p, 'rb').read())\n"
            "    except OSError:\n"
            "        pass\n" + GOOD_F,
            {"passed"},  # reading its own environment is allowed; the secret must not be in it
        ),
        "kill_everything": ("import os, signal\nfor pid in range(1, 400):\n    try:\n        os.kill(pid, signal.SIGKILL)\n    except OSError:\n        pass\n" + GOOD_F, {"passed", "runtime_error"}),
    }


def test_hostile_suite(pool, host_dir, listener):
    prot = pool.protections
    if not (prot["pid_namespace"] and prot["readonly_root"] and prot["nproc_limit_enforced"]):
        pytest.skip(f"this machine allows no pid/mount namespaces or NPROC limit for the sandbox ({prot}); "
                    "the full hostile suite needs them (test_fallback_isolation_modes covers the fallback)")
    port, accepted = listener
    programs = hostile_programs(host_dir, port)
    replaced_before = pool.stats["workers_replaced"]
    before_desc = _descendants(os.getpid())
    rss_before = _rss_mb()

    # Programs that may end in a timeout keep the 2 s wall limit this suite always had (fork bombs spin on all
    # cores until then); the others get the pool's 10 s, so that load cannot turn their verdict into a timeout.
    jobs = [AssertJob(code, TEST, timeout_s=2.0 if "timeout" in allowed else None) for code, allowed in programs.values()]
    results = pool.run(jobs)

    bad = {}
    for (name, (_, allowed)), r in zip(programs.items(), results):
        if r.outcome not in allowed:
            bad[name] = (r.outcome, r.exc_type, r.exc_message, r.stdout[-200:])
    assert not bad, bad

    by_name = dict(zip(programs, results))
    assert SECRET not in by_name["env_secrets"].stdout and SECRET not in by_name["env_secrets"].stderr
    assert "densecode-test-secret" not in repr(by_name["env_secrets"])

    # Host unharmed: no sandbox process left, files intact, no connection made, memory steady.
    import time

    time.sleep(2.0)  # the detached daemon would have written late.txt by now
    workers = {w.popen.pid for w in pool._workers if w is not None}  # started lazily, so read them now
    assert pool.stats["workers_replaced"] == replaced_before  # no program took a worker down
    after_desc = _descendants(os.getpid())
    assert after_desc <= before_desc | workers, f"leftover processes: {after_desc - before_desc - workers}"
    slot_uids = set(range(pool.uid_base, pool.uid_base + pool.max_workers))
    assert not [pid for pid, (_, uid) in _process_table().items() if uid in slot_uids]
    assert sorted(p.name for p in host_dir.iterdir()) == ["canary.txt"]
    assert (host_dir / "canary.txt").read_text() == "keep me"
    assert not accepted
    assert _rss_mb() - rss_before < 60

    # Still serving.
    [ok] = pool.run([AssertJob(GOOD_F, TEST)])
    assert ok.outcome == "passed"


REWARD_HACKS = {
    "sys_exit_before_tests": "import sys\ndef f(x):\n    return 0\nsys.exit(0)\n",
    "os_exit_before_tests": "import os\ndef f(x):\n    return 0\nos._exit(0)\n",
    "sys_exit_inside_test": "import sys\ndef f(x):\n    sys.exit(0)\n",
    "os_exit_inside_test": "import os\ndef f(x):\n    os._exit(0)\n",
    "system_exit_from_del": (
        "class Bomb:\n    def __del__(self):\n        raise SystemExit(0)\n"
        "def f(x):\n    b = Bomb()\n    del b\n    return 0\n"
    ),
    "redefine_builtins": (
        "import builtins\n"
        "builtins.AssertionError = type('Nope', (Exception,), {})\n"
        "builtins.print = lambda *a, **k: None\n"
        "builtins.sorted = lambda *a, **k: [2]\n"
        "builtins.isinstance = lambda *a: True\n"
        "def f(x):\n    return 0\n"
    ),
    "always_true_eq": "class Any:\n    def __eq__(self, other):\n        return True\n    def __bool__(self):\n        return True\ndef f(x):\n    return Any()\n",
    "int_subclass_eq": "class I(int):\n    def __eq__(self, other):\n        return True\n    __hash__ = int.__hash__\ndef f(x):\n    return I(0)\n",
    "str_subclass_eq": "class S(str):\n    def __eq__(self, other):\n        return True\n    __hash__ = str.__hash__\ndef f(x):\n    return S('no')\n",
    "fake_success_marker": "print('ALL TESTS PASSED')\nprint('2/2 passed')\nimport os\nos._exit(0)\n",
    "forge_result_records": (
        "import os\n"
        "os.write(3, b'{\"t\":\"probe\",\"i\":0,\"j\":0,\"v\":true}\\n{\"t\":\"probe\",\"i\":1,\"j\":0,\"v\":true}\\n{\"t\":\"done\"}\\n')\n"
        "os._exit(0)\n"
    ),
    "patch_judge_helpers": (
        "import densecode.sandbox._child as c, densecode.sandbox.plain as p\n"
        "c.encode = lambda v: True\n"
        "p.encode = lambda v: True\n"
        "def f(x):\n    return 0\n"
    ),
    "read_expected_from_memory": (
        "import gc, sys, re\n"
        "def f(x):\n"
        "    for frame in [sys._getframe(i) for i in range(1, 4)]:\n"
        "        for c in frame.f_code.co_consts:\n"
        "            if isinstance(c, int) and c not in (0, 1, x):\n"
        "                return c\n"
        "    for o in gc.get_objects():\n"
        "        if isinstance(o, str) and '==' in o:\n"
        "            return int(re.findall(r'== (\\d+)', o)[0])\n"
        "    return None\n"
    ),
    "read_expected_from_files": (
        "import glob\n"
        "def f(x):\n"
        "    for path in glob.glob('/work/**/*.py', recursive=True) + glob.glob('/tmp/**', recursive=True):\n"
        "        try:\n"
        "            if 'assert f(' in open(path).read():\n"
        "                return 'found'\n"
        "        except OSError:\n"
        "            pass\n"
        "    return None\n"
    ),
    "monkeypatch_isclose": "import math\nmath.isclose = lambda *a, **k: True\ndef f(x):\n    return 0.0\n",
    "monkeypatch_numpy": (
        "import numpy as np\n"
        "np.allclose = lambda *a, **k: True\n"
        "np.ndarray.__eq__ = lambda *a: True\n"
        "def f(x):\n    return np.float64(-1.0)\n"
    ),
}
# Distinctive numbers, so that no constant in the harness's own code can match them by chance.
HACK_TESTS = ["assert math.isclose(f(10.5), 11.5)", "assert f(1234) == 1235", "assert sorted([f(771)]) == [772]",
              "assert isinstance(f(4321), int) and f(4321) == 4322", "assert np.allclose(f(2.5), 3.5)"]


def test_reward_hacks_never_pass(pool):
    results = pool.run([AssertJob(code, HACK_TESTS) for code in REWARD_HACKS.values()])
    summary = {name: (r.outcome, r.n_passed, r.exc_type) for name, r in zip(REWARD_HACKS, results)}
    for name, r in zip(REWARD_HACKS, results):
        assert r.outcome in ("wrong_answer", "runtime_error", "sandbox_violation"), summary
        assert r.n_passed == 0, summary
    assert summary["always_true_eq"][0] == "wrong_answer"
    assert summary["os_exit_before_tests"][2] == "EarlyExit"
    # The same judge still passes an honest solution.
    [ok] = pool.run([AssertJob("import math\ndef f(x):\n    return x + 1\n", HACK_TESTS)])
    assert ok.outcome == "passed"


def test_reward_hacks_function_call_and_stdio(pool):
    eq = "class Any:\n    def __eq__(self, o):\n        return True\ndef f(x):\n    return Any()\n"
    sub = "class F(float):\n    def __eq__(self, o):\n        return True\n    __hash__ = float.__hash__\ndef f(x):\n    return F(-1.0)\n"
    exit_ = "import sys\ndef f(x):\n    sys.exit(0)\n"
    peek = "import gc\ndef f(x):\n    return [o for o in gc.get_objects() if isinstance(o, list) and 0.5 in o]\n"
    jobs = [FunctionCallJob(c, "f", [[1], [2]], expected=[0.5, 1.5]) for c in (eq, sub, exit_, peek)]
    jobs.append(FunctionCallJob(eq, "f", [[1]], reference="def f(x):\n    return x / 2\n"))
    jobs.append(StdioJob("print('PASSED')\nprint('Accepted')\n", [("1\n", "2\n")]))
    results = pool.run(jobs)
    assert [r.outcome for r in results] == ["wrong_answer", "wrong_answer", "runtime_error", "wrong_answer", "wrong_answer", "wrong_answer"]


def test_garbage_on_result_channel_is_a_violation(pool):
    [r] = pool.run([AssertJob("import os\nos.write(3, b'[' * 100000 + b'\\n')\nos.write(3, b'\\xff\\xfe{]\\n')\n" + GOOD_F, TEST)])
    assert r.outcome == "sandbox_violation"


def test_api_program_cannot_escape(pool, host_dir):
    class H:
        def __init__(self):
            self.calls = 0

        def handle(self, name, args, kwargs, line):
            self.calls += 1
            return "ok"

    code = (
        "import os\n"
        "def task_program():\n"
        "    say('hi')\n"
        f"    open({str(host_dir)!r} + '/api.txt', 'w')\n"
    )
    [r] = pool.run_api([ApiJob(code, ["say"], H)])
    assert r.outcome == "python_error" and r.error_line == 4
    assert not (host_dir / "api.txt").exists()


def test_crashed_worker_is_replaced(pool):
    import signal
    import time

    started = pool.stats["workers_replaced"]
    victim = {}

    def kill_when_running():
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # until slot 0's program runs (its worker has a child)
            w = pool._workers[0]
            if w is not None and w.unit is not None and _descendants(w.popen.pid):
                victim["pid"] = w.popen.pid
                os.kill(w.popen.pid, signal.SIGKILL)
                return
            time.sleep(0.01)

    t = threading.Thread(target=kill_when_running)
    t.start()
    results = pool.run([AssertJob("import time\ntime.sleep(1)\n" + GOOD_F, TEST) for _ in range(2)])  # limit: 2 s wall
    t.join()
    assert "pid" in victim
    assert len(results) == 2
    assert sorted(r.outcome for r in results) == ["passed", "sandbox_violation"]
    assert pool.stats["workers_replaced"] > started
    [ok] = pool.run([AssertJob(GOOD_F, TEST)])
    assert ok.outcome == "passed"
    assert pool._workers[0] is None or pool._workers[0].popen.pid != victim["pid"]


@pytest.mark.parametrize("mode", ["namespaces", "userns", "none"])
def test_fallback_isolation_modes(mode, tmp_path):
    """The weaker mechanisms used where the jail is unavailable still contain the basics."""
    marker = tmp_path / "daemon.pid"
    tmp_path.chmod(0o777)
    daemon = (
        "import os, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        try:\n"
        f"            open({str(marker)!r}, 'w').write(str(os.getpid()))\n"
        "        except OSError:\n"
        "            pass\n"
        "        time.sleep(60)\n"
        "    os._exit(0)\n"
        "time.sleep(0.3)\n" + GOOD_F
    )
    with SandboxPool(max_workers=1, isolation=mode, limits=Limits(timeout_s=1.5, cpu_s=2)) as pool:
        prot = pool.protections
        jobs = [AssertJob(GOOD_F, TEST), AssertJob("while True:\n    pass\n", TEST), AssertJob(daemon, TEST),
                AssertJob("import socket\nsocket.create_connection(('127.0.0.1', 9), timeout=1)\n" + GOOD_F, TEST)]
        if prot["nproc_limit_enforced"]:  # never run an unbounded fork bomb on a shared machine
            jobs.append(AssertJob("import os\nwhile True:\n    os.fork()\n", TEST))
        ok, loop, detached, net, *bomb = pool.run(jobs)
        assert ok.outcome == "passed", prot
        assert loop.outcome == "timeout"
        assert detached.outcome == "passed", (detached.exc_type, detached.exc_message)
        assert net.outcome == "runtime_error"
        assert all(b.outcome in ("runtime_error", "timeout") for b in bomb)
        if marker.exists():  # without a private filesystem the daemon could report its pid: it must be dead
            import time

            time.sleep(0.3)
            pid = int(marker.read_text())
            with pytest.raises(ProcessLookupError):
                os.kill(pid, 0)
        if prot["readonly_root"]:
            [w] = pool.run([AssertJob(f"open({str(tmp_path)!r} + '/x', 'w')\n" + GOOD_F, TEST)])
            assert w.outcome == "runtime_error" and not (tmp_path / "x").exists()
        [again] = pool.run([AssertJob(GOOD_F, TEST)])
        assert again.outcome == "passed"


def test_programs_die_with_the_pool_process():
    """SIGKILL the process that owns a pool mid-batch: its workers and their programs must go too."""
    import subprocess
    import sys
    import time

    script = (
        "from densecode.sandbox import AssertJob, Limits, SandboxPool\n"
        "pool = SandboxPool(max_workers=2, limits=Limits(timeout_s=60, cpu_s=60))\n"
        "print(pool.uid_base, flush=True)\n"
        "pool.run([AssertJob('import time\\ntime.sleep(50)', ['assert 1'])] * 2)\n"
    )
    owner = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    uid_base = int(owner.stdout.readline())
    markers = (f"\x00{uid_base}\x00".encode(), f"\x00{uid_base + 1}\x00".encode())  # the workers' argv

    def alive(programs_only: bool = False) -> list[int]:
        found = []
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                uid = os.stat(f"/proc/{name}").st_uid
                with open(f"/proc/{name}/cmdline", "rb") as f:
                    cmd = f.read()
                with open(f"/proc/{name}/stat") as f:
                    state = f.read().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            is_program = uid_base <= uid < uid_base + 2
            is_worker = b"_worker" in cmd and any(m in cmd for m in markers)
            if state != "Z" and (is_program or (is_worker and not programs_only)):
                found.append(int(name))
        return found

    deadline = time.time() + 30
    while len(alive(programs_only=True)) < 2 and time.time() < deadline:  # both programs sleeping
        time.sleep(0.2)
    assert len(alive(programs_only=True)) == 2 and len(alive()) == 4
    owner.kill()
    owner.wait()
    deadline = time.time() + 10
    while alive() and time.time() < deadline:
        time.sleep(0.2)
    assert not alive()
