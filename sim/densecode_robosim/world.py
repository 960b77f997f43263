"""The robot's world: concrete (RoboEval semantics) and dynamic (angelic) worlds.

Both expose `call(name, args) -> result`, append traced calls to `self.trace`
and raise `RobotError` for a call the robot cannot perform. The eight API calls:

    get_current_location() -> str      get_all_rooms() -> list[str]
    is_in_room(obj) -> bool            go_to(location)
    ask(person, question, options) -> str
    say(message)                       pick(obj)          place(obj)

Concrete worlds follow RoboEval exactly, quirks included: every stored room,
object label, person name and answer is a regular expression matched with
`re.search(stored, argument, re.IGNORECASE)`; a person named ".*" makes
`is_in_room` true for anything in that room; `ask` ignores the person argument.

Dynamic worlds invent the world as the program queries it, consistently and
seeded: an entity once seen stays until picked, an entity once found absent
stays absent, a person asked must be (or become) present, answers are drawn
from the options offered.
"""

from __future__ import annotations

import copy
import random
import re
from typing import Any

from densecode_robosim.trace import TraceElement

API_NAMES = ("get_current_location", "get_all_rooms", "is_in_room", "go_to", "ask", "say", "pick", "place")
API_PARAMS = {
    "get_current_location": (),
    "get_all_rooms": (),
    "is_in_room": ("obj",),
    "go_to": ("location",),
    "ask": ("person", "question", "options"),
    "say": ("message",),
    "pick": ("obj",),
    "place": ("obj",),
}
TRACE_NAMES = {"go_to": "GoTo", "is_in_room": "CheckEntity", "ask": "Ask", "say": "Say", "pick": "Pick", "place": "Place"}
MAX_ARG_CHARS = 2000
MAX_OPTIONS = 100
# Queries that mean "any person" (is_in_room("person"), ask("someone", ...)).
PERSON_WORDS = ("person", "people", "someone", "somebody", "anyone", "anybody", "human", "individual", "occupant")


class RobotError(Exception):
    """A call the robot cannot perform (the program's run ends here)."""

    def __init__(self, call: str, message: str):
        super().__init__(f"{call}: {message}")
        self.call = call
        self.message = message


def bind_args(name: str, args: list | tuple, kwargs: dict | None = None) -> list:
    """Positional argument list for API call `name`, or RobotError on a bad call shape."""
    if name not in API_PARAMS:
        raise RobotError(name, f"unknown robot API call {name!r}")
    params = API_PARAMS[name]
    args = list(args or [])
    kwargs = dict(kwargs or {})
    if len(args) > len(params):
        raise RobotError(name, f"{name}() takes {len(params)} argument(s) but {len(args)} were given")
    for p in params[len(args) :]:
        if p not in kwargs:
            raise RobotError(name, f"{name}() missing argument {p!r}")
        args.append(kwargs.pop(p))
    if kwargs:
        raise RobotError(name, f"{name}() got unexpected keyword argument(s) {sorted(kwargs)}")
    for value in args:
        # bounds keep regex matching in the trusted process cheap whatever the program sends
        if isinstance(value, str) and len(value) > MAX_ARG_CHARS:
            raise RobotError(name, f"a string argument longer than {MAX_ARG_CHARS} characters")
        if isinstance(value, list) and (len(value) > MAX_OPTIONS or any(
                isinstance(v, str) and len(v) > MAX_ARG_CHARS for v in value)):
            raise RobotError(name, f"a list argument over {MAX_OPTIONS} items or with over-long strings")
    return args


