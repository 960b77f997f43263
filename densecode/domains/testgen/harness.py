"""The testgen harness: its source text is the program the sandbox runs (it imports nothing from densecode).

`run(spec)` loads the reference and its mutants into separate namespaces, finds the mutants that behave like the
reference on the task's sample inputs (equivalent: dropped; so are those that exceed the CPU budget on a sample
input before any difference), then executes each assert against the reference under a `sys.settrace` tracer that
records lines and arcs exactly as coverage.py's Python tracer does (entry arcs `(-first_line, line)`, exit arcs
`(line, -first_line)`), and against each live mutant (an assert that fails or raises on a mutant kills it). The
parent turns lines and arcs into coverage with coverage.py's own static analysis.

An endless loop cannot stall the run: a traced call (the reference under an assert) raises `_Budget` after a step
budget of line events (counted, so coverage stays deterministic); an untraced call (equivalence checks, asserts on
mutants: tracing them would cost most of the run) raises `_Budget` after `call_cpu_s` of CPU time (a
SIGVTALRM timer, re-armed until the call ends), the reference under an assert also stops after `assert_cpu_s` (a
single step on huge numbers can take long), and once the run has spent `total_cpu_s` the remaining mutant runs
are skipped (`truncated`). A call that raises `_Budget` counts as raising. The asserts it runs were checked by the
parent to use only the reference's names and a few pure builtins (densecode.domains.testgen.asserts), so they
cannot reach this module's state; the whole run is in the sandbox in any case.
"""

import ast
import copy
import io
import json
import opcode
import signal
import sys
import time

REF_FILE = "<reference>"
ASSERT_FILE = "<assert>"
_GEN_FLAGS = 0x20 | 0x80 | 0x200  # CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR
_YIELD = opcode.opmap.get("YIELD_VALUE")


class _Budget(BaseException):
    """Raised inside traced code when a call exceeds its step budget (a BaseException: `except Exception` in the
    traced code does not swallow it)."""


class Tracer:
    """sys.settrace tracer: records lines/arcs of `record_file` and counts line events of every file in `files`."""

    def __init__(self, files, record_file=None, budget=100000):
        self.files = set(files)
        self.record_file = record_file
        self.budget = budget
        self.steps = 0
        self.lines = set()
        self.arcs = set()
        self._stack = []
        self._last = 0
        self._suspended = set()

    def _global(self, frame, event, arg):
        if event != "call" or frame.f_code.co_filename not in self.files:
            return None
        code = frame.f_code
        self._stack.append(self._last)
        resumed = bool(code.co_flags & _GEN_FLAGS) and id(frame) in self._suspended
        self._suspended.discard(id(frame))
        # A new call enters at (-first_line, line); a resumed generator continues from the line it yielded at.
        self._last = frame.f_lineno if resumed else -code.co_firstlineno
        return self._local

    def _local(self, frame, event, arg):
        code = frame.f_code
        record = code.co_filename == self.record_file
        if event == "line":
            self.steps += 1
            if self.steps > self.budget:
                raise _Budget("step budget exceeded")
            if record:
                line = frame.f_lineno
                self.lines.add(line)
                self.arcs.add((self._last, line))
                self._last = line
        elif event == "return":
            real = True
            if code.co_flags & _GEN_FLAGS and _YIELD is not None:
                lasti = frame.f_lasti
                real = not (0 <= lasti < len(code.co_code) and code.co_code[lasti] == _YIELD)
                if not real:
                    self._suspended.add(id(frame))
            if record and real:
                self.arcs.add((self._last, -code.co_firstlineno))
            self._last = self._stack.pop() if self._stack else 0
        return self._local

    def __enter__(self):
        self.steps = 0
        sys.settrace(self._global)
        return self

    def __exit__(self, *exc):
        sys.settrace(None)
        return False


def _describe(exc):
    return type(exc).__name__


def _on_timer(signum, frame):
    raise _Budget("CPU budget exceeded")


class CpuGuard:
    """Raise `_Budget` in the running code after `cpu_s` of CPU time, and every 10 ms after that until exit.
    The SIGVTALRM handler is installed once per run (`run`), not per call: signal.signal costs more than the call."""

    def __init__(self, cpu_s):
        self.cpu_s = cpu_s

    def __enter__(self):
        signal.setitimer(signal.ITIMER_VIRTUAL, self.cpu_s, 0.01)
        return self

    def __exit__(self, *exc):
        signal.setitimer(signal.ITIMER_VIRTUAL, 0, 0)
        return False


_ATOMS = (int, float, complex, str, bytes, bool, type(None))


def _fresh(args):
    """A copy of the call's arguments that the call cannot change for the next one (atoms need none)."""
    if all(type(a) in _ATOMS for a in args):
        return tuple(args)
    return copy.deepcopy(args)


def _call(fn, args, cpu_s):
    """('ok', value) or ('raise', exception type name) of fn(*args) on a copy of args, within the CPU budget."""
    try:
        with CpuGuard(cpu_s):
            value = fn(*_fresh(args))
        return ("ok", value)
    except BaseException as exc:  # noqa: BLE001 - any failure of the call is an outcome
        return ("raise", _describe(exc))


def _same(a, b):
    if a[0] != b[0]:
        return False
    if a[0] == "raise":
        return a[1] == b[1]
    try:
        return type(a[1]) is type(b[1]) and bool(a[1] == b[1]) and repr(a[1]) == repr(b[1])
    except BaseException:  # noqa: BLE001
        return False


