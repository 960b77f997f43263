"""Runs INSIDE the sandboxed child: executes the candidate and reports plain data.

Nothing this module reports decides a verdict by itself: it reports the values
of candidate-dependent expressions ("probes"), function outputs, or API calls
as plain data over a private pipe, and the parent compares them with data the
child never sees. A candidate that tampers with this module (it can: it runs
in the same interpreter) can only choose the values it reports, which it could
do anyway by returning them, or stop reporting, which counts as failure.
"""

from __future__ import annotations

import json
import os
import sys

from densecode.sandbox.plain import decode, encode, to_json_value

CANDIDATE_FILE = "<candidate>"
RESULT_FD = 3
REPLY_FD = 4

_write = os.write
_dumps = json.dumps


def _send(record: dict) -> None:
    data = (_dumps(record, separators=(",", ":")) + "\n").encode()
    view = memoryview(data)
    while view:
        n = _write(RESULT_FD, view)
        view = view[n:]


def candidate_line(tb) -> int | None:
    """1-based line in the candidate's code of the innermost candidate frame of a traceback."""
    line = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == CANDIDATE_FILE:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


_reserve: list = []  # emergency memory, released so a MemoryError can still be reported


def _exc_record(exc: BaseException) -> dict:
    if isinstance(exc, MemoryError):
        _reserve.clear()
    line = candidate_line(exc.__traceback__)
    if isinstance(exc, SyntaxError) and exc.filename == CANDIDATE_FILE:
        line = exc.lineno
    try:
        message = str(exc)[:2000]
    except BaseException:  # a hostile __str__
        message = "<unprintable>"
    return {"exc_type": type(exc).__name__, "exc_message": message, "line": line}


def _flush_std() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            pass


def _run_module(source: str, filename: str, g: dict) -> dict | None:
    try:
        exec(compile(source, filename, "exec"), g)
    except BaseException as exc:  # noqa: BLE001 - SystemExit included on purpose
        return _exc_record(exc)
    return None


def run_assert(payload: dict) -> None:
    g = {"__name__": "__main__", "__builtins__": __builtins__}
    if payload.get("setup"):
        err = _run_module(payload["setup"], "<setup>", g)
        if err:
            _send({"t": "setup_error", **err})
    err = _run_module(payload["code"], CANDIDATE_FILE, g)
    if err:
        # Like running the script for real: a program that crashes on load passes no test.
        _send({"t": "code_error", **err})
        _send({"t": "done"})
        return
    for i, probes in enumerate(payload["probes"]):
        if isinstance(probes, str):  # a non-assert test statement: it passes iff it raises nothing
            try:
                exec(compile(probes, "<test>", "exec"), g)
                _send({"t": "probe", "i": i, "j": 0, "v": None})
            except BaseException as exc:  # noqa: BLE001
                _send({"t": "probe_error", "i": i, "j": 0, **_exc_record(exc)})
            continue
        for j, src in enumerate(probes):
            try:
                value = eval(compile(src, "<test>", "eval"), g)
                _send({"t": "probe", "i": i, "j": j, "v": encode(value)})
            except BaseException as exc:  # noqa: BLE001
                _send({"t": "probe_error", "i": i, "j": j, **_exc_record(exc)})
    _send({"t": "done"})


def run_call(payload: dict) -> None:
    g = {"__name__": "__main__", "__builtins__": __builtins__}
    err = _run_module(payload["code"], CANDIDATE_FILE, g)
    if err:
        _send({"t": "code_error", **err})
        _send({"t": "done"})
        return
    fn = g.get(payload["entry_point"])
    for i, raw in enumerate(payload["inputs"]):
        try:
            if fn is None:
                raise NameError(f"name '{payload['entry_point']}' is not defined")
            args = decode(raw)
            value = fn(*args)
            _send({"t": "out", "i": i, "v": encode(value)})
        except BaseException as exc:  # noqa: BLE001
            _send({"t": "out_error", "i": i, **_exc_record(exc)})
    _send({"t": "done"})


def run_stdio(payload: dict) -> None:
    g = {"__name__": "__main__", "__builtins__": __builtins__}
    try:
        exec(compile(payload["code"], CANDIDATE_FILE, "exec"), g)
    except SystemExit as exc:
        if exc.code not in (None, 0):
            _send({"t": "code_error", **_exc_record(exc)})
    except BaseException as exc:  # noqa: BLE001
        _send({"t": "code_error", **_exc_record(exc)})
    _flush_std()
    _send({"t": "done"})


def _make_stub(name: str, reader):
    def stub(*args, **kwargs):
        frame = sys._getframe(1)
        line = None
        while frame is not None:
            if frame.f_code.co_filename == CANDIDATE_FILE:
                line = frame.f_lineno
                break
            frame = frame.f_back
        try:
            plain_args = to_json_value(list(args))
            plain_kwargs = to_json_value(dict(kwargs))
        except TypeError as exc:
            # Non-plain arguments end the run as an API error (see docs/sandbox.md: "API bridge").
            _send({"t": "bad_call", "name": name, "message": str(exc), "line": line})
            os._exit(0)
        _send({"t": "call", "name": name, "args": plain_args, "kwargs": plain_kwargs, "line": line})
        reply = reader.readline()
        if not reply:
            os._exit(0)
        msg = json.loads(reply)
        if "value" not in msg:
            os._exit(0)  # the parent ended the run (ApiError / call limit)
        return msg["value"]

    stub.__name__ = name
    return stub


def run_api(payload: dict) -> None:
    reader = os.fdopen(REPLY_FD, "r", encoding="utf-8", closefd=False)
    g = {"__name__": "__main__", "__builtins__": __builtins__}
    for name in payload["api_names"]:
        g[name] = _make_stub(name, reader)
    err = _run_module(payload["code"], CANDIDATE_FILE, g)
    if err is None:
        try:
            eval(compile(payload["call"], "<call>", "eval"), g)
        except BaseException as exc:  # noqa: BLE001
            err = _exc_record(exc)
    if err is not None:
        _send({"t": "code_error", **err})
    _flush_std()
    _send({"t": "done"})


MODES = {"assert": run_assert, "call": run_call, "stdio": run_stdio, "api": run_api}


def main(payload: dict) -> None:
    """Entry point in the child; never returns."""
    # bytes(n) is calloc'd: fresh zero pages that are never touched, so the reserve costs address space (what
    # RLIMIT_AS counts, and what freeing it gives back) but no page faults; bytearray(n) writes all 4 MiB (~3 ms).
    _reserve.append(bytes(4 << 20))
    try:
        MODES[payload["mode"]](payload)
    except BaseException:  # noqa: BLE001 - a broken harness must still end the process
        pass
    _flush_std()
    os._exit(0)