def _need_str(call: str, value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise RobotError(call, f"{what} must be a string, got {type(value).__name__}")
    return value


def _search(pattern: str, text: str) -> bool:
    try:
        return re.search(pattern, text, re.IGNORECASE) is not None
    except re.error:
        return pattern.lower() in text.lower()


class World:
    """A concrete world in RoboEval's shape (see module docstring)."""

    dynamic = False

    def __init__(
        self,
        rooms: list[str],
        objects: list[list[str]] | None = None,
        people: list[list] | None = None,
        robot: str = "start_loc",
        holding: str | None = None,
    ):
        self.rooms = list(rooms)
        self.objects = [[str(label), str(room)] for label, room in (objects or [])]
        self.people = [[str(name), str(room), [str(a) for a in answers]] for name, room, answers in (people or [])]
        self.location = robot
        self.start = robot
        self.holding = holding
        self.trace: list[TraceElement] = []

    # -------------------------------------------------------------- conversion
    @classmethod
    def from_dict(cls, data: dict) -> World:
        if not isinstance(data, dict) or "rooms" not in data:
            raise ValueError(f"a concrete world needs a 'rooms' list, got {data!r}")
        return cls(
            rooms=data["rooms"],
            objects=data.get("objects", []),
            people=data.get("people", []),
            robot=data.get("robot", "start_loc"),
            holding=data.get("holding"),
        )

    def to_dict(self) -> dict:
        return {
            "rooms": list(self.rooms),
            "objects": copy.deepcopy(self.objects),
            "people": copy.deepcopy(self.people),
            "robot": self.location,
            "holding": self.holding,
        }

    def state(self) -> dict:
        return {"location": self.location, "holding": self.holding}

    # -------------------------------------------------------------- dispatch
    def call(self, name: str, args: list | tuple = (), kwargs: dict | None = None) -> Any:
        args = bind_args(name, args, kwargs)
        return getattr(self, name)(*args)

    def _record(self, name: str, value1: Any, value2: Any = None) -> None:
        self.trace.append(TraceElement(name, value1, value2))

    # -------------------------------------------------------------- API
    def get_current_location(self) -> str:
        return self.location

    def get_all_rooms(self) -> list[str]:
        return list(self.rooms)

    def go_to(self, location: Any) -> None:
        self._record("GoTo", location)  # recorded before validation, as RoboEval does
        _need_str("go_to", location, "location")
        for room in self.rooms:
            if _search(room, location):
                self.location = room
                return None
        raise RobotError("go_to", f"there is no location matching {location!r}")

    def is_in_room(self, obj: Any) -> bool:
        self._record("CheckEntity", obj)
        _need_str("is_in_room", obj, "object")
        here = self.location
        return any(room == here and _search(label, obj) for label, room in self.objects) or any(
            room == here and _search(name, obj) for name, room, _ in self.people
        )

    def ask(self, person: Any, question: Any, options: Any) -> str:
        self._record("Ask", question, options)
        _need_str("ask", person, "person")
        _need_str("ask", question, "question")
        if not isinstance(options, list) or not all(isinstance(o, str) for o in options):
            raise RobotError("ask", "options must be a list of strings")
        if not options:
            raise RobotError("ask", "options must not be empty")
        agent = next((p for p in self.people if p[1] == self.location), None)
        if agent is None:
            raise RobotError("ask", f"there is nobody to ask in {self.location!r}")
        answers = agent[2]
        if not answers:
            raise RobotError("ask", "the person has no answer")
        answer = answers.pop(0) if len(answers) > 1 else answers[0]  # the last answer repeats forever
        for option in options:
            if _search(answer, option):
                return option
        if _search(answer, question):
            for word in ("yes", "no"):
                for option in options:
                    if _search(word, option):
                        return option
        raise RobotError("ask", f"the person's answer fits none of the options {options!r}")

    def say(self, message: Any) -> None:
        self._record("Say", message)
        _need_str("say", message, "message")

    def pick(self, obj: Any) -> None:
        self._record("Pick", obj)
        _need_str("pick", obj, "object")
        if self.holding is not None:
            raise RobotError("pick", f"already holding {self.holding!r}; place it first")
        for i, (label, room) in enumerate(self.objects):
            if room == self.location and _search(label, obj):
                del self.objects[i]
                self.holding = obj
                return None
        raise RobotError("pick", f"there is no {obj!r} in {self.location!r}")

    def place(self, obj: Any) -> None:
        self._record("Place", obj)
        _need_str("place", obj, "object")
        if self.holding is None:
            raise RobotError("place", f"not holding anything, cannot place {obj!r}")
        if self.holding.lower() != obj.lower():
            raise RobotError("place", f"holding {self.holding!r}, not {obj!r}")
        self.objects.append([re.escape(self.holding), self.location])
        self.holding = None
        return None

    # -------------------------------------------------------------- queries for checks
    def object_in(self, obj: str, room: str) -> bool:
        return any(r == room and (_search(label, obj) or _search(obj, label)) for label, r in self.objects)


def _key(text: str) -> str:
    return " ".join(text.lower().split())


def _is_person_word(text: str) -> bool:
    return any(re.search(rf"\b{w}\b", text.lower()) for w in PERSON_WORDS)


class DynamicWorld:
    """An angelic world: rooms are fixed; objects and people are decided (seeded)
    the first time the program asks about them, then stay consistent."""

    dynamic = True

    def __init__(
        self,
        rooms: list[str],
        robot: str | None = None,
        seed: int = 0,
        p_object: float = 0.5,
        p_person: float = 0.5,
        known: list[list] | None = None,
    ):
        if not rooms:
            raise ValueError("a dynamic world needs at least one room")
        self.rooms = list(rooms)
        self.rng = random.Random(seed)
        self.p_object = p_object
        self.p_person = p_person
        self.location = robot if robot is not None else self.rooms[0]
        self.start = self.location
        self.holding: str | None = None
        # facts[(room, entity)] = count present (0 = established absent)
        self.facts: dict[tuple[str, str], int] = {}
        self.people_here: dict[str, bool] = {}  # room -> some person present
        for room, entity, present in known or []:
            self.facts[(room, _key(entity))] = int(present)
        self.trace: list[TraceElement] = []

    @classmethod
    def from_spec(cls, spec: dict, seed: int = 0) -> DynamicWorld:
        return cls(
            rooms=spec["rooms"],
            robot=spec.get("robot"),
            seed=seed,
            p_object=spec.get("p_object", 0.5),
            p_person=spec.get("p_person", 0.5),
            known=spec.get("known"),
        )

    def to_dict(self) -> dict:
        return {
            "rooms": list(self.rooms),
            "robot": self.location,
            "holding": self.holding,
            "facts": [[room, ent, n] for (room, ent), n in sorted(self.facts.items())],
        }

    def state(self) -> dict:
        return {"location": self.location, "holding": self.holding}

    def call(self, name: str, args: list | tuple = (), kwargs: dict | None = None) -> Any:
        args = bind_args(name, args, kwargs)
        return getattr(self, name)(*args)

    def _record(self, name: str, value1: Any, value2: Any = None) -> None:
        self.trace.append(TraceElement(name, value1, value2))

    def _nonempty(self, call: str, value: Any, what: str) -> str:
        _need_str(call, value, what)
        if not value.strip():
            raise RobotError(call, f"{what} must not be empty")
        return value

    # -------------------------------------------------------------- consistency
    def _person_present(self, room: str, name: str | None) -> bool:
        """Decide (once) whether a person (named or any) is in `room`."""
        if name is not None and not _is_person_word(name):
            key = (room, _key(name))
            if key not in self.facts:
                if self.people_here.get(room) is False:
                    self.facts[key] = 0
                else:
                    self.facts[key] = int(self.rng.random() < self.p_person)
                if self.facts[key]:
                    self.people_here[room] = True
            return bool(self.facts[key])
        if room not in self.people_here:
            self.people_here[room] = self.rng.random() < self.p_person
        return self.people_here[room]

    def _object_count(self, room: str, obj: str) -> int:
        key = (room, _key(obj))
        if key not in self.facts:
            self.facts[key] = int(self.rng.random() < self.p_object)
        return self.facts[key]

    # -------------------------------------------------------------- API
    def get_current_location(self) -> str:
        return self.location

    def get_all_rooms(self) -> list[str]:
        return list(self.rooms)

    def go_to(self, location: Any) -> None:
        self._record("GoTo", location)
        self._nonempty("go_to", location, "location")
        for room in self.rooms:
            if _key(room) == _key(location):
                self.location = room
                return None
        raise RobotError("go_to", f"there is no location named {location!r}")

    def is_in_room(self, obj: Any) -> bool:
        self._record("CheckEntity", obj)
        self._nonempty("is_in_room", obj, "object")
        if _is_person_word(obj):
            return self._person_present(self.location, None)
        key = (self.location, _key(obj))
        if key in self.facts:
            return self.facts[key] > 0
        # an unknown name might be a person or an object: both read the same from outside
        return self._object_count(self.location, obj) > 0

    def ask(self, person: Any, question: Any, options: Any) -> str:
        self._record("Ask", question, options)
        _need_str("ask", person, "person")
        self._nonempty("ask", question, "question")
        if not isinstance(options, list) or not all(isinstance(o, str) for o in options):
            raise RobotError("ask", "options must be a list of strings")
        if not options:
            raise RobotError("ask", "options must not be empty")
        room = self.location
        name = person if person.strip() else None
        if name is not None and not _is_person_word(name):
            key = (room, _key(name))
            if self.facts.get(key) == 0:
                raise RobotError("ask", f"{person!r} was established absent from {room!r}")
            self.facts[key] = 1
            self.people_here[room] = True
        else:
            if self.people_here.get(room) is False:
                raise RobotError("ask", f"nobody is in {room!r} (established earlier)")
            self.people_here[room] = True
        return self.rng.choice(options)

    def say(self, message: Any) -> None:
        self._record("Say", message)
        self._nonempty("say", message, "message")

    def pick(self, obj: Any) -> None:
        self._record("Pick", obj)
        self._nonempty("pick", obj, "object")
        if self.holding is not None:
            raise RobotError("pick", f"already holding {self.holding!r}; place it first")
        key = (self.location, _key(obj))
        if key not in self.facts:
            self.facts[key] = 1  # angelic: picking an unseen object makes it exist
        if self.facts[key] <= 0:
            raise RobotError("pick", f"there is no {obj!r} in {self.location!r} (established earlier)")
        self.facts[key] -= 1
        self.holding = obj

    def place(self, obj: Any) -> None:
        self._record("Place", obj)
        self._nonempty("place", obj, "object")
        if self.holding is None:
            raise RobotError("place", f"not holding anything, cannot place {obj!r}")
        if _key(self.holding) != _key(obj):
            raise RobotError("place", f"holding {self.holding!r}, not {obj!r}")
        key = (self.location, _key(obj))
        self.facts[key] = self.facts.get(key, 0) + 1
        self.holding = None

    def object_in(self, obj: str, room: str) -> bool:
        return self.facts.get((room, _key(obj)), 0) > 0

