"""Judges, comparators and the API bridge of densecode.sandbox."""

from __future__ import annotations

import pickle

import pytest

from densecode.sandbox import (
    ApiError,
    ApiJob,
    AssertJob,
    FunctionCallJob,
    Limits,
    SandboxPool,
    StdioJob,
    get_default_pool,
)
from densecode.sandbox.asserts import bound_names, split_test
from densecode.sandbox.compare import COMPARATORS, compare_stdout, outputs_match
from densecode.sandbox.plain import Opaque, decode, encode

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def pool():
    with SandboxPool(max_workers=2, limits=Limits(timeout_s=5.0)) as p:
        yield p


# ------------------------------------------------------------------ plain data codec


def test_plain_roundtrip_and_custom_types_reduced():
    value = {"a": (1, 2.5, None), 3: [True, b"x", {1, 2}], (1, 2): frozenset({3}), "c": complex(1, -2),
             "big": 7 ** 9000, "nan": float("inf")}
    assert decode(encode(value)) == value

    class Always(int):
        def __eq__(self, other):
            return True

        __hash__ = int.__hash__

    reduced = decode(encode(Always(3)))
    assert type(reduced) is int and reduced == 3 and reduced != 5

    class Weird:
        def __eq__(self, other):
            return True

    opaque = decode(encode(Weird()))
    assert isinstance(opaque, Opaque) and opaque != opaque and not (opaque == 5)


# ------------------------------------------------------------------ assert judge


def test_assert_split_keeps_expected_out_of_the_child():
    t = split_test("assert math.isclose(f(2), 3.5, rel_tol=0.01)")
    assert t.probes == ["f(2)"]
    t = split_test("assert set(similar((3, 4), (4, 5))) == set((4,))")
    assert t.probes == ["similar((3, 4), (4, 5))"]
    t = split_test("assert f(x)[0].upper() == 'A'")
    assert t.probes == ["f(x)[0].upper()"]  # a method of a candidate value runs in the child, its result comes back
    t = split_test("assert 'abc'.upper() == f(1).lower()")
    assert t.probes == ["f(1).lower()"]
    t = split_test("assert sum(f(1)) == 3", shadowed=frozenset({"sum"}))
    assert t.probes == ["sum(f(1))"]


def test_bound_names_are_the_programs_module_level_names():
    code = ("def f(sum):\n    sorted = [1]\n    global max\n    max = len\n    return sum\n"
            "len = 3\nsquares = [min * min for min in range(2)]\nimport math, numpy as np, re as math2\n")
    assert bound_names(code) == {"f", "max", "len", "squares", "math2"}  # locals and comprehension names are not
    # responses binding the same names share one split of a test
    shadowed = bound_names("def f(x):\n    y = x\n    return y\n")
    assert split_test("assert sorted(f([2, 1])) == [1, 2]", shadowed) is split_test("assert sorted(f([2, 1])) == [1, 2]",
                                                                                     bound_names("def f(x):\n    return x\n"))
    assert split_test("assert sorted(f([2, 1])) == [1, 2]", shadowed).probes == ["f([2, 1])"]


def test_program_names_shadow_builtins_in_tests(pool):
    # MBPP task 126 defines its own `sum`; task 596 compares with sys.getsizeof.
    code = "import sys\ndef sum(a, b):\n    return a * b\ndef size(t):\n    return sys.getsizeof(t)\n"
    tests = ["assert sum(3, 4) == 12", "assert size((1, 'a')) == sys.getsizeof((1, 'a'))", "assert math.floor(sum(2, 2.5)) == 5"]
    [r] = pool.run([AssertJob(code, tests)])
    assert r.outcome == "passed", r


def test_assert_job_counts_each_assert(pool):
    code = "def add(a, b):\n    return a + b\n"
    tests = ["assert add(1, 2) == 3", "assert add(2, 2) == 5", "assert add('a', 'b') == 'ab'", "assert add(1, 2) == 3.0"]
    [r] = pool.run([AssertJob(code, tests)])
    assert r.outcome == "wrong_answer"
    assert r.per_test == [True, False, True, True]
    assert (r.n_passed, r.n_tests) == (3, 4)


