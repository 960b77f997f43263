"""The RoboEval world: the task files' `State` builder and the trusted simulator behind the sandboxed robot.

`RoboEvalWorld` follows CodeBotler's `benchmark/simulator.py` (State + Robot):
every stored location, object label, agent name and answer is a regular
expression searched case-insensitively in the argument; `ask` returns the
first option the person's next answer is found in, else (answer found in the
question) the first option containing "yes", else the first containing "no"
(which also matches "know", "Not", "None"), and fails only when none is
found; `place` needs the exact string that was picked and stores it as a new
object label (a pattern). A failed call returns CodeBotler's error message,
which the robot in the sandbox raises as an exception the program may catch.

Patterns a program can supply (labels it placed, rooms it appended to the
list `get_all_rooms()` returned) are searched with a time limit, so no pattern
can stall this trusted process.
"""

from __future__ import annotations

import copy
import time
from typing import Any

import regex

from densecode.eval.roboeval.rtl import TraceElement

MATCH_TIMEOUT_S = 0.05  # per regex search of a pattern that may come from the program


class State:
    """RoboEval's world builder, as task files call it (methods return self for chaining)."""

    def __init__(self):
        self.locations: list[str] = []
        self.objects: dict[str, list[str]] = {}  # location -> labels (patterns)
        self.agents: dict[str, list[tuple[str, list[str]]]] = {}  # location -> (name pattern, answers)
        self.robot_location = ""

    def _need_location(self, location: str, what: str) -> None:
        if location not in self.locations:
            raise ValueError(f"SimulatorError: in {what}: Location {location} not in {self.locations}")

    def addLocation(self, location: str) -> State:  # noqa: N802 - RoboEval's names
        self.locations.append(location)
        return self

    def addObject(self, label: str, location: str) -> State:  # noqa: N802
        self._need_location(location, "addObject")
        self.objects.setdefault(location, []).append(label)
        return self

    def addAgent(self, name: str, location: str, answers: list[str]) -> State:  # noqa: N802
        self._need_location(location, "addAgent")
        self.agents.setdefault(location, []).append((name, answers))
        return self

    def addRobotLocation(self, robot_location: str) -> State:  # noqa: N802
        self._need_location(robot_location, "addRobotLocation")
        self.robot_location = robot_location
        return self

    def to_dict(self) -> dict:
        return {"locations": list(self.locations), "objects": copy.deepcopy(self.objects),
                "agents": {loc: [[n, list(a)] for n, a in agents] for loc, agents in self.agents.items()},
                "robot_location": self.robot_location}


class RobotFailure(Exception):
    """A call the robot cannot perform; its message is CodeBotler's (e.g. "RobotGoToError: ...")."""


def matches(pattern: Any, value: Any) -> bool:
    """CodeBotler's match_value: `re.search(pattern, str(value), IGNORECASE)`, time-limited."""
    if not isinstance(pattern, str):
        raise TypeError("first argument must be string or compiled pattern")
    return regex.search(pattern, str(value), flags=regex.IGNORECASE | regex.V0, timeout=MATCH_TIMEOUT_S) is not None


