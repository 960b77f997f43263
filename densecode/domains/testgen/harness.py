"""The testgen harness: its source text is the program the sandbox runs (it imports nothing from densecode).

`run(spec)` loads the reference and its mutants into separate namespaces, finds the mutants that behave like the
reference on the task's sample inputs (equivalent: dropped), then executes each assert against the reference under a
`sys.settrace` tracer that records lines and arcs exactly as coverage.py's Python tracer does (entry arcs
`(-first_line, line)`, exit arcs `(line, -first_line)`), and against each live mutant (an assert that fails or raises
on a mutant kills it). The parent turns lines and arcs into coverage with coverage.py's own static analysis.

A step budget (line events per call, counted, not timed) stops an infinite loop in a mutant or reference: the run
raises `_Budget` there, which counts as the call raising. The asserts it runs were checked by the parent to use only
the reference's names and a few pure builtins (densecode.domains.testgen.asserts), so they cannot reach this module's
state; the whole run is in the sandbox in any case.
"""

import ast
import copy
import dis
import io
import json
import sys

REF_FILE = "<reference>"
ASSERT_FILE = "<assert>"
_GEN_FLAGS = 0x20 | 0x80 | 0x200  # CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR
_YIELD = dis.opmap.get("YIELD_VALUE")


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


def _call(fn, args, files, budget):
    """('ok', value) or ('raise', exception type name) of fn(*args) on a copy of args, within the step budget."""
    try:
        with Tracer(files, None, budget):
            value = fn(*copy.deepcopy(args))
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


def _load(source, filename, files, budget, tracer=None):
    ns = {"__name__": "__testgen__"}
    code = compile(source, filename, "exec")
    if tracer is not None:
        with tracer:
            exec(code, ns)
    else:
        with Tracer(files, None, budget):
            exec(code, ns)
    return ns


def run(spec):
    """The whole judgement of one response; returns plain data (see module doc)."""
    budget = int(spec.get("step_budget", 100000))
    entry = spec["entry"]
    mutant_files = ["<mutant%d>" % k for k in range(len(spec.get("mutants", [])))]
    files = [REF_FILE] + mutant_files
    out = {"baseline": [], "asserts": [], "mutants": []}
    saved_stdout, saved_stderr = sys.stdout, sys.stderr
    sys.stdout = sys.stderr = io.StringIO()  # the reference's own prints are not the harness's output
    try:
        base = Tracer(files, REF_FILE, budget)
        try:
            ref_ns = _load(spec["reference"], REF_FILE, files, budget, tracer=base)
        except BaseException as exc:  # noqa: BLE001
            out["error"] = "the reference failed to load: %s" % _describe(exc)
            return out
        out["baseline"] = sorted(base.lines)
        fn = ref_ns.get(entry)
        inputs = [ast.literal_eval(a) if isinstance(a, str) else a for a in spec.get("inputs", [])]
        ref_outputs = [_call(fn, args, files, budget) for args in inputs] if callable(fn) else []
        live = []
        for k, (src, fname) in enumerate(zip(spec.get("mutants", []), mutant_files)):
            try:
                ns = _load(src, fname, files, budget)
            except BaseException:  # noqa: BLE001
                out["mutants"].append("load_error")
                continue
            mfn = ns.get(entry)
            if not callable(mfn):
                out["mutants"].append("load_error")
                continue
            differs = any(not _same(_call(mfn, args, files, budget), ref) for args, ref in zip(inputs, ref_outputs))
            out["mutants"].append("live" if differs else "equivalent")
            if differs:
                live.append((k, ns))
        spent = 0
        total_budget = int(spec.get("total_budget", 20 * budget))
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
                with tracer:
                    exec(code, ref_ns)
                rec["holds"] = True
            except BaseException as exc:  # noqa: BLE001
                rec["error"] = _describe(exc)
            rec["lines"] = sorted(tracer.lines)
            rec["arcs"] = sorted(list(a) for a in tracer.arcs)
            spent += tracer.steps
            if not rec["holds"]:
                continue  # an assert that fails on the reference kills nothing
            for k, ns in live:
                if spent > total_budget:
                    out["truncated"] = True  # the run's whole budget is spent: later kills are not counted
                    break
                mt = Tracer(files, None, budget)
                try:
                    with mt:
                        exec(code, ns)
                except BaseException:  # noqa: BLE001 - failing or raising on the mutant kills it
                    rec["kills"].append(k)
                spent += mt.steps
        return out
    finally:
        sys.stdout, sys.stderr = saved_stdout, saved_stderr


def main(spec, nonce):
    """Entry point of the sandbox program: one result line, marked with the parent's nonce."""
    result = run(spec)
    sys.__stdout__.write(nonce + json.dumps(result, separators=(",", ":")) + "\n")
    sys.__stdout__.flush()