def test_assert_job_passes_with_setup_and_float_checks(pool):
    setup = "import math\nK = 10\n"
    code = "import math\ndef area(r):\n    return math.pi * r * r\n"
    tests = ["assert math.isclose(area(1), 3.14159, rel_tol=1e-4)", "assert round(area(2), 2) == 12.57", "assert area(0) == 0",
             "assert area(K) > 314"]
    [r] = pool.run([AssertJob(code, tests, setup=setup)])
    assert r.outcome == "passed", r
    assert r.per_test == [True] * 4


def test_error_line_points_into_candidate_code(pool):
    code = "def helper(x):\n    return 10 // x\n\ndef f(x):\n    y = x - 1\n    return helper(y)\n"
    [r] = pool.run([AssertJob(code, ["assert f(2) == 10", "assert f(1) == 0"])])
    assert r.outcome == "runtime_error"
    assert r.per_test == [True, False]
    assert r.exc_type == "ZeroDivisionError" and r.error_line == 2


def test_syntax_error_and_load_time_crash(pool):
    [syn, crash] = pool.run([
        AssertJob("def f(x):\n    return (x +\n", ["assert f(1) == 1"]),
        AssertJob("def f(x):\n    return x\nraise KeyError('k')\n", ["assert f(1) == 1"]),
    ])
    assert syn.outcome == "runtime_error" and syn.exc_type == "SyntaxError" and syn.error_line == 2
    assert crash.outcome == "runtime_error" and crash.exc_type == "KeyError" and crash.error_line == 3
    assert crash.per_test == [False]  # a script that crashes on load passes nothing
    [vacuous] = pool.run([AssertJob("raise ValueError('no')\n", ["assert True"])])
    assert vacuous.outcome == "runtime_error" and vacuous.per_test == [False]


def test_timeout_keeps_passed_tests(pool):
    code = "def f(x):\n    while x > 5:\n        pass\n    return x\n"
    [r] = pool.run([AssertJob(code, ["assert f(1) == 1", "assert f(9) == 9"], timeout_s=1.0)])
    assert r.outcome == "timeout"
    assert r.per_test == [True, False]


def test_stdout_is_captured_and_stdin_closed(pool):
    code = "import sys\nprint('hello')\nprint('err', file=sys.stderr)\nDATA = sys.stdin.read()\ndef f():\n    return DATA\n"
    [r] = pool.run([AssertJob(code, ["assert f() == ''"])])
    assert r.outcome == "passed"
    assert r.stdout == "hello\n" and "err" in r.stderr


def test_non_assert_test_statement(pool):
    [r] = pool.run([AssertJob("def f():\n    return 1\n", ["f()", "x = f() + 'a'"])])
    assert r.per_test == [True, False] and r.outcome == "runtime_error" and r.exc_type == "TypeError"


# ------------------------------------------------------------------ function-call judge


def test_function_call_expected_and_atol(pool):
    code = "def div(a, b):\n    return a / b\n"
    [exact, tol, loose] = pool.run([
        FunctionCallJob(code, "div", [[1, 2], [1, 3]], expected=[0.5, 0.3333333333]),
        FunctionCallJob(code, "div", [[1, 3]], expected=[0.33], atol=0.01),
        FunctionCallJob(code, "div", [[1, 3]], expected=[0.3]),
    ])
    assert exact.outcome == "passed"  # atol 0 on float outputs means 1e-6 (EvalPlus)
    assert tol.outcome == "passed"
    assert loose.outcome == "wrong_answer"


def test_function_call_reference_and_types(pool):
    ref = "def pairs(xs):\n    return [(x, x * x) for x in xs]\n"
    good = "def pairs(xs):\n    return list(zip(xs, [x * x for x in xs]))\n"
    wrong_type = "def pairs(xs):\n    return [[x, x * x] for x in xs]\n"
    crash = "def pairs(xs):\n    return [(x, x * x) for x in xs if 1 / (x - 2)]\n"
    inputs = [[[1, 2, 3]], [[]], [[5]]]
    res = pool.run([FunctionCallJob(c, "pairs", inputs, reference=ref) for c in (good, wrong_type, crash)])
    assert [r.outcome for r in res] == ["passed", "wrong_answer", "runtime_error"]
    assert res[2].per_test == [False, True, True] and res[2].error_line == 2


