"""The RoboSim gymnasium environment: one robot API call per `step`.

    env = gymnasium.make("RoboSim-v0")
    obs, info = env.reset(seed=0, options={"world": {...}, "checks": [...]})
    obs, reward, terminated, truncated, info = env.step({"name": "go_to", "args": ["kitchen"]})

Actions: `{"api": int, "args": str}` in the declared space (api indexes
`ACTIONS`, args is a JSON list of positional arguments), or the convenient
`{"name": str, "args": list, "kwargs": dict}`. The last action, "end_program",
says the program returned: the checks are judged and the episode terminates.

Observations: `{"result": JSON of the call's return value, "location": ...,
"holding": ...}`. Reward: 0 for a call, -1 for a robot error (which terminates
the episode), and on "end_program" the share of checks passed (1.0 when all
pass). `info`: the call, its trace element, the error (if any), and on the end
the check verdicts.

Options for `reset`: `world` = a concrete world dict (`rooms`, `objects`,
`people`, `robot`) or `{"dynamic": {"rooms": [...], "robot": ...}}`; `checks`
= JSON check specs (see `robosim.checks`). Without options the environment
picks a generated training task's world from the seed.
"""

from __future__ import annotations

import json
import string
from typing import Any

import gymnasium as gym
from gymnasium import spaces

from densecode_robosim.checks import judge
from densecode_robosim.world import API_NAMES, TRACE_NAMES, DynamicWorld, RobotError, World, bind_args

END = "end_program"
ACTIONS = API_NAMES + (END,)
CHARSET = string.printable
MAX_TEXT = 16384
ROBOT_ERROR_REWARD = -1.0


def _text(value: Any) -> str:
    """JSON text limited to CHARSET and MAX_TEXT (observations must lie in their space)."""
    out = json.dumps(value, ensure_ascii=True)
    return out if len(out) <= MAX_TEXT else out[: MAX_TEXT - 3] + "..."


def _plain(s: str | None) -> str:
    if s is None:
        return ""
    out = s.encode("ascii", "backslashreplace").decode("ascii")
    return "".join(c if c in CHARSET else "?" for c in out)[:MAX_TEXT]


class RoboSimEnv(gym.Env):
    metadata = {"render_modes": ["ansi"], "render_fps": 4}

    def __init__(self, world: dict | None = None, checks: list[dict] | None = None, dynamic: bool = False,
                 max_steps: int = 10000, render_mode: str | None = None):
        self.default_world = world
        self.default_checks = checks or []
        self.dynamic = dynamic
        self.max_steps = max_steps
        self.render_mode = render_mode
        self.action_space = spaces.Dict(
            {"api": spaces.Discrete(len(ACTIONS)), "args": spaces.Text(MAX_TEXT, min_length=0, charset=CHARSET)}
        )
        self.observation_space = spaces.Dict(
            {
                "result": spaces.Text(MAX_TEXT, min_length=0, charset=CHARSET),
                "location": spaces.Text(MAX_TEXT, min_length=0, charset=CHARSET),
                "holding": spaces.Text(MAX_TEXT, min_length=0, charset=CHARSET),
            }
        )
        self.world: World | DynamicWorld | None = None
        self.checks: list[dict] = []
        self.steps = 0
        self.done = False
        self.error: dict | None = None
        self.last_result: Any = None  # the raw return value of the last call (the observation holds its JSON)

    # ------------------------------------------------------------------ gym API
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        options = options or {}
        spec = options.get("world", self.default_world)
        self.checks = list(options.get("checks", self.default_checks if "world" not in options else []))
        if spec is None:
            spec = self._generated_world()
        world_seed = int(self.np_random.integers(0, 2**31 - 1))
        if "dynamic" in spec:
            self.world = DynamicWorld.from_spec(spec["dynamic"], seed=world_seed)
        elif self.dynamic:
            self.world = DynamicWorld.from_spec({"rooms": spec["rooms"], "robot": spec.get("robot")}, seed=world_seed)
        else:
            self.world = World.from_dict(spec)
        self.steps = 0
        self.done = False
        self.error = None
        return self._obs(None), {"world": self.world.to_dict(), "dynamic": self.world.dynamic}

    def step(self, action: dict):
        if self.world is None:
            raise RuntimeError("call reset() before step()")
        if self.done:
            raise RuntimeError("the episode has ended; call reset()")
        self.steps += 1
        name, args, kwargs, bad = self._decode(action)
        n_trace = len(self.world.trace)
        info: dict[str, Any] = {"call": name, "trace_element": None, "error": None}
        if name == END:
            verdicts = judge(self.checks, self.world.trace, self.world, self.world.start)
            self.done = True
            info["checks"] = verdicts
            reward = sum(ok for _, ok in verdicts) / len(verdicts) if verdicts else 1.0
            return self._obs(None), float(reward), True, False, info
        try:
            if bad is not None:
                raise RobotError(name, bad)
            result = self.world.call(name, bind_args(name, args, kwargs))
        except RobotError as exc:
            result = None
            self.error = {"call": exc.call, "message": exc.message}
            info["error"] = self.error
            self.done = True
        self.last_result = result
        if len(self.world.trace) > n_trace:
            info["trace_element"] = self.world.trace[-1].to_list()
        reward = ROBOT_ERROR_REWARD if info["error"] else 0.0
        truncated = not self.done and self.steps >= self.max_steps
        return self._obs(result), reward, self.done, truncated, info

    def render(self):
        if self.world is None:
            return ""
        return f"at {self.world.location!r}, holding {self.world.holding!r}, {len(self.world.trace)} traced calls"

    # ------------------------------------------------------------------ helpers
    def _decode(self, action: Any) -> tuple[str, list, dict, str | None]:
        """(name, args, kwargs, problem) from either action form; a malformed
        action becomes a robot error rather than an exception."""
        if not isinstance(action, dict):
            return "?", [], {}, f"an action is a dict, got {type(action).__name__}"
        if "name" in action:
            name = action["name"]
            if name not in ACTIONS:
                return str(name), [], {}, f"unknown API call {name!r}"
            args = action.get("args", [])
            return name, list(args) if isinstance(args, (list, tuple)) else [args], dict(action.get("kwargs") or {}), None
        api = int(action.get("api", -1))
        if not 0 <= api < len(ACTIONS):
            return "?", [], {}, f"api index {api} out of range"
        name = ACTIONS[api]
        raw = action.get("args", "")
        if raw in ("", None):
            return name, [], {}, None
        try:
            args = json.loads(raw)
        except (TypeError, ValueError):
            return name, [], {}, "args is not a JSON list"
        if not isinstance(args, list):
            return name, [], {}, "args is not a JSON list"
        return name, args, {}, None

    def _obs(self, result: Any) -> dict:
        assert self.world is not None
        return {"result": _text(result), "location": _plain(self.world.location), "holding": _plain(self.world.holding)}

    def _generated_world(self) -> dict:
        from densecode_robosim.tasks import FAMILIES, make_task

        import random

        names = sorted(FAMILIES)
        rng = random.Random(int(self.np_random.integers(0, 2**31 - 1)))
        task = make_task(names[rng.randrange(len(names))], rng)
        world = task.worlds[0]
        self.checks = task.checks + world["checks"]
        return world["state"]


def action(name: str, *args: Any, **kwargs: Any) -> dict:
    """A convenient action dict: `env.step(action("go_to", "kitchen"))`."""
    return {"name": name, "args": list(args), "kwargs": kwargs}


__all__ = ["ACTIONS", "END", "RoboSimEnv", "TRACE_NAMES", "action"]
