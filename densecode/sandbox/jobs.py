"""Public data types of the sandbox: limits, jobs, results, its errors."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

OUTCOMES = ("passed", "wrong_answer", "runtime_error", "timeout", "memory", "output_limit", "sandbox_violation")
API_OUTCOMES = ("ok", "api_error", "python_error", "timeout", "memory", "output_limit", "sandbox_violation", "call_limit")


@dataclass(frozen=True)
class Limits:
    """Per-program limits. `timeout_s` is wall clock; a job's own `timeout_s` overrides it."""

    # CPU time decides "too slow" (it does not depend on machine load); the wall clock only catches
    # programs that sleep or block. Every MBPP reference solution uses < 0.01 s CPU except task 123
    # (amicable numbers, O(n^2) up to 9999: 2.5 s), which therefore times out, as expected upstream.
    timeout_s: float = 5.0
    cpu_s: float = 2.0  # exact CPU seconds (fractional ok), checked by the worker -> "timeout"; RLIMIT_CPU backstop
    memory_mb: int = 1024  # RLIMIT_AS: address space, not RSS (numpy alone maps ~300 MB)
    max_procs: int = 16  # RLIMIT_NPROC for the program's own uid / user namespace
    file_size_mb: int = 16  # RLIMIT_FSIZE; the private /tmp is also a 64 MB tmpfs
    output_bytes: int = 1 << 20  # stdout+stderr kept per program; more than this kills it ("output_limit")

    def as_dict(self, timeout_s: float | None = None) -> dict:
        t = self.timeout_s if timeout_s is None else float(timeout_s)
        return {
            "timeout_s": t,
            "cpu_s": max(self.cpu_s, t) if timeout_s is not None else self.cpu_s,
            "memory_mb": int(self.memory_mb),
            "max_procs": int(self.max_procs),
            "file_size_mb": int(self.file_size_mb),
            "output_bytes": int(self.output_bytes),
        }


@dataclass
class AssertJob:
    """MBPP style: `setup` then the candidate `code`, then each assert judged separately."""

    code: str
    tests: list[str]
    setup: str = ""
    timeout_s: float | None = None


@dataclass
class FunctionCallJob:
    """EvalPlus style: call `entry_point(*args)` for each args list in `inputs`.

    Expected outputs come from `expected`, or from running `reference` (trusted
    solution) in its own sandbox; outputs are compared in the parent on plain
    data, floats within `atol` (EvalPlus: atol 0 on float outputs means 1e-6).
    """

    code: str
    entry_point: str
    inputs: list[list]
    expected: list | None = None
    reference: str | None = None
    atol: float = 0.0
    timeout_s: float | None = None


@dataclass
class StdioJob:
    """Competitive-programming style: each (stdin, expected stdout) case is a fresh run."""

    code: str
    cases: list[tuple[str, str]]
    rtol: float = 1e-6
    atol: float = 1e-9
    timeout_s: float | None = None


@dataclass
class JudgeResult:
    outcome: str
    per_test: list[bool]
    n_passed: int
    n_tests: int
    exc_type: str | None = None
    exc_message: str | None = None
    error_line: int | None = None  # 1-based line in the candidate's code
    stdout: str = ""
    stderr: str = ""
    duration_s: float = 0.0
    details: dict = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.outcome == "passed"


class SandboxError(RuntimeError):
    """The sandbox itself could not run (workers fail to start): an infrastructure problem, not a verdict."""


class ApiError(Exception):
    """Raised by an ApiHandler to end the program's run as an API error at that call."""


class ApiHandler(Protocol):
    def handle(self, name: str, args: list, kwargs: dict, line: int | None) -> Any: ...


@dataclass
class ApiJob:
    """Run `code`, then evaluate `call`; `api_names` are bound as globals that call the parent's handler."""

    code: str
    api_names: list[str]
    handler_factory: Callable[[], ApiHandler]
    call: str = "task_program()"
    timeout_s: float = 2.0
    max_calls: int = 10000


@dataclass
class ApiRunResult:
    outcome: str
    api_error: dict | None = None  # {"name", "message", "line"}
    exc_type: str | None = None
    exc_message: str | None = None
    error_line: int | None = None
    n_calls: int = 0
    handler: Any = None
    stdout: str = ""
    stderr: str = ""
    duration_s: float = 0.0