def test_function_call_inputs_not_shared_between_calls(pool):
    code = "def push(xs):\n    xs.append(1)\n    return len(xs)\n"
    [r] = pool.run([FunctionCallJob(code, "push", [[[0]], [[0]]], expected=[2, 2])])
    assert r.outcome == "passed"


def test_missing_entry_point(pool):
    [r] = pool.run([FunctionCallJob("def other():\n    pass\n", "f", [[1]], expected=[1])])
    assert r.outcome == "runtime_error" and r.exc_type == "NameError"


def test_outputs_match_rules():
    assert outputs_match((1, 2), (1, 2))
    assert not outputs_match([1, 2], (1, 2))
    assert outputs_match([0.1 + 0.2], [0.3])
    assert not outputs_match([1.0, 2.0], [1.0, 2.1])
    assert outputs_match([1.0, 2.0], [1.0, 2.05], atol=0.1)
    assert not outputs_match(Opaque("x"), 1)


# ------------------------------------------------------------------ stdio judge + comparators


@pytest.mark.parametrize(
    "out, exp, method",
    [
        ("3\n", "3\n", "exact"),
        ("a b  \nc\n\n", "a b\nc", "lines"),
        ("1 2\n3", "1 2 3", "whitespace"),
        ("0.3333333\n", "0.33333333333", "numeric"),
        ("[1, 2, 3]", "(1, 2, 3)", "structure"),
        ("{3, 1, 2}", "{1, 2, 3}", "structure"),
        ("[1.0000001, 'a']", "(1.0, 'a')", "structure"),
        ("3.14159", "3.14", "rounding"),
    ],
)
def test_comparator_chain_records_method(out, exp, method):
    ok, used, _ = compare_stdout(out, exp)
    assert ok and used == method


def test_comparator_errors_fall_through():
    # "numeric" raises on non-numbers and "structure" on non-literals; the chain goes on.
    ok, used, errors = compare_stdout("abc", "abd")
    assert not ok and used is None
    assert "numeric" in errors and "structure" in errors
    boom = lambda out, exp, rtol, atol: 1 / 0
    ok, used, errors = compare_stdout("1 2", "1  2", comparators=(("boom", boom), *COMPARATORS))
    assert ok and used == "whitespace" and errors["boom"].startswith("ZeroDivisionError")


def test_rounding_never_rounds_into_an_integer_answer():
    assert not compare_stdout("3.4", "3")[0]
    assert compare_stdout("2.0", "2")[1] == "numeric"


def test_numeric_tolerance_is_configurable():
    assert not compare_stdout("1.001", "1.0", rtol=1e-6, atol=0)[0] or compare_stdout("1.001", "1.0")[1] == "rounding"
    assert compare_stdout("1.001", "1.0", rtol=1e-2, atol=0)[1] == "numeric"


def test_stdio_job(pool):
    code = "import sys\nn = int(sys.stdin.readline())\nprint(*range(n))\nprint(n / 3)\n"
    cases = [("3\n", "0 1 2\n1.0\n"), ("4\n", "0 1 2 3\n1.3333333"), ("2\n", "0 1\n0.7"), ("2\n", "0 1\n0.8")]
    [r] = pool.run([StdioJob(code, cases)])
    assert r.per_test == [True, True, True, False]
    assert r.outcome == "wrong_answer"
    assert r.details["methods"] == ["exact", "numeric", "rounding", None]


def test_stdio_exit_codes(pool):
    ok_exit = StdioJob("print(1)\nimport sys\nsys.exit(0)\n", [("", "1")])
    bad_exit = StdioJob("print(1)\nimport sys\nsys.exit(3)\n", [("", "1")])
    [a, b] = pool.run([ok_exit, bad_exit])
    assert a.outcome == "passed"
    assert b.outcome == "runtime_error" and b.exc_type == "SystemExit"


