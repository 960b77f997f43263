"""`GymProgramBackend`: run programs against any gymnasium environment.

The program runs in the sandbox (through `runner.run_jobs`) with the binding's
function names bound as plain functions; each call comes back to this process,
becomes one `env.step(action)` (see `binding.py`), and its result goes back to
the program. Runs end in the runner's outcome classes and get the backend's
one `feedback()`, exactly as RoboSim's.

Tasks are dicts: `task_id`, `instruction` (or `prompt`), optional `seed`,
`reset_options` (passed to `env.reset(options=...)`), `timeout` (True when the
program is expected to run until stopped).

Whose fault a failure is:
- the program's (a robot error on its line): a call that does not fit the
  binding (wrong arguments), a truthy value at the binding's `error` path;
- the simulator's (`simulator_error`: counted in `backend.simulator_errors`,
  logged once per task with its traceback, never charged to the program): the
  env's constructor, `reset` or `step` raising, or a `result` path that does
  not exist in the step's real outputs. An env must report a bad call through
  its `error` path, never by raising: a program that makes the env raise
  escapes its penalty, which is why `densecode check` lists every such run.
  (Action spaces are not used to judge calls: many envs, RoboSim included,
  accept actions outside their declared space.)
"""

from __future__ import annotations

import importlib
import logging
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym

from densecode.errors import DensecodeError
from densecode.simulators.backend import ProgramBackend
from densecode.simulators.binding import (
    MISSING,
    ApiBinding,
    CallError,
    describe_missing,
    extract,
)
from densecode.simulators.runner import (
    SEVERITY,
    RunResult,
    SimJob,
    Verdict,
    parse_error,
)

PROGRAM_HEADER = "def task_program():\n"
log = logging.getLogger("densecode.simulators")


def import_module_near(module_name: str, base_dir: str | Path | None, what: str):
    """Import `module_name` from the import path or, failing that, from the config's folder `base_dir`.

    The folder stays on `sys.path` once a module was found there (the env's own imports and later gym.make calls
    need it); the error names every place searched.
    """
    folder = str(Path(base_dir).resolve()) if base_dir is not None else None
    added = folder is not None and folder not in sys.path
    if added:
        sys.path.insert(0, folder)
    try:
        return importlib.import_module(module_name)
    except ImportError as exc:
        if added:
            sys.path.remove(folder)
        searched = f"the import path and the config's folder {folder}" if folder else "the import path"
        raise DensecodeError(f"{what}: cannot import {module_name!r} (searched {searched}): {exc}") from None


def make_env_factory(spec: str, env_kwargs: dict | None = None, base_dir: str | Path | None = None):
    """A zero-argument env constructor from a gymnasium id or "module:Class" (module beside the config, too)."""
    kwargs = dict(env_kwargs or {})
    module_name, _, attr = spec.partition(":")
    if attr.isidentifier():  # "package.module:EnvClass" (gymnasium's "module:Env-v0" ids are not identifiers)
        module = import_module_near(module_name, base_dir, f"tasks.simulator {spec!r}")
        cls = getattr(module, attr, None)
        if not callable(cls):
            raise DensecodeError(f"tasks.simulator {spec!r}: module {module_name!r} ({module.__file__}) has no class "
                                 f"{attr!r}; use 'package.module:EnvClass' or a registered gymnasium env id")
        return lambda: cls(**kwargs)
    if attr:
        import_module_near(module_name, base_dir, f"tasks.simulator {spec!r}")
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
    """Parent side of the API bridge for one run: one call = one env.step.

    `observe(name, step)`, if given, sees every step's outputs (`densecode check` uses it to test the binding's
    paths against real steps).
    """

    def __init__(self, env_factory, binding: ApiBinding, task: dict, seed: int,
                 observe: Callable[[str, dict], None] | None = None):
        start = time.perf_counter()
        self.binding = binding
        self.task_id = task.get("task_id")
        self.observe = observe
        self.trace: list[list] = []  # [function, args, result]
        self.rewards = 0.0
        self.ended = False
        self.error: dict | None = None
        self.simulator_error: dict | None = None
        self.last_line: int | None = None
        self.env = None
        try:
            self.env = env_factory()
        except Exception as exc:  # noqa: BLE001 - the env's bug, not the program's
            self._simulator_failed("constructor", exc)
        else:
            try:
                self.env.reset(seed=seed, options=task.get("reset_options"))
            except Exception as exc:  # noqa: BLE001
                self._simulator_failed("reset", exc)
        self.sim_s = time.perf_counter() - start

    def _simulator_failed(self, where: str, exc: BaseException | str) -> None:
        if isinstance(exc, BaseException):
            frames = traceback.extract_tb(exc.__traceback__)
            at = f" (at {Path(frames[-1].filename).name}:{frames[-1].lineno})" if frames else ""
            message = f"{type(exc).__name__}: {exc}{at}"
            tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        else:
            message, tb = str(exc), ""
        if self.simulator_error is None:
            self.simulator_error = {"kind": "simulator", "where": where, "type": "SimulatorError",
                                    "message": f"{where}: {message}", "traceback": tb, "task_id": self.task_id}

    def handle(self, name: str, args: list, kwargs: dict, line: int | None) -> Any:
        from densecode.sandbox import ApiError

        start = time.perf_counter()
        if line is not None:
            self.last_line = line
        if self.simulator_error is not None:  # nothing to drive: end the run, it is not judged
            raise ApiError(f"{name}: the simulator failed ({self.simulator_error['message']})")
        fn = self.binding.functions[name]
        try:
            if self.ended:
                raise CallError("the episode has already ended")
            action = fn.build_action(list(args), dict(kwargs))
            try:
                obs, reward, terminated, truncated, info = self.env.step(action)
            except Exception as exc:  # noqa: BLE001 - a valid action that crashes the env is the env's bug
                self._simulator_failed(f"step({name})", exc)
                raise ApiError(f"{name}: the simulator failed") from None
            step = {"obs": obs, "info": info, "reward": reward, "terminated": terminated, "truncated": truncated}
            if self.observe is not None:
                self.observe(name, step)
            self.rewards += float(reward)
            message = extract(self.binding.error, step) if self.binding.error else None
            if message:
                raise CallError(str(message))
            self.ended = bool(terminated or truncated)
            value = extract(fn.result, step, missing=MISSING)
            if value is MISSING:
                self._simulator_failed(f"binding of {name}()", f"tasks.api.{name}.result {fn.result!r} does not "
                                       f"resolve on a real step: {describe_missing(fn.result, step)}")
                raise ApiError(f"{name}: the binding failed") from None
            result = to_plain(value)
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
        if self.simulator_error is not None:
            return Verdict(success=False, progress=0.0)
        if self.binding.score == "reward_sum":
            score = self.rewards
        elif self.binding.score == "end_reward":
            score = 0.0
            if not self.ended:
                try:
                    _, reward, *_ = self.env.step(self.binding.end_action)
                    score = float(reward)
                except Exception as exc:  # noqa: BLE001 - the end action is the config's, not the program's
                    self._simulator_failed("step(tasks.end_action)", exc)
        self.sim_s += time.perf_counter() - start
        score = min(max(float(score), 0.0), 1.0)
        return Verdict(success=score >= 1.0, progress=score)


