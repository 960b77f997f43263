"""`GymProgramBackend`: run programs against any gymnasium environment.

The program runs in the sandbox (through `runner.run_jobs`) with the binding's
function names bound as plain functions; each call comes back to this process,
becomes one `env.step(action)` (see `binding.py`), and its result goes back to
the program. Runs end in the runner's outcome classes and get the backend's
one `feedback()`, exactly as RoboSim's.

Tasks are dicts: `task_id`, `instruction` (or `prompt`), optional `seed`,
`reset_options` (passed to `env.reset(options=...)`), `timeout` (True when the
program is expected to run until stopped).
"""

from __future__ import annotations

import importlib
import time
from typing import Any

import gymnasium as gym

from densecode.errors import DensecodeError
from densecode.simulators.backend import ProgramBackend
from densecode.simulators.binding import ApiBinding, CallError, extract
from densecode.simulators.runner import SEVERITY, RunResult, SimJob, Verdict, parse_error

PROGRAM_HEADER = "def task_program():\n"


def make_env_factory(spec: str, env_kwargs: dict | None = None):
    """A zero-argument env constructor from a gymnasium id or "module:Class"."""
    kwargs = dict(env_kwargs or {})
    module_name, _, attr = spec.partition(":")
    if attr.isidentifier():  # "package.module:EnvClass" (gymnasium's "module:Env-v0" ids are not identifiers)
        try:
            cls = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as exc:
            raise DensecodeError(f"simulator {spec!r} cannot be imported ({exc}); use 'package.module:EnvClass' "
                                 "or a registered gymnasium env id") from None
        return lambda: cls(**kwargs)
    if attr:
        return lambda: gym.make(spec, **kwargs)
    if spec not in gym.registry:
        raise DensecodeError(f"simulator {spec!r} is not a registered gymnasium env id (import the package that "
                             "registers it first, or use 'package.module:EnvClass')")
    return lambda: gym.make(spec, **kwargs)


def to_plain(value: Any) -> Any:
    """JSON-able copy of an env value (numpy arrays/scalars, tuples)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, dict):
        return {str(k): to_plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_plain(v) for v in value]
    return str(value)


class GymApiHandler:
    """Parent side of the API bridge for one run: one call = one env.step."""

    def __init__(self, env_factory, binding: ApiBinding, task: dict, seed: int):
        start = time.perf_counter()
        self.env = env_factory()
        self.env.reset(seed=seed, options=task.get("reset_options"))
        self.binding = binding
        self.trace: list[list] = []  # [function, args, result]
        self.rewards = 0.0
        self.ended = False
        self.error: dict | None = None
        self.last_line: int | None = None
        self.sim_s = time.perf_counter() - start

    def handle(self, name: str, args: list, kwargs: dict, line: int | None) -> Any:
        from densecode.sandbox import ApiError

        start = time.perf_counter()
        if line is not None:
            self.last_line = line
        try:
            if self.ended:
                raise CallError("the episode has already ended")
            action = self.binding.functions[name].build_action(list(args), dict(kwargs))
            try:
                obs, reward, terminated, truncated, info = self.env.step(action)
            except Exception as exc:  # noqa: BLE001 - an env rejecting an action is the call's failure
                raise CallError(f"the environment rejected the action: {type(exc).__name__}: {exc}") from None
            step = {"obs": obs, "info": info, "reward": reward, "terminated": terminated, "truncated": truncated}
            self.rewards += float(reward)
            message = extract(self.binding.error, step) if self.binding.error else None
            if message:
                raise CallError(str(message))
            self.ended = bool(terminated or truncated)
            result = to_plain(extract(self.binding.functions[name].result, step))
        except CallError as exc:
            self.error = {"kind": "robot", "call": name, "message": str(exc), "line": line}
            self.trace.append([name, to_plain(list(args)), None])
            self.sim_s += time.perf_counter() - start
            raise ApiError(f"{name}: {exc}") from None
        self.trace.append([name, to_plain(list(args)), result])
        self.sim_s += time.perf_counter() - start
        return result

    def trace_items(self) -> list[list]:
        return list(self.trace)

    def finish(self) -> Verdict:
        """The run's score in [0, 1] once the program has returned (or was stopped as expected)."""
        start = time.perf_counter()
        score = 1.0
        if self.binding.score == "reward_sum":
            score = self.rewards
        elif self.binding.score == "end_reward":
            score = 0.0
            if not self.ended:
                try:
                    _, reward, *_ = self.env.step(self.binding.end_action)
                    score = float(reward)
                except Exception:  # noqa: BLE001
                    score = 0.0
        self.sim_s += time.perf_counter() - start
        score = min(max(float(score), 0.0), 1.0)
        return Verdict(success=score >= 1.0, progress=score)


class GymProgramBackend(ProgramBackend):
    """The `sim` reward's backend for any gymnasium env plus an API binding."""

    def __init__(self, simulator: str, binding: ApiBinding, env_kwargs: dict | None = None, runs: int = 1,
                 timeout_s: float = 1.0, max_calls: int = 1000, clean_credit: float = 0.25,
                 error_penalty: float = -1.0, pool: Any = None):
        super().__init__(clean_credit=clean_credit, check_credit=1.0, error_penalty=error_penalty,
                         timeout_s=timeout_s, max_calls=max_calls, pool=pool)
        self.simulator = simulator
        self.env_factory = make_env_factory(simulator, env_kwargs)
        self.binding = binding
        self.runs = runs

    @classmethod
    def from_config(cls, opts: dict, pool: Any = None) -> GymProgramBackend:
        if not opts.get("simulator"):
            raise DensecodeError("tasks.simulator is not set: name a gymnasium env id or 'package.module:EnvClass'")
        return cls(
            simulator=str(opts["simulator"]),
            binding=ApiBinding.from_config(opts),
            env_kwargs=opts.get("env_kwargs") or {},
            runs=int(opts.get("runs", 1)),
            timeout_s=float(opts.get("timeout_s", 1.0)),
            max_calls=int(opts.get("max_calls", 1000)),
            clean_credit=float(opts.get("clean_credit", 0.25)),
            pool=pool,
        )

    def jobs_for(self, program: str, task: dict) -> list[SimJob | RunResult]:
        """`self.runs` runs of the pair (seeds task seed + k)."""
        program = program if "def task_program(" in program else PROGRAM_HEADER + program
        err = parse_error(program)
        if err is not None:
            return [RunResult("parse_error", error=err) for _ in range(self.runs)]
        base = int(task.get("seed", 0))
        return [SimJob(program, self.binding.names, expects_timeout=bool(task.get("timeout")),
                       handler_factory=lambda seed=base + k: GymApiHandler(self.env_factory, self.binding, task, seed))
                for k in range(self.runs)]

    def outcomes(self, programs: list[str], tasks: list[dict]) -> list[str]:
        """The most severe outcome per (program, task)."""
        return [min((r.outcome for r in runs), key=SEVERITY.__getitem__) for runs in self.run(programs, tasks)]
