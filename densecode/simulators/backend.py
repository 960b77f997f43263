"""`GymProgramBackend`: run programs against any gymnasium environment.

The program runs in the sandbox with the binding's function names bound as
plain functions; each call comes back to this process, becomes one
`env.step(action)` (see `binding.py`), and its result goes back to the program.
A run ends as: parse_error, python_error (type, message, line), robot_error
(the call, the env's message, line), timeout, check_failure or success —
the same classes as RoboSim, and the same `SimFeedback` for the `sim` reward.

Tasks are dicts: `task_id`, `instruction` (or `prompt`), optional `seed`,
`reset_options` (passed to `env.reset(options=...)`), `timeout` (True when the
program is expected to run until stopped).
"""

from __future__ import annotations

import ast
import importlib
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from densecode.errors import DensecodeError
from densecode.rewards.base import SimFeedback
from densecode.simulators.binding import ApiBinding, CallError, extract

PROGRAM_HEADER = "def task_program():\n"
OUTCOMES = ("parse_error", "python_error", "robot_error", "timeout", "check_failure", "success")
SEVERITY = {name: i for i, name in enumerate(OUTCOMES)}


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


@dataclass
class PluginRun:
    outcome: str
    error: dict | None = None
    score: float = 0.0
    trace: list[list] = field(default_factory=list)  # [function, args, result]
    n_calls: int = 0
    duration_s: float = 0.0
    sim_s: float = 0.0

    @property
    def clean(self) -> bool:
        return self.outcome in ("success", "check_failure")


class GymApiHandler:
    """Parent side of the API bridge for one run: one call = one env.step."""

    def __init__(self, env_factory, binding: ApiBinding, task: dict, seed: int):
        start = time.perf_counter()
        self.env = env_factory()
        self.env.reset(seed=seed, options=task.get("reset_options"))
        self.binding = binding
        self.trace: list[list] = []
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

    def finish(self) -> float:
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
        return min(max(float(score), 0.0), 1.0)


def parse_error(program: str) -> dict | None:
    """The program's syntax error as an error dict, or None (parsing only, nothing runs)."""
    try:
        ast.parse(program)
    except SyntaxError as exc:
        return {"kind": "parse", "type": "SyntaxError", "message": exc.msg or str(exc), "line": exc.lineno}
    except (ValueError, RecursionError, MemoryError) as exc:
        return {"kind": "parse", "type": type(exc).__name__, "message": str(exc), "line": None}
    return None


def _classify(res: Any, expects_timeout: bool) -> PluginRun:
    handler: GymApiHandler | None = res.handler
    run = PluginRun("success", trace=handler.trace if handler else [], n_calls=res.n_calls,
                    duration_s=res.duration_s, sim_s=handler.sim_s if handler else 0.0)
    if res.outcome == "api_error":
        api = res.api_error or {}
        run.error = (handler.error if handler and handler.error else
                     {"kind": "robot", "call": api.get("name"), "message": api.get("message"), "line": api.get("line")})
        run.outcome = "robot_error"
    elif res.outcome in ("timeout", "call_limit") and not expects_timeout:
        run.outcome = "timeout"
        run.error = {"kind": "timeout", "type": res.outcome, "message": "ran past its limit",
                     "line": handler.last_line if handler else None}
    elif res.outcome not in ("ok", "timeout", "call_limit"):
        run.outcome = "python_error"
        run.error = {"kind": "python", "type": res.exc_type or res.outcome, "message": res.exc_message or res.outcome,
                     "line": res.error_line}
    else:
        run.score = handler.finish() if handler else 0.0
        run.sim_s = handler.sim_s if handler else 0.0
        run.outcome = "success" if run.score >= 1.0 else "check_failure"
    return run


class GymProgramBackend:
    """The `sim` reward's backend for any gymnasium env plus an API binding."""

    def __init__(self, simulator: str, binding: ApiBinding, env_kwargs: dict | None = None, runs: int = 1,
                 timeout_s: float = 1.0, max_calls: int = 1000, clean_credit: float = 0.25,
                 error_penalty: float = -1.0, pool: Any = None):
        self.simulator = simulator
        self.env_factory = make_env_factory(simulator, env_kwargs)
        self.binding = binding
        self.runs = runs
        self.timeout_s = timeout_s
        self.max_calls = max_calls
        self.clean_credit = clean_credit
        self.error_penalty = error_penalty
        self.pool = pool

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

    def run(self, programs: list[str], tasks: list[dict]) -> list[list[PluginRun]]:
        """Every (program, task) pair run `self.runs` times (seeds task seed + k)."""
        from densecode.sandbox import ApiJob, get_default_pool

        out: list[list[PluginRun]] = [[] for _ in programs]
        jobs, owner = [], []
        for i, (program, task) in enumerate(zip(programs, tasks)):
            program = program if "def task_program(" in program else PROGRAM_HEADER + program
            err = parse_error(program)
            for k in range(self.runs):
                if err is not None:
                    out[i].append(PluginRun("parse_error", error=err))
                    continue
                seed = int(task.get("seed", 0)) + k
                jobs.append(ApiJob(
                    code=program, api_names=self.binding.names, call="task_program()",
                    handler_factory=lambda task=task, seed=seed: GymApiHandler(self.env_factory, self.binding, task, seed),
                    timeout_s=self.timeout_s, max_calls=self.max_calls,
                ))
                owner.append(i)
        if jobs:
            pool = self.pool if self.pool is not None else get_default_pool()
            for i, res in zip(owner, pool.run_api(jobs)):
                out[i].append(_classify(res, bool(tasks[i].get("timeout"))))
        return out

    def evaluate(self, programs: list[str], tasks: list[dict]) -> list[SimFeedback]:
        return [self.feedback(runs) for runs in self.run(programs, tasks)]

    def feedback(self, runs: list[PluginRun]) -> SimFeedback:
        n = max(len(runs), 1)
        scores = []
        for r in runs:
            if not r.clean:
                scores.append(0.0)
            elif self.binding.score == "clean":
                scores.append(1.0)
            else:
                scores.append(self.clean_credit + (1.0 - self.clean_credit) * r.score)
        penalties: dict[tuple[int, str], float] = defaultdict(float)
        for r in runs:
            if r.error and r.error.get("line"):
                reason = (f"robot error in {r.error.get('call')}: {r.error.get('message')}" if r.error["kind"] == "robot"
                          else f"{r.error.get('type')}: {r.error.get('message')}")
                penalties[(int(r.error["line"]), reason)] += self.error_penalty / n
        info = {"runs": len(runs), "clean_runs": sum(r.clean for r in runs),
                "successes": sum(r.outcome == "success" for r in runs), "sim_s": sum(r.sim_s for r in runs)}
        return SimFeedback(score=sum(scores) / n,
                           line_penalties=[(ln, v, why) for (ln, why), v in sorted(penalties.items())], info=info)

    def outcomes(self, programs: list[str], tasks: list[dict]) -> list[str]:
        """The most severe outcome per (program, task)."""
        return [min((r.outcome for r in runs), key=SEVERITY.__getitem__) for runs in self.run(programs, tasks)]