class GymProgramBackend(ProgramBackend):
    """The `sim` reward's backend for any gymnasium env plus an API binding."""

    def __init__(self, simulator: str, binding: ApiBinding, env_kwargs: dict | None = None, runs: int = 1,
                 timeout_s: float = 1.0, max_calls: int = 1000, clean_credit: float = 0.25,
                 error_penalty: float = -1.0, pool: Any = None, base_dir: str | Path | None = None):
        super().__init__(clean_credit=clean_credit, check_credit=1.0, error_penalty=error_penalty,
                         timeout_s=timeout_s, max_calls=max_calls, pool=pool)
        self.simulator = simulator
        self.env_factory = make_env_factory(simulator, env_kwargs, base_dir)
        self.binding = binding
        self.runs = runs
        self.observe: Callable[[str, dict], None] | None = None  # sees every step (densecode check)
        self.simulator_errors = 0  # runs that ended in a simulator bug, since this backend was made
        # Does tasks.error ever resolve on a real step? A misspelt path would turn every robot error into a clean
        # run: warned about once, also when nobody ran `densecode check`.
        self.steps_seen = 0
        self.error_path_seen = 0
        self._warned_error_path = False
        self._error_example = ""  # why the error path did not resolve on a step
        self._logged: set = set()
        self._lock = threading.Lock()

    def _observe(self, name: str, step: dict) -> None:
        self.steps_seen += 1
        if self.binding.error and extract(self.binding.error, step, missing=MISSING) is not MISSING:
            self.error_path_seen += 1
        elif self.binding.error and not self._error_example:
            self._error_example = describe_missing(self.binding.error, step)
        if self.observe is not None:
            self.observe(name, step)

    ERROR_PATH_WARN_STEPS = 50

    def run(self, programs: list[str], tasks: list[dict]) -> list[list[RunResult]]:
        out = super().run(programs, tasks)
        for task, runs in zip(tasks, out):
            for r in runs:
                if r.outcome == "simulator_error":
                    self._report(task, r.error or {})
        if (self.binding.error and not self.error_path_seen and self.steps_seen >= self.ERROR_PATH_WARN_STEPS
                and not self._warned_error_path):
            self._warned_error_path = True
            log.warning("tasks.error %r resolved on none of %d real steps (%s): failed calls are not being detected "
                        "as robot errors; run `densecode check --config ...`", self.binding.error, self.steps_seen,
                        self._error_example)
        return out

    def _report(self, task: dict, error: dict) -> None:
        """Count a simulator bug; log it (with its traceback) once per task and failure."""
        with self._lock:
            self.simulator_errors += 1
            key = (str(task.get("task_id")), error.get("message"))
            if key in self._logged:
                return
            self._logged.add(key)
        log.error("simulator bug (not charged to the program) on task %s: %s\n%s", task.get("task_id"),
                  error.get("message"), error.get("traceback") or "")

    @classmethod
    def from_config(cls, opts: dict, pool: Any = None, base_dir: str | Path | None = None) -> GymProgramBackend:
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
            base_dir=base_dir,
        )

    def jobs_for(self, program: str, task: dict) -> list[SimJob | RunResult]:
        """`self.runs` runs of the pair (seeds task seed + k)."""
        program = program if "def task_program(" in program else PROGRAM_HEADER + program
        err = parse_error(program)
        if err is not None:
            return [RunResult("parse_error", error=err) for _ in range(self.runs)]
        base = int(task.get("seed", 0))
        return [SimJob(program, self.binding.names, expects_timeout=bool(task.get("timeout")),
                       handler_factory=lambda seed=base + k: GymApiHandler(self.env_factory, self.binding, task, seed,
                                                                           observe=self._observe))
                for k in range(self.runs)]

    def outcomes(self, programs: list[str], tasks: list[dict]) -> list[str]:
        """The most severe outcome per (program, task)."""
        return [min((r.outcome for r in runs), key=SEVERITY.__getitem__) for runs in self.run(programs, tasks)]
