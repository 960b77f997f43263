"""The API bridge: programs that call back into parent-side handlers (RoboSim, gymnasium simulators).

The child's API functions are stubs that send each call as a JSON line; the worker relays it here
as it arrives, `ApiRun.on_record` calls the job's handler in the parent and the reply goes back
to the child. Only plain JSON values cross (`plain.to_json_value`).
"""

from __future__ import annotations

import json

from densecode.sandbox.jobs import ApiError, ApiJob, ApiRunResult
from densecode.sandbox.plain import to_json_value
from densecode.sandbox.runs import (
    Unit,
    base_outcome,
    decode_status,
    error_fields,
    int_or_none,
)


def plan_api(job: ApiJob, new_unit) -> tuple[ApiRun, Unit]:
    """The run of one ApiJob: its parent-side state (a fresh handler) and the unit that relays to it."""
    run = ApiRun(job, job.handler_factory())
    unit = new_unit({"mode": "api", "code": job.code, "call": job.call, "api_names": list(job.api_names)},
                    job.timeout_s, on_record=run.on_record)
    return run, unit


class ApiRun:
    """Parent side of one API run: calls the handler for each child call, then assembles the ApiRunResult."""

    def __init__(self, job: ApiJob, handler):
        self.job = job
        self.handler = handler
        self.n_calls = 0
        self.api_error: dict | None = None
        self.violation: str | None = None
        self.handler_exception: BaseException | None = None
        self.records: list[dict] = []
        self.api_error_type = "ApiError"

    def on_record(self, line: str):
        try:
            rec = json.loads(line)
        except (ValueError, RecursionError):
            self.violation = "malformed message from the program"
            return ("kill", "violation")
        if not isinstance(rec, dict):
            self.violation = "malformed message from the program"
            return ("kill", "violation")
        kind = rec.get("t")
        if kind == "bad_call":
            self.api_error = {"name": str(rec.get("name")), "message": str(rec.get("message")), "line": int_or_none(rec.get("line"))}
            self.api_error_type = "TypeError"
            return None
        if kind != "call":
            self.records.append(rec)
            return None
        self.n_calls += 1
        if self.n_calls > self.job.max_calls:
            return ("kill", "call_limit")
        name, args, kwargs = rec.get("name"), rec.get("args"), rec.get("kwargs")
        line = int_or_none(rec.get("line"))
        if name not in self.job.api_names or not isinstance(args, list) or not isinstance(kwargs, dict):
            self.violation = f"call to an unknown API function {str(name)[:80]!r}"
            return ("kill", "violation")
        try:
            value = self.handler.handle(name, args, kwargs, line)
        except ApiError as exc:
            self.api_error = {"name": name, "message": str(exc), "line": line}
            return ("kill", "api_error")
        except Exception as exc:  # noqa: BLE001 - a bug in the simulator: end the run, re-raise after the batch
            self.handler_exception = exc
            return ("kill", "handler_error")
        return {"value": to_json_value(value)}

    def assemble(self, result: dict, killed_by_parent: str | None) -> ApiRunResult:
        hint, _ = base_outcome(result)
        for line in result.get("records", []):  # non-relayed leftovers (none in api mode, kept for safety)
            self.on_record(line)
        err = next((r for r in self.records if r.get("t") == "code_error"), None)
        fields = error_fields(err)
        done = any(r.get("t") == "done" for r in self.records)
        if killed_by_parent == "call_limit":
            outcome = "call_limit"
        elif self.api_error is not None:
            outcome = "api_error"
            fields = {"exc_type": self.api_error_type, "exc_message": self.api_error["message"],
                      "error_line": self.api_error["line"]}
        elif self.violation or killed_by_parent in ("violation", "handler_error"):
            outcome = "sandbox_violation"
            fields["exc_message"] = fields["exc_message"] or self.violation
        elif hint is not None:
            outcome = hint
        elif fields["exc_type"] == "MemoryError":
            outcome = "memory"
        elif err is not None:
            outcome = "python_error"
        elif not done:
            outcome = "python_error"
            sig, code = decode_status(result.get("status"))
            fields.update(exc_type="EarlyExit", exc_message=f"program ended early ({sig or 'exit ' + str(code)})")
        else:
            outcome = "ok"
        return ApiRunResult(
            outcome=outcome,
            api_error=self.api_error,
            n_calls=min(self.n_calls, self.job.max_calls),
            handler=self.handler,
            stdout=result.get("stdout", ""),
            stderr=result.get("stderr", ""),
            duration_s=float(result.get("duration_s", 0.0)),
            **fields,
        )