# ------------------------------------------------------------------ pool behaviour


def test_batch_returns_one_result_per_job_in_order(pool):
    jobs = [AssertJob(f"def f():\n    return {i}\n", [f"assert f() == {i if i % 3 else -1}"]) for i in range(12)]
    results = pool.run(jobs)
    assert len(results) == 12
    assert [r.outcome == "passed" for r in results] == [i % 3 != 0 for i in range(12)]


def test_batch_deadline(pool):
    jobs = [AssertJob("import time\ntime.sleep(30)\n", ["assert True"], timeout_s=30) for _ in range(5)]
    results = pool.run(jobs, deadline_s=1.0)
    assert len(results) == 5
    assert all(r.outcome == "timeout" and r.details.get("deadline") for r in results)
    [after] = pool.run([AssertJob("x = 1", ["assert x == 1"])])
    assert after.outcome == "passed"


def test_default_pool_is_shared_and_configurable():
    from densecode.config import load_config
    from densecode.errors import DensecodeError
    from densecode.sandbox import configure_default_pool

    assert get_default_pool() is get_default_pool()
    cfg = load_config(None, ["sandbox.workers=1", "sandbox.timeout_s=1.5"]).sandbox
    configure_default_pool(cfg)
    pool = get_default_pool()
    assert pool.max_workers == 1 and pool.limits.timeout_s == 1.5
    [r] = pool.run([AssertJob("x = 2", ["assert x == 2"])])
    assert r.outcome == "passed"
    with pytest.raises(DensecodeError, match="sandbox.isolation"):
        configure_default_pool(load_config(None, ["sandbox.isolation=vm"]).sandbox)


def test_protections_reported(pool):
    prot = pool.protections
    for key in ("pid_namespace", "network", "readonly_root", "nproc_limit_enforced", "kill_scope"):
        assert key in prot


# ------------------------------------------------------------------ API bridge


class Recorder:
    def __init__(self):
        self.trace = []

    def handle(self, name, args, kwargs, line):
        self.trace.append((name, args, kwargs, line))
        if name == "pick" and args == ["lava"]:
            raise ApiError("cannot pick lava")
        if name == "echo":
            return {"args": args, "kwargs": kwargs}
        return None


API = ["go_to", "pick", "say", "echo"]


def test_api_values_round_trip(pool):
    code = (
        "def task_program():\n"
        "    r = echo(1, 2.5, 'é', None, True, [1, [2]], {'k': (3, 4)}, key='v')\n"
        "    assert r == {'args': [1, 2.5, 'é', None, True, [1, [2]], {'k': [3, 4]}], 'kwargs': {'key': 'v'}}, r\n"
        "    say('ok')\n"
    )
    [r] = pool.run_api([ApiJob(code, API, Recorder)])
    assert r.outcome == "ok", (r.exc_type, r.exc_message)
    assert r.n_calls == 2
    assert r.handler.trace[1] == ("say", ["ok"], {}, 4)
    assert r.handler.trace[0][3] == 2


def test_api_error_ends_run_and_cannot_be_caught(pool):
    code = (
        "def task_program():\n"
        "    go_to('kitchen')\n"
        "    try:\n"
        "        pick('lava')\n"
        "    except BaseException:\n"
        "        say('caught')\n"
        "    say('after')\n"
    )
    [r] = pool.run_api([ApiJob(code, API, Recorder)])
    assert r.outcome == "api_error"
    assert r.api_error == {"name": "pick", "message": "cannot pick lava", "line": 4}
    assert r.error_line == 4
    assert [t[0] for t in r.handler.trace] == ["go_to", "pick"]


def test_api_python_error_line_and_bad_argument(pool):
    err = "def task_program():\n    go_to('a')\n    x = [1][3]\n"
    bad = "def task_program():\n    go_to(object())\n"
    [a, b] = pool.run_api([ApiJob(err, API, Recorder), ApiJob(bad, API, Recorder)])
    assert a.outcome == "python_error" and a.exc_type == "IndexError" and a.error_line == 3
    assert b.outcome == "api_error" and b.exc_type == "TypeError" and b.api_error["line"] == 2
    assert b.handler.trace == []