class RoboEvalWorld:
    """One run's world (a deep copy of a task state) and the trace of the calls it served."""

    def __init__(self, state: State):
        self.locations = list(state.locations)
        self.objects = copy.deepcopy(state.objects)
        self.agents = {loc: [(name, list(answers)) for name, answers in agents] for loc, agents in state.agents.items()}
        self.robot_location = state.robot_location
        self.holding: str | None = None
        self.trace: list[TraceElement] = []

    def _record(self, name: str, value1: str, value2: Any = None) -> None:
        # CodeBotler reads value1 back from a stripped text line
        self.trace.append(TraceElement(name, value1.strip(), value2))

    # ---------------------------------------------------------------- calls (after the robot's type checks)
    def init(self) -> list[str]:
        return list(self.locations)

    def get_current_location(self) -> str:
        return self.robot_location

    def is_in_room(self, entity: str) -> bool:
        self._record("CheckEntity", entity)
        here = self.robot_location
        try:
            return any(matches(label, entity) for label in self.objects.get(here, [])) or any(
                matches(name, entity) for name, _ in self.agents.get(here, []))
        except Exception:  # noqa: BLE001 - CodeBotler turns any failure here into the robot error
            raise RobotFailure("RobotCheckEntityError: object_in_room or agent_in_room failed") from None

    def go_to(self, location: str, rooms: list) -> None:
        """`rooms` is the program's view of get_all_rooms() (a program may have changed that list)."""
        self._record("GoTo", location)
        try:
            for room in rooms:
                if matches(room, location):
                    self.robot_location = room
                    return
        except Exception:  # noqa: BLE001
            pass
        raise RobotFailure("RobotGoToError: update_robot_location failed")

    def ask(self, person: str, question: str, options: list[str]) -> int:
        self._record("Ask", question, list(options))
        if len(options) < 1:
            raise RobotFailure("RobotAskError: invalid options")
        try:
            choice = self._answer(person, question, options)
        except Exception:  # noqa: BLE001
            choice = None
        if choice is None:
            raise RobotFailure("RobotAskError: ask_agent failed")
        return choice

    def _answer(self, person: str, question: str, options: list[str]) -> int | None:
        for name, answers in self.agents.get(self.robot_location, []):
            if not matches(name, person):
                continue
            answer = answers.pop(0) if len(answers) > 1 else answers[0]
            for i, option in enumerate(options):
                if matches(answer, option):
                    return i
            fallback = "yes" if matches(answer, question) else "no"
            for i, option in enumerate(options):
                if matches(fallback, option):
                    return i
        return None

    def say(self, message: str) -> None:
        self._record("Say", message)

    def pick(self, obj: str) -> None:
        if self.holding is not None:
            raise RobotFailure(f"RobotPickError: Robot is already holding {self.holding}")
        labels = self.objects.get(self.robot_location) or []
        try:
            index = next((i for i, label in enumerate(labels) if matches(label, obj)), None)
        except Exception:  # noqa: BLE001
            index = None
        if index is None:
            raise RobotFailure("RobotPickError: removeObject failed")
        del labels[index]
        self.holding = obj
        self._record("Pick", obj)

    def place(self, obj: str, rooms: list) -> None:
        """`rooms`: the program's view of get_all_rooms(); CodeBotler adds the object only to a listed room."""
        if self.holding != obj:
            raise RobotFailure(f"RobotPlaceError: Robot is not holding {obj}")
        self.holding = None
        if self.robot_location not in rooms:
            raise RobotFailure("RobotPlaceError: addObject failed")
        self.objects.setdefault(self.robot_location, []).append(obj)
        self._record("Place", obj)


# the argument shapes the robot sends for each call (anything else comes from a program calling the bridge itself)
CALL_SHAPES = {"init": (), "get_current_location": (), "is_in_room": (str,), "go_to": (str, list), "ask": (str, str, list),
               "say": (str,), "pick": (str,), "place": (str, list)}


class RoboEvalHandler:
    """The trusted side of the API bridge for one (program, state) run."""

    def __init__(self, state: State):
        self.world = RoboEvalWorld(state)
        self.error: dict | None = None
        self.last_line: int | None = None
        self.sim_s = 0.0
        self.trace_lines: list[int | None] = []

    def handle(self, name: str, args: list, kwargs: dict, line: int | None) -> Any:
        from densecode.sandbox import ApiError

        start = time.perf_counter()
        if line is not None:
            self.last_line = line
        method, margs = (args + [None, None])[:2] if isinstance(args, list) else (None, None)
        shape = CALL_SHAPES.get(method) if isinstance(method, str) else None
        if kwargs or shape is None or not isinstance(margs, list) or len(margs) != len(shape) or not all(
                isinstance(a, t) for a, t in zip(margs, shape)):
            self.error = {"kind": "robot", "call": str(method)[:40], "message": "malformed robot call", "line": line}
            raise ApiError("malformed robot call")
        n = len(self.world.trace)
        try:
            value = getattr(self.world, method)(*margs)
            reply = {"v": value}
        except RobotFailure as exc:
            reply = {"e": str(exc)}
        self.trace_lines += [line] * (len(self.world.trace) - n)
        self.sim_s += time.perf_counter() - start
        return reply

    def trace_items(self) -> list[list]:
        return [el.to_list() for el in self.world.trace]

    def finish(self):  # the RoboEval judge reads the trace itself (see evaluate.py)
        raise NotImplementedError