def _load(source, filename, cpu_s, tracer=None):
    ns = {"__name__": "__testgen__"}
    code = compile(source, filename, "exec")
    with tracer if tracer is not None else CpuGuard(cpu_s):
        exec(code, ns)  # noqa: S102 - the reference or a mutant, inside the sandbox
    return ns


def run(spec, early=None):
    """The whole judgement of one response; returns plain data (see module doc). `early(statuses)` is called with
    the mutants' statuses before any assert runs; `spec["status"]` (from an earlier run of the same task) skips the
    equivalence check."""
    budget = int(spec.get("step_budget", 100000))
    cpu_s = float(spec.get("call_cpu_s", 0.01))
    total_cpu_s = float(spec.get("total_cpu_s", 2.0))
    assert_cpu_s = float(spec.get("assert_cpu_s", 1.0))
    started = time.process_time()
    entry = spec["entry"]
    mutant_files = [f"<mutant{k}>" for k in range(len(spec.get("mutants", [])))]
    files = [REF_FILE] + mutant_files
    out = {"baseline": [], "asserts": [], "mutants": []}
    saved_stdout, saved_stderr = sys.stdout, sys.stderr
    sys.stdout = sys.stderr = io.StringIO()  # the reference's own prints are not the harness's output
    saved_handler = signal.signal(signal.SIGVTALRM, _on_timer)  # CpuGuard's timer raises _Budget through it
    try:
        base = Tracer(files, REF_FILE, budget)
        try:
            ref_ns = _load(spec["reference"], REF_FILE, cpu_s, tracer=base)
        except BaseException as exc:  # noqa: BLE001
            out["error"] = f"the reference failed to load: {_describe(exc)}"
            return out
        out["baseline"] = sorted(base.lines)
        fn = ref_ns.get(entry)
        inputs = [ast.literal_eval(a) if isinstance(a, str) else a for a in spec.get("inputs", [])]
        known = spec.get("status")
        if not (isinstance(known, list) and len(known) == len(mutant_files)):
            known = None
        ref_outputs = [_call(fn, args, cpu_s) for args in inputs] if callable(fn) and known is None else []
        live = []
        for k, (src, fname) in enumerate(zip(spec.get("mutants", []), mutant_files)):
            if known is not None and known[k] != "live":
                out["mutants"].append(known[k])  # decided by an earlier run of this task (the parent's cache)
                continue
            try:
                ns = _load(src, fname, cpu_s)
            except BaseException:  # noqa: BLE001
                out["mutants"].append("load_error")
                continue
            mfn = ns.get(entry)
            if not callable(mfn):
                out["mutants"].append("load_error")
                continue
            status = "live" if known is not None else "equivalent"
            for args, ref in zip(inputs, ref_outputs) if known is None else ():
                got = _call(mfn, args, cpu_s)
                if got == ("raise", "_Budget") and ref != got:
                    status = "hangs"  # dropped: a timeout kill says little and costs the most
                    break
                if not _same(got, ref):
                    status = "live"  # one difference decides it (a later input that hangs is the budget's to stop)
                    break
            out["mutants"].append(status)
            if status == "live":
                live.append((k, ns))
        if early is not None:
            early(list(out["mutants"]))  # before any assert runs: nothing an assert does can change it
        for src in spec.get("asserts", []):
            rec = {"holds": False, "error": None, "lines": [], "arcs": [], "kills": []}
            out["asserts"].append(rec)
            try:
                code = compile(src, ASSERT_FILE, "exec")
            except BaseException as exc:  # noqa: BLE001 - the parent parsed it already; be safe
                rec["error"] = _describe(exc)
                continue
            tracer = Tracer(files, REF_FILE, budget)
            try:
                with tracer, CpuGuard(assert_cpu_s):  # steps bound Python loops; CPU bounds big-number arithmetic
                    exec(code, ref_ns)  # noqa: S102 - a checked assert, inside the sandbox
                rec["holds"] = True
            except BaseException as exc:  # noqa: BLE001
                rec["error"] = _describe(exc)
            rec["lines"] = sorted(tracer.lines)
            rec["arcs"] = sorted(list(a) for a in tracer.arcs)
            if not rec["holds"]:
                continue  # an assert that fails on the reference kills nothing
            for k, ns in live:
                if time.process_time() - started > total_cpu_s:
                    out["truncated"] = True  # the run's whole budget is spent: later kills are not counted
                    break
                try:
                    with CpuGuard(cpu_s):
                        exec(code, ns)  # noqa: S102 - a checked assert on a mutant, inside the sandbox
                except BaseException:  # noqa: BLE001 - failing or raising on the mutant kills it
                    rec["kills"].append(k)
        return out
    finally:
        signal.setitimer(signal.ITIMER_VIRTUAL, 0, 0)
        signal.signal(signal.SIGVTALRM, saved_handler)
        sys.stdout, sys.stderr = saved_stdout, saved_stderr


def _write(line):
    sys.__stdout__.write(line + "\n")
    sys.__stdout__.flush()


def main(spec, nonce):
    """Entry point of the sandbox program: the mutants' statuses (`E` line, written before any assert runs) and the
    result (`R` line), each marked with the parent's nonce."""
    result = run(spec, early=lambda statuses: _write(nonce + "E" + json.dumps(statuses)))
    _write(nonce + "R" + json.dumps(result, separators=(",", ":")))