def test_api_timeout_and_call_limit(pool):
    slow = "def task_program():\n    while True:\n        pass\n"
    chatty = "def task_program():\n    while True:\n        say('hi')\n"
    [a, b] = pool.run_api([ApiJob(slow, API, Recorder, timeout_s=1.0), ApiJob(chatty, API, Recorder, max_calls=50)])
    assert a.outcome == "timeout"
    assert b.outcome == "call_limit" and b.n_calls == 50


def test_api_child_cannot_get_parent_to_unpickle(pool, monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("the parent must never unpickle child data")

    monkeypatch.setattr(pickle, "loads", refuse)
    monkeypatch.setattr(pickle, "load", refuse)
    payload = pickle.dumps(Recorder)
    code = (
        "import os\n"
        "def task_program():\n"
        f"    os.write(3, {payload!r} + b'\\n')\n"
        "    say('x')\n"
    )
    forged = "import os\ndef task_program():\n    os.write(3, b'{\"t\": \"call\", \"name\": \"__reduce__\", \"args\": [], \"kwargs\": {}}\\n')\n    say('x')\n"
    [a, b] = pool.run_api([ApiJob(code, API, Recorder), ApiJob(forged, API, Recorder)])
    assert a.outcome == "sandbox_violation"
    assert b.outcome == "sandbox_violation"
    assert a.handler.trace == [] and b.handler.trace == []


def test_api_handler_bug_is_raised(pool):
    class Broken:
        def handle(self, *a):
            raise RuntimeError("simulator bug")

    with pytest.raises(RuntimeError, match="simulator bug"):
        pool.run_api([ApiJob("def task_program():\n    say('x')\n", API, Broken)])
    [r] = pool.run_api([ApiJob("def task_program():\n    say('x')\n", API, Recorder)])
    assert r.outcome == "ok"


def test_forked_copy_neither_uses_nor_kills_the_workers(pool):
    import os

    [r] = pool.run([AssertJob("x = 1", ["assert x == 1"])])
    pid = os.fork()
    if pid == 0:  # a DataLoader-style fork of the trainer
        code = 1
        try:
            pool.close()  # must not kill the parent's workers
            try:
                pool.run([AssertJob("x = 1", ["assert x == 1"])])
            except Exception as exc:  # noqa: BLE001
                code = 0 if "another process" in str(exc) else 2
            try:
                pool.require_preload("forked_copy_preload=/nonexistent/harness.py")  # would restart the workers
                code = code or 3
            except Exception as exc:  # noqa: BLE001
                code = code or (0 if "another process" in str(exc) else 4)
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0
    [r] = pool.run([AssertJob("x = 1", ["assert x == 1"])])
    assert r.outcome == "passed"


def test_pool_made_in_a_short_lived_thread_survives_it():
    import threading

    holder = {}
    t = threading.Thread(target=lambda: holder.setdefault("pool", SandboxPool(max_workers=1)).run(
        [AssertJob("x = 1", ["assert x == 1"])]))
    t.start()
    t.join()
    p = holder["pool"]
    try:
        [r] = p.run([AssertJob("x = 1", ["assert x == 1"])])
        assert r.outcome == "passed"
        assert p.stats["workers_replaced"] == 0
    finally:
        p.close()


def test_cpu_times_count_the_programs_cpu(pool):
    """SandboxPool.cpu_times (the benchmarks' CPU accounting) sees the CPU its programs burned."""
    from densecode.eval.bench_records import CpuMeter

    burn = "import time\nend = time.process_time() + 0.1\nwhile time.process_time() < end:\n    pass\nx = 1\n"
    meter = CpuMeter(pool)
    results = pool.run([AssertJob(burn, ["assert x == 1"]) for _ in range(4)])
    used = meter.stop()
    assert [r.outcome for r in results] == ["passed"] * 4
    assert used["programs"] >= 0.3  # 4 x 0.1 s of CPU, less a tick of accounting per program
    assert used["total"] >= used["programs"] and meter.capacity(4, cores=2) <= 2 * 4 / 0.3
