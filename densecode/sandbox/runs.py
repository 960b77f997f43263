"""One sandboxed process run (`Unit`) and reading what ended it, shared by the judges and the API bridge.

A worker answers each run with a "done" dict: how the process ended (waitpid status, the
worker's kill reason, CPU seconds) and the child's result lines, uninterpreted. The functions
here turn that into an outcome class before any test value is looked at.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class Unit:
    """One sandboxed process run."""

    uid: int
    payload: dict
    limits: dict
    stdin: str | None = None
    on_record: Callable | None = None  # API runs: callable(record_dict) -> reply dict | ("kill", reason) | None
    result: dict | None = None
    killed_by_parent: str | None = None
    send_failures: int = 0  # workers found dead when this unit was handed to them


def decode_status(status: int | None) -> tuple[str | None, str | None]:
    """waitpid status of the child -> (signal name or None, exit code text or None)."""
    if status is None or status < 0:
        return None, None
    if os.WIFSIGNALED(status):
        return signal.Signals(os.WTERMSIG(status)).name, None
    if os.WIFEXITED(status):
        return None, str(os.WEXITSTATUS(status))
    return None, None


def synthetic(reason: str, message: str) -> dict:
    """A "done" result for a unit no worker finished (worker died, deadline passed)."""
    return {"op": "done", "status": None, "setup_error": None, "killed": reason, "records": [], "stdout": "",
            "stderr": "", "duration_s": 0.0, "message": message}


def parse_records(result: dict) -> tuple[list[dict], bool]:
    """Child lines -> dicts; returns (records, protocol_violation)."""
    out, bad = [], False
    for line in result.get("records", []):
        try:
            rec = json.loads(line)
        except (ValueError, RecursionError):
            bad = True
            continue
        if not isinstance(rec, dict) or not isinstance(rec.get("t"), str):
            bad = True
            continue
        out.append(rec)
    return out, bad


def base_outcome(result: dict) -> tuple[str | None, dict]:
    """Outcome decided by how the process ended (before looking at test values)."""
    info: dict = {}
    if isinstance(result.get("cpu_s"), (int, float)):
        info["cpu_s"] = round(float(result["cpu_s"]), 4)
    killed = result.get("killed")
    sig, code = decode_status(result.get("status"))
    if sig:
        info["signal"] = sig
    if result.get("setup_error"):
        info["setup_error"] = result["setup_error"]
        return "sandbox_violation", info
    if killed in ("timeout", "deadline", "cpu_limit"):
        if killed == "deadline":
            info["deadline"] = True
        if killed == "cpu_limit":
            info["cpu_limit"] = True
        return "timeout", info
    if killed == "output_limit":
        return "output_limit", info
    if killed == "worker_died":
        info["message"] = result.get("message")
        return "sandbox_violation", info
    if sig == "SIGXCPU" or (sig == "SIGKILL" and killed is None and reached_cpu_limit(result)):
        info["cpu_limit"] = True
        return "timeout", info  # the RLIMIT_CPU backstop: SIGXCPU at the soft limit, SIGKILL at the hard one
    if code == "70":
        info["setup_error"] = "sandbox child failed before running the program"
        return "sandbox_violation", info
    return None, info


def reached_cpu_limit(result: dict) -> bool:
    """The program used its whole CPU limit (so the RLIMIT_CPU backstop, not something else, SIGKILLed it)."""
    cpu, limit = result.get("cpu_s"), result.get("cpu_limit_s")
    if not isinstance(cpu, (int, float)) or not isinstance(limit, (int, float)):
        return False  # not shown to be the CPU limit
    return cpu >= limit - 0.05  # rusage vs the kernel's own accounting: a scheduler tick of slack


def first_error(records: list[dict], kinds: tuple[str, ...]) -> dict | None:
    for rec in records:
        if rec["t"] in kinds:
            return rec
    return None


def error_fields(err: dict | None) -> dict:
    if not err:
        return {"exc_type": None, "exc_message": None, "error_line": None}
    line = err.get("line")
    return {
        "exc_type": str(err.get("exc_type"))[:200],
        "exc_message": str(err.get("exc_message"))[:2000],
        "error_line": line if isinstance(line, int) and not isinstance(line, bool) else None,
    }


def int_or_none(x):
    """x if it is an int (not a bool), else None: for untrusted line numbers."""
    return x if isinstance(x, int) and not isinstance(x, bool) else None
