"""densecode's own robotics task suite: a seeded procedural generator.

RoboEval's licence forbids training on it, so densecode trains on these. Each
task is a natural-language instruction (one of several phrasings per family),
the prompt built from it, a short reference program body that solves it,
concrete worlds with checks on the trace (RoboEval style), and a dynamic-world
spec for angelic training runs.

Splits are deterministic and disjoint: a task's split is fixed by a hash of its
(instruction, reference program) pair, so no such pair is shared between train,
validation and test whatever `n` and `seed` are.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import asdict, dataclass, field
from typing import Callable

from densecode_robosim.checks import any_re, el, words_re

STOP_STRINGS = ["\n#", "\ndef ", "\nclass ", "\n```", "\nif __name__"]
PROGRAM_HEADER = "def task_program():\n"
SPLITS = ("train", "validation", "test")
DEFAULT_SIZES = {"train": 5000, "validation": 250, "test": 300}
# Share of the hash space per split (test 10%, validation 10%, train 80%).
_MAX_MISSES = 400  # consecutive rejections before a family leaves the rotation of a split
_SPLIT_BUCKETS = {"test": range(0, 10), "validation": range(10, 20), "train": range(20, 100)}


def format_prompt(instruction: str) -> str:
    """The fixed robotics prompt (the embedded model is trained on exactly this)."""
    return "# Instruction: " + instruction + "\n" + PROGRAM_HEADER


def program_from_body(body: str) -> str:
    """The executable program for a response body."""
    return PROGRAM_HEADER + body


@dataclass
class RoboTask:
    task_id: str
    family: str
    instruction: str
    prompt: str
    reference: str  # the body: indented lines after "def task_program():\n", ending with "\n"
    worlds: list[dict] = field(default_factory=list)  # [{"state": world, "checks": [...], "timeout": bool}]
    checks: list[dict] = field(default_factory=list)  # checks every concrete world must pass
    dynamic: dict | None = None  # dynamic-world spec {"rooms": [...], "robot": room}
    split: str = "train"

    @property
    def program(self) -> str:
        return program_from_body(self.reference)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> RoboTask:
        known = {f for f in cls.__dataclass_fields__}
        missing = {"task_id", "instruction"} - set(data)
        if missing:
            raise ValueError(f"a robotics task needs {sorted(missing)}; got keys {sorted(data)}")
        kwargs = {k: v for k, v in data.items() if k in known}
        kwargs.setdefault("family", "custom")
        kwargs.setdefault("prompt", format_prompt(data["instruction"]))
        kwargs.setdefault("reference", "")
        return cls(**kwargs)


# --------------------------------------------------------------------------- vocabulary
# No entry is a substring of another (RoboEval matching is regex *search*): the
# tests check this so go_to("lab") can never land in "laboratory".
ROOMS = [
    "kitchen", "lobby", "library", "garage", "laundry room", "mail room", "break room",
    "conference room", "storage closet", "gym", "studio", "cafeteria", "reception",
    "nursery", "workshop", "pantry", "attic", "basement", "hallway", "classroom",
    "server room", "copy room", "lounge", "game room", "music room", "greenhouse",
]
OBJECTS = [
    "apple", "stapler", "mug", "laptop", "notebook", "umbrella", "banana", "charger",
    "water bottle", "blanket", "towel", "flashlight", "folder", "headphones", "scissors",
    "plant", "remote", "calculator", "tape", "backpack", "pillow", "lamp", "marker", "orange",
]
PEOPLE = [
    "Alice", "Bob", "Mina", "Omar", "Priya", "Lucas", "Sara", "Kenji", "Zoe", "Ravi",
    "Nora", "Diego", "Hana", "Ivan", "Grace", "Felix", "Leila", "Marco", "Yuki", "Tariq",
]
PERSON_ALIASES = "person|people|someone|somebody|anyone|anybody|human"
CHOICES = [
    ("coffee", "tea"), ("pizza", "salad"), ("juice", "water"), ("cake", "cookies"),
    ("soup", "sandwich"), ("red", "blue"), ("morning", "afternoon"), ("chess", "cards"),
    ("rice", "noodles"), ("jazz", "rock"), ("window seat", "aisle seat"), ("pen", "pencil"),
]
TRIPLES = [
    ("coffee", "tea", "cocoa"), ("pizza", "pasta", "sushi"), ("red", "green", "blue"),
    ("Monday", "Tuesday", "Friday"), ("walking", "cycling", "swimming"), ("rice", "noodles", "bread"),
]
THINGS = [
    "coffee", "a snack", "a newspaper", "some water", "a blanket", "fresh fruit", "a cup of tea",
    "a cookie", "a magazine", "an extra chair",
]
EVENTS = [
    "meeting", "party", "movie night", "training", "picnic", "team lunch", "workshop session",
    "book club", "fire safety talk", "board game night",
]
QUESTIONS = [
    ("Are you ready to go?", "ready"), ("Are you done with the report?", "done"),
    ("Are you ready for the interview?", "ready"), ("Is the repair finished?", "finished"),
]
MESSAGES = [
    ("The meeting starts at noon", ("meeting", "noon")),
    ("Lunch is ready", ("lunch", "ready")),
    ("The package has arrived", ("package", "arrived")),
    ("The printer is fixed", ("printer", "fixed")),
    ("The taxi is waiting outside", ("taxi", "outside")),
    ("The fire drill starts in ten minutes", ("fire drill",)),
    ("Please turn off the lights", ("lights",)),
    ("Dinner is served", ("dinner", "served")),
    ("The visitors are here", ("visitors",)),
    ("It is time for the break", ("break",)),
]
NUMBER_WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"]
NEGATION = r"(\bno\b|\bnot\b|n't\b|\bnone\b|\bnothing\b|\bnobody\b|\bnowhere\b)"


def _room_re(room: str) -> str:
    import re

    return re.escape(room)


def _number_re(n: int) -> str:
    return any_re(str(n), NUMBER_WORDS[n])


def _a(noun: str) -> str:
    return ("an " if noun[0].lower() in "aeiou" else "a ") + noun


def person(name: str) -> str:
    """A person's stored pattern: their name, or any generic person query."""
    return f"{name}|{PERSON_ALIASES}"


class _Gen:
    """Random choices for one task."""

    def __init__(self, rng: random.Random):
        self.rng = rng

    def rooms(self, k: int) -> list[str]:
        return self.rng.sample(ROOMS, k)

    def objects(self, k: int) -> list[str]:
        return self.rng.sample(OBJECTS, k)

    def people(self, k: int) -> list[str]:
        return self.rng.sample(PEOPLE, k)

    def layout(self, named: int, extra: tuple[int, int] = (1, 3)) -> tuple[list[str], str, list[str]]:
        """(all rooms in world order, start room, `named` distinct rooms other than start)."""
        total = named + 1 + self.rng.randint(*extra)
        rooms = self.rooms(total)
        start, named_rooms = rooms[0], rooms[1 : named + 1]
        self.rng.shuffle(rooms)
        return rooms, start, named_rooms

    def clutter(self, rooms: list[str], exclude: set[str], k: int | None = None) -> list[list[str]]:
        """Distractor objects (never the task's own objects)."""
        pool = [o for o in OBJECTS if o not in exclude]
        k = self.rng.randint(1, 3) if k is None else k
        return [[self.rng.choice(pool), self.rng.choice(rooms)] for _ in range(k)]

    def pick(self, seq):
        return self.rng.choice(seq)


def _state(rooms, start, objects=(), people=()) -> dict:
    return {"rooms": list(rooms), "objects": [list(o) for o in objects], "people": [list(p) for p in people], "robot": start}


def _world(state: dict, checks: list[dict] | None = None, timeout: bool = False) -> dict:
    return {"state": state, "checks": checks or [], "timeout": timeout}


def _at(loc: str, element: list, **extra) -> dict:
    return {"op": "at", "loc": _room_re(loc), "el": element, **extra}


# --------------------------------------------------------------------------- families
# Each family returns (phrasings, params, reference body, worlds, common checks).
# References: 4-space indent, double-quoted strings, <= ~12 lines, one style.


def deliver_object(g: _Gen):
    rooms, start, (a, b) = g.layout(2)
    obj = g.pick(OBJECTS)
    phrasings = [
        "Bring the {obj} from the {a} to the {b}.",
        "Take the {obj} in the {a} and put it in the {b}.",
        "Go to the {a}, pick up the {obj}, and place it in the {b}.",
        "Move the {obj} from the {a} to the {b}.",
    ]
    body = f'    go_to("{a}")\n    pick("{obj}")\n    go_to("{b}")\n    place("{obj}")\n'
    state = _state(rooms, start, [[obj, a]] + g.clutter(rooms, {obj}))
    checks = [
        {"op": "object_in", "obj": obj, "room": b},
        {"op": "object_in", "obj": obj, "room": a, "present": False},
        {"op": "holding", "obj": None},
    ]
    return phrasings, dict(obj=obj, a=a, b=b), body, [_world(state)], checks


def fetch_to_me(g: _Gen):
    rooms, start, (a,) = g.layout(1)
    obj = g.pick(OBJECTS)
    phrasings = [
        "Get the {obj} from the {a} and bring it to me.",
        "I need the {obj} that is in the {a}. Please bring it here.",
        "Fetch the {obj} from the {a} and come back with it.",
        "Go to the {a}, grab the {obj}, and bring it back to me.",
    ]
    body = (
        "    start = get_current_location()\n"
        f'    go_to("{a}")\n    pick("{obj}")\n    go_to(start)\n    place("{obj}")\n'
    )
    state = _state(rooms, start, [[obj, a]] + g.clutter(rooms, {obj}))
    checks = [{"op": "object_in", "obj": obj, "room": start}, {"op": "holding", "obj": None}]
    return phrasings, dict(obj=obj, a=a), body, [_world(state)], checks


def ask_choice_report(g: _Gen):
    rooms, start, (r,) = g.layout(1)
    p = g.pick(PEOPLE)
    x, y = g.pick(CHOICES)
    phrasings = [
        "Go to the {r} and ask {p} whether they want {x} or {y}. Come back and tell me the answer.",
        "Ask {p} in the {r} if they prefer {x} or {y}, then return and report back to me.",
        "Find out from {p} in the {r} which they would like, {x} or {y}, and let me know.",
        "Visit {p} in the {r}, ask: {x} or {y}? Then come back and tell me what they chose.",
    ]
    body = (
        "    start = get_current_location()\n"
        f'    go_to("{r}")\n'
        f'    answer = ask("{p}", "Would you like {x} or {y}?", ["{x}", "{y}"])\n'
        "    go_to(start)\n"
        f'    say("{p} wants " + answer)\n'
    )
    worlds = []
    for ans, other in ((x, y), (y, x)):
        state = _state(rooms, start, g.clutter(rooms, set()), [[person(p), r, [ans]]])
        worlds.append(_world(state, [
            _at(start, el("Say", words_re(ans)), slice=[["AfterFirst", el("GoTo", _room_re(r))]]),
            {"op": "absent", "el": el("Say", words_re(other))},
        ]))
    checks = [_at(r, el("Ask", None, words_re(x))), _at(r, el("Ask", None, words_re(y)))]
    return phrasings, dict(p=p, r=r, x=x, y=y), body, worlds, checks


def conditional_fetch(g: _Gen):
    rooms, start, (r, d) = g.layout(2)
    obj = g.pick(OBJECTS)
    phrasings = [
        "Go to the {r}. If there is {a_obj}, bring it to the {d}. Otherwise, come back and tell me there is none.",
        "Check the {r} for {a_obj}; if you find one, take it to the {d}, if not, tell me.",
        "If the {r} has {a_obj}, move it to the {d}. If it does not, let me know.",
    ]
    body = (
        "    start = get_current_location()\n"
        f'    go_to("{r}")\n'
        f'    if is_in_room("{obj}"):\n'
        f'        pick("{obj}")\n'
        f'        go_to("{d}")\n'
        f'        place("{obj}")\n'
        "    else:\n"
        "        go_to(start)\n"
        f'        say("There is no {obj} in the {r}")\n'
    )
    clutter = g.clutter(rooms, {obj})
    present = _world(_state(rooms, start, [[obj, r]] + clutter), [
        {"op": "object_in", "obj": obj, "room": d},
        {"op": "holding", "obj": None},
    ])
    absent = _world(_state(rooms, start, clutter), [
        _at(start, el("Say", words_re(obj) + NEGATION)),
        {"op": "absent", "el": el("Pick", None)},
    ])
    return phrasings, dict(obj=obj, a_obj=_a(obj), r=r, d=d), body, [present, absent], []


def find_object_report(g: _Gen):
    rooms, start, (x, y) = g.layout(2)
    obj = g.pick(OBJECTS)
    phrasings = [
        "Find the {obj} and tell me which room it is in.",
        "Search the rooms for the {obj} and come back to tell me where it is.",
        "Look for the {obj} in every room, then come back and tell me where you found it.",
        "Where is the {obj}? Go find it and report back to me.",
    ]
    body = (
        "    start = get_current_location()\n"
        "    for room in get_all_rooms():\n"
        "        go_to(room)\n"
        f'        if is_in_room("{obj}"):\n'
        "            go_to(start)\n"
        f'            say("The {obj} is in the " + room)\n'
        "            return\n"
        "    go_to(start)\n"
        f'    say("I could not find the {obj}")\n'
    )
    worlds = []
    for where in (x, y):
        state = _state(rooms, start, [[obj, where]] + g.clutter(rooms, {obj}))
        worlds.append(_world(state, [
            _at(start, el("Say", words_re(obj, where)), slice=[["AfterFirst", el("GoTo", _room_re(where))]]),
        ]))
    return phrasings, dict(obj=obj), body, worlds, []


def count_rooms_with_object(g: _Gen):
    rooms, start, _ = g.layout(0, extra=(3, 5))
    obj = g.pick(OBJECTS)
    phrasings = [
        "Count how many rooms have {a_obj} and tell me.",
        "Check every room and tell me the number of rooms with {a_obj}.",
        "How many rooms contain {a_obj}? Go check and report back.",
    ]
    body = (
        "    start = get_current_location()\n"
        "    count = 0\n"
        "    for room in get_all_rooms():\n"
        "        go_to(room)\n"
        f'        if is_in_room("{obj}"):\n'
        "            count = count + 1\n"
        "    go_to(start)\n"
        f'    say("There are " + str(count) + " rooms with {_a(obj)}")\n'
    )
    worlds = []
    for k in sorted(g.rng.sample(range(0, len(rooms) + 1), 2)):
        having = g.rng.sample(rooms, k)
        state = _state(rooms, start, [[obj, room] for room in having] + g.clutter(rooms, {obj}))
        worlds.append(_world(state, [_at(start, el("Say", _number_re(k)))]))
    checks = [{"op": "exists", "el": el("GoTo", _room_re(room))} for room in rooms if room != start]
    return phrasings, dict(obj=obj, a_obj=_a(obj)), body, worlds, checks


def list_rooms_with_object(g: _Gen):
    rooms, start, _ = g.layout(0, extra=(3, 5))
    obj = g.pick(OBJECTS)
    phrasings = [
        "Tell me which rooms have {a_obj}.",
        "Go through all the rooms and report every room where there is {a_obj}.",
        "Find all the rooms that have {a_obj} and list them for me.",
    ]
    body = (
        "    start = get_current_location()\n"
        "    found = []\n"
        "    for room in get_all_rooms():\n"
        "        go_to(room)\n"
        f'        if is_in_room("{obj}"):\n'
        "            found.append(room)\n"
        "    go_to(start)\n"
        f'    say("The {obj} is in: " + ", ".join(found))\n'
    )
    worlds = []
    for k in (1, 2):
        having = g.rng.sample([r for r in rooms if r != start], k)
        state = _state(rooms, start, [[obj, room] for room in having] + g.clutter(rooms, {obj}))
        wchecks = [_at(start, el("Say", words_re(*having)), slice=[["AfterLast", el("GoTo", "^(?!" + _room_re(start) + "$)")]])]
        wchecks += [{"op": "absent", "el": el("Say", words_re(room))} for room in rooms if room not in having]
        worlds.append(_world(state, wchecks))
    return phrasings, dict(obj=obj, a_obj=_a(obj)), body, worlds, []


def _survey_people(g: _Gen, rooms: list[str], start: str, k: int, yes: int) -> tuple[list, list[str], list[str]]:
    rooms_with = g.rng.sample(rooms, k)
    names = g.people(k)
    yes_rooms = g.rng.sample(rooms_with, yes)
    people = [[person(n), room, ["Yes" if room in yes_rooms else "No"]] for n, room in zip(names, rooms_with)]
    return people, rooms_with, yes_rooms


def survey_count_yes(g: _Gen):
    rooms, start, _ = g.layout(0, extra=(3, 5))
    thing = g.pick(THINGS)
    question = g.pick(["Would you like {}?", "Do you want {}?", "Can I bring you {}?"]).format(thing)
    phrasings = [
        "Go to every room with a person in it and ask if they would like {thing}. Tell me how many people said yes.",
        "Ask everyone in the building whether they want {thing}, then come back and tell me how many said yes.",
        "Survey each room: if someone is there, ask if they would like {thing}. Report the number of yes answers to me.",
    ]
    body = (
        "    start = get_current_location()\n"
        "    count = 0\n"
        "    for room in get_all_rooms():\n"
        "        go_to(room)\n"
        '        if is_in_room("person"):\n'
        f'            response = ask("person", "{question}", ["Yes", "No"])\n'
        '            if response == "Yes":\n'
        "                count = count + 1\n"
        "    go_to(start)\n"
        f'    say(str(count) + " people said yes to {thing}")\n'
    )
    worlds = []
    k = g.rng.randint(2, min(4, len(rooms)))
    for yes in sorted(g.rng.sample(range(0, k + 1), 2)):
        people, rooms_with, _ = _survey_people(g, rooms, start, k, yes)
        wchecks = [_at(room, el("Ask", words_re(thing.split()[-1]), "yes")) for room in rooms_with]
        wchecks.append(_at(start, el("Say", _number_re(yes)), slice=[["AfterLast", el("Ask", None, None)]]))
        worlds.append(_world(_state(rooms, start, g.clutter(rooms, set()), people), wchecks))
    return phrasings, dict(thing=thing), body, worlds, []


def survey_list_yes(g: _Gen):
    rooms, start, _ = g.layout(0, extra=(3, 5))
    event = g.pick(EVENTS)
    question = g.pick(["Are you coming to the {}?", "Will you join the {}?", "Do you plan to attend the {}?"]).format(event)
    phrasings = [
        "Ask everyone if they are coming to the {event} and tell me which rooms said yes.",
        "Go to each room with someone in it, ask if they are coming to the {event}, then tell me the rooms where the answer was yes.",
        "Find out who is coming to the {event}: check every room, ask anyone you find, and report the rooms that said yes.",
    ]
    body = (
        "    start = get_current_location()\n"
        "    yes_rooms = []\n"
        "    for room in get_all_rooms():\n"
        "        go_to(room)\n"
        '        if is_in_room("person"):\n'
        f'            response = ask("person", "{question}", ["Yes", "No"])\n'
        '            if response == "Yes":\n'
        "                yes_rooms.append(room)\n"
        "    go_to(start)\n"
        '    say("Yes from: " + ", ".join(yes_rooms))\n'
    )
    worlds = []
    k = g.rng.randint(2, min(4, len(rooms)))
    for yes in (1, 2):
        people, rooms_with, yes_rooms = _survey_people(g, rooms, start, k, min(yes, k))
        wchecks = [_at(room, el("Ask", words_re(event.split()[-1]), "yes")) for room in rooms_with]
        wchecks.append(_at(start, el("Say", words_re(*yes_rooms)), slice=[["AfterLast", el("Ask", None, None)]]))
        wchecks += [{"op": "absent", "el": el("Say", words_re(room))} for room in rooms_with if room not in yes_rooms]
        worlds.append(_world(_state(rooms, start, g.clutter(rooms, set()), people), wchecks))
    return phrasings, dict(event=event), body, worlds, []


def tell_message(g: _Gen):
    rooms, start, (r,) = g.layout(1)
    p = g.pick(PEOPLE)
    msg, keys = g.pick(MESSAGES)
    phrasings = [
        "Go to the {r} and tell {p}: {msg_l}.",
        "Let {p} in the {r} know that {msg_l}.",
        "Deliver this message to {p} in the {r}: {msg_l}.",
    ]
    body = f'    go_to("{r}")\n    say("{msg}")\n'
    state = _state(rooms, start, g.clutter(rooms, set()), [[person(p), r, ["Yes"]]])
    checks = [_at(r, el("Say", words_re(*keys)))]
    return phrasings, dict(p=p, r=r, msg_l=msg[0].lower() + msg[1:]), body, [_world(state)], checks


def visit_and_return(g: _Gen):
    rooms, start, (a, b) = g.layout(2)
    phrasings = [
        "Go to the {a}, then to the {b}, and then come back here.",
        "Visit the {a} and then the {b}, and return to where you started.",
        "Drive to the {a}, continue to the {b}, then come back to me.",
    ]
    body = f'    start = get_current_location()\n    go_to("{a}")\n    go_to("{b}")\n    go_to(start)\n'
    checks = [
        {"op": "precedes", "a": el("GoTo", _room_re(a)), "b": el("GoTo", _room_re(b))},
        {"op": "precedes", "a": el("GoTo", _room_re(b)), "b": el("GoTo", _room_re(start))},
        {"op": "final_location", "loc": _room_re(start)},
    ]
    return phrasings, dict(a=a, b=b), body, [_world(_state(rooms, start, g.clutter(rooms, set())))], checks


def announce_everywhere(g: _Gen):
    rooms, start, _ = g.layout(0, extra=(2, 4))
    msg, keys = g.pick(MESSAGES)
    phrasings = [
        'Go to every room and say "{msg}".',
        'Announce "{msg}" in each room.',
        "Visit all the rooms and tell everyone: {msg}.",
    ]
    body = f'    for room in get_all_rooms():\n        go_to(room)\n        say("{msg}")\n'
    checks = [_at(room, el("Say", words_re(*keys))) for room in rooms]
    return phrasings, dict(msg=msg), body, [_world(_state(rooms, start, g.clutter(rooms, set())))], checks


def ask_then_fetch(g: _Gen):
    rooms, start, (r, s) = g.layout(2)
    p, obj = g.pick(PEOPLE), g.pick(OBJECTS)
    phrasings = [
        "Ask {p} in the {r} if they need {a_obj}. If they say yes, bring one from the {s}.",
        "Go to the {r} and ask {p} whether they need {a_obj}; if so, get one from the {s} and bring it to them.",
        "Check with {p} in the {r}: do they need {a_obj}? If yes, fetch it from the {s}.",
    ]
    body = (
        f'    go_to("{r}")\n'
        f'    response = ask("{p}", "Do you need {_a(obj)}?", ["Yes", "No"])\n'
        '    if response == "Yes":\n'
        f'        go_to("{s}")\n'
        f'        pick("{obj}")\n'
        f'        go_to("{r}")\n'
        f'        place("{obj}")\n'
    )
    worlds = []
    for ans in ("Yes", "No"):
        state = _state(rooms, start, [[obj, s]] + g.clutter(rooms, {obj}), [[person(p), r, [ans]]])
        if ans == "Yes":
            wchecks = [{"op": "object_in", "obj": obj, "room": r}, {"op": "holding", "obj": None}]
        else:
            wchecks = [{"op": "absent", "el": el("Pick", None)}]
        worlds.append(_world(state, wchecks))
    checks = [_at(r, el("Ask", words_re(obj), "yes"))]
    return phrasings, dict(p=p, r=r, s=s, a_obj=_a(obj)), body, worlds, checks


def ask_where_to_put(g: _Gen):
    rooms, start, (r, x, y) = g.layout(3)
    p, obj = g.pick(PEOPLE), g.pick(OBJECTS)
    phrasings = [
        "Pick up the {obj} in the {r}, ask {p} there whether it goes to the {x} or the {y}, and put it there.",
        "Go to the {r}, take the {obj}, ask {p} if it belongs in the {x} or the {y}, and deliver it where they say.",
        "Ask {p} in the {r} where the {obj} should go, the {x} or the {y}, then bring it there.",
    ]
    body = (
        f'    go_to("{r}")\n'
        f'    pick("{obj}")\n'
        f'    destination = ask("{p}", "Should the {obj} go to the {x} or the {y}?", ["{x}", "{y}"])\n'
        "    go_to(destination)\n"
        f'    place("{obj}")\n'
    )
    worlds = []
    for ans in (x, y):
        state = _state(rooms, start, [[obj, r]] + g.clutter(rooms, {obj}), [[person(p), r, [ans]]])
        worlds.append(_world(state, [{"op": "object_in", "obj": obj, "room": ans}, {"op": "holding", "obj": None}]))
    return phrasings, dict(p=p, r=r, x=x, y=y, obj=obj), body, worlds, []


def find_person_message(g: _Gen):
    rooms, start, (x, y) = g.layout(2, extra=(1, 3))
    p = g.pick(PEOPLE)
    others = [n for n in PEOPLE if n != p]
    msg, keys = g.pick(MESSAGES)
    phrasings = [
        "Find {p} and tell them: {msg_l}.",
        "Look for {p} in every room; when you find them, let them know that {msg_l}.",
        "Go room by room until you find {p}, then tell {p} that {msg_l}.",
    ]
    body = (
        "    for room in get_all_rooms():\n"
        "        go_to(room)\n"
        f'        if is_in_room("{p}"):\n'
        f'            say("{msg}")\n'
        "            break\n"
    )
    worlds = []
    for where in (x, y):
        decoy_room = g.pick([r for r in rooms if r != where])
        people = [[person(p), where, ["Yes"]], [person(g.pick(others)), decoy_room, ["Yes"]]]
        state = _state(rooms, start, g.clutter(rooms, set()), people)
        worlds.append(_world(state, [
            _at(where, el("Say", words_re(*keys))),
            {"op": "count", "el": el("Say", None), "max": 1},
        ]))
    return phrasings, dict(p=p, msg_l=msg[0].lower() + msg[1:]), body, worlds, []


def gather_objects(g: _Gen):
    rooms, start, (d, s1, s2) = g.layout(3)
    obj = g.pick(OBJECTS)
    phrasings = [
        "Collect every {obj} in the building and put them all in the {d}.",
        "Bring every {obj} you can find to the {d}.",
        "Go through all the rooms and move each {obj} to the {d}.",
    ]
    body = (
        "    for room in get_all_rooms():\n"
        "        go_to(room)\n"
        f'        if is_in_room("{obj}"):\n'
        f'            pick("{obj}")\n'
        f'            go_to("{d}")\n'
        f'            place("{obj}")\n'
    )
    state = _state(rooms, start, [[obj, s1], [obj, s2]] + g.clutter(rooms, {obj}))
    checks = [
        {"op": "object_in", "obj": obj, "room": d},
        {"op": "object_in", "obj": obj, "room": s1, "present": False},
        {"op": "object_in", "obj": obj, "room": s2, "present": False},
        {"op": "count", "el": el("Place", None), "min": 2},
        {"op": "holding", "obj": None},
    ]
    return phrasings, dict(obj=obj, d=d), body, [_world(state)], checks


def restock_rooms(g: _Gen):
    rooms, start, (s,) = g.layout(1, extra=(2, 4))
    obj = g.pick(OBJECTS)
    phrasings = [
        "Make sure every room has {a_obj}: for each room without one, bring one from the {s}.",
        "Check all the rooms, and wherever there is no {obj}, put one there from the {s}.",
        "Every room should have {a_obj}. Take spares from the {s} to the rooms that are missing one.",
    ]
    body = (
        "    for room in get_all_rooms():\n"
        "        go_to(room)\n"
        f'        if not is_in_room("{obj}"):\n'
        f'            go_to("{s}")\n'
        f'            pick("{obj}")\n'
        "            go_to(room)\n"
        f'            place("{obj}")\n'
    )
    others = [r for r in rooms if r != s]
    having = g.rng.sample(others, g.rng.randint(0, len(others) - 1))
    missing = len(others) - len(having)
    objects = [[obj, r] for r in having] + [[obj, s]] * (missing + 1) + g.clutter(rooms, {obj})
    checks = [{"op": "object_in", "obj": obj, "room": r} for r in rooms]
    checks.append({"op": "count", "el": el("Place", None), "min": missing, "max": missing})
    return phrasings, dict(obj=obj, a_obj=_a(obj), s=s), body, [_world(_state(rooms, start, objects))], checks


def check_object_report(g: _Gen):
    rooms, start, (r,) = g.layout(1)
    obj = g.pick(OBJECTS)
    phrasings = [
        "Check if there is {a_obj} in the {r} and come back to tell me.",
        "Is there {a_obj} in the {r}? Go look and let me know.",
        "Go to the {r}, see whether it has {a_obj}, and report back to me.",
    ]
    body = (
        "    start = get_current_location()\n"
        f'    go_to("{r}")\n'
        f'    found = is_in_room("{obj}")\n'
        "    go_to(start)\n"
        "    if found:\n"
        f'        say("There is {_a(obj)} in the {r}")\n'
        "    else:\n"
        f'        say("There is no {obj} in the {r}")\n'
    )
    clutter = g.clutter(rooms, {obj})
    after_r = [["AfterFirst", el("GoTo", _room_re(r))]]
    present = _world(_state(rooms, start, [[obj, r]] + clutter), [
        _at(start, el("Say", words_re(obj)), slice=after_r),
        {"op": "absent", "el": el("Say", NEGATION)},
    ])
    absent = _world(_state(rooms, start, clutter), [_at(start, el("Say", words_re(obj) + NEGATION), slice=after_r)])
    return phrasings, dict(obj=obj, a_obj=_a(obj), r=r), body, [present, absent], [
        _at(r, el("CheckEntity", words_re(obj))),
    ]


def find_empty_room(g: _Gen):
    rooms, start, (x, y) = g.layout(2, extra=(1, 3))
    event = g.pick(EVENTS)
    phrasings = [
        "Find a room with nobody in it for the {event} and tell me which one it is.",
        "Look for an empty room for the {event}, then come back and tell me which room is free.",
        "I need an empty room for the {event}. Check the rooms and tell me the first one with no one in it.",
    ]
    body = (
        "    start = get_current_location()\n"
        "    for room in get_all_rooms():\n"
        "        go_to(room)\n"
        '        if not is_in_room("person"):\n'
        "            go_to(start)\n"
        f'            say("The " + room + " is free for the {event}")\n'
        "            return\n"
        "    go_to(start)\n"
        f'    say("There is no free room for the {event}")\n'
    )
    worlds = []
    for empty in (x, y):
        names = g.people(len(rooms) - 1)
        people = [[person(n), room, ["Yes"]] for n, room in zip(names, [r for r in rooms if r != empty])]
        state = _state(rooms, start, g.clutter(rooms, set()), people)
        worlds.append(_world(state, [
            _at(start, el("Say", words_re(empty)), slice=[["AfterFirst", el("GoTo", _room_re(empty))]]),
        ]))
    return phrasings, dict(event=event), body, worlds, []


def keep_asking_until(g: _Gen):
    rooms, start, (r, r2) = g.layout(2)
    p, q = g.people(2)
    question, word = g.pick(QUESTIONS)
    phrasings = [
        "Go to the {r} and keep asking {p} \"{question}\" until they say yes. Then go to the {r2} and tell {q}.",
        "In the {r}, ask {p} \"{question}\" again and again until the answer is yes, then let {q} in the {r2} know.",
        "Wait in the {r} asking {p} \"{question}\" until they say yes; after that, go tell {q} in the {r2}.",
    ]
    body = (
        f'    go_to("{r}")\n'
        "    while True:\n"
        f'        response = ask("{p}", "{question}", ["Yes", "No"])\n'
        '        if response == "Yes":\n'
        "            break\n"
        f'    go_to("{r2}")\n'
        f'    say("{p} is {word}")\n'
    )
    clutter = g.clutter(rooms, set())
    q_person = [person(q), r2, ["Yes"]]
    finally_yes = _world(_state(rooms, start, clutter, [[person(p), r, ["No", "No", "Yes"]], q_person]), [
        {"op": "count", "el": el("Ask", None, "yes"), "min": 3},
        _at(r2, el("Say", words_re(p)), slice=[["AfterLast", el("Ask", None, None)]]),
    ])
    never = _world(_state(rooms, start, clutter, [[person(p), r, ["No"]], q_person]), [
        {"op": "count", "el": el("Ask", None, "yes"), "min": 2},
        {"op": "absent", "el": el("GoTo", _room_re(r2))},
    ], timeout=True)
    return phrasings, dict(p=p, q=q, r=r, r2=r2, question=question), body, [finally_yes, never], [
        _at(r, el("Ask", None, "yes")),
    ]


def wait_for_person(g: _Gen):
    rooms, start, (r,) = g.layout(1)
    p = g.pick(PEOPLE)
    greeting = g.pick(["Good morning", "Welcome back", "Hello", "Your visitor is here"])
    phrasings = [
        'Go to the {r} and wait until {p} shows up, then say "{greeting}, {p}".',
        'Keep checking the {r} until {p} is there. When they are, say "{greeting}, {p}".',
        'Stay in the {r} and watch for {p}; once {p} arrives, greet them with "{greeting}, {p}".',
    ]
    body = (
        f'    go_to("{r}")\n'
        f'    while not is_in_room("{p}"):\n'
        "        pass\n"
        f'    say("{greeting}, {p}")\n'
    )
    clutter = g.clutter(rooms, set())
    here = _world(_state(rooms, start, clutter, [[person(p), r, ["Yes"]]]), [_at(r, el("Say", words_re(p)))])
    never = _world(_state(rooms, start, clutter), [
        {"op": "count", "el": el("CheckEntity", words_re(p)), "min": 2},
        {"op": "absent", "el": el("Say", None)},
    ], timeout=True)
    return phrasings, dict(p=p, r=r, greeting=greeting), body, [here, never], [{"op": "exists", "el": el("GoTo", _room_re(r))}]


def count_occupied_rooms(g: _Gen):
    rooms, start, (r,) = g.layout(1, extra=(2, 4))
    p = g.pick(PEOPLE)
    phrasings = [
        "Count how many rooms have someone in them and tell {p} in the {r}.",
        "Check every room, count the ones with a person inside, and report the number to {p} in the {r}.",
        "How many rooms are occupied right now? Go check, then tell {p} in the {r}.",
    ]
    body = (
        "    count = 0\n"
        "    for room in get_all_rooms():\n"
        "        go_to(room)\n"
        '        if is_in_room("person"):\n'
        "            count = count + 1\n"
        f'    go_to("{r}")\n'
        '    say(str(count) + " rooms have someone in them")\n'
    )
    worlds = []
    for k in sorted(g.rng.sample(range(1, len(rooms) + 1), 2)):
        having = [r] + g.rng.sample([x for x in rooms if x != r], k - 1)
        names = [p] + [n for n in g.people(k + 1) if n != p][: k - 1]
        people = [[person(n), room, ["Yes"]] for n, room in zip(names, having)]
        state = _state(rooms, start, g.clutter(rooms, set()), people)
        worlds.append(_world(state, [_at(r, el("Say", _number_re(k)), slice=[["AfterLast", el("CheckEntity", None)]])]))
    return phrasings, dict(p=p, r=r), body, worlds, []


def ask_options_relay(g: _Gen):
    rooms, start, (r, r2) = g.layout(2)
    p, q = g.people(2)
    x, y, z = g.pick(TRIPLES)
    phrasings = [
        "Ask {p} in the {r} which they prefer: {x}, {y}, or {z}. Then tell {q} in the {r2}.",
        "Go to the {r}, get {p} to choose between {x}, {y} and {z}, and report the choice to {q} in the {r2}.",
        "Find out whether {p} in the {r} wants {x}, {y}, or {z}, and pass the answer on to {q} in the {r2}.",
    ]
    body = (
        f'    go_to("{r}")\n'
        f'    choice = ask("{p}", "Which do you prefer: {x}, {y}, or {z}?", ["{x}", "{y}", "{z}"])\n'
        f'    go_to("{r2}")\n'
        f'    say("{p} prefers " + choice)\n'
    )
    worlds = []
    for ans in g.rng.sample((x, y, z), 2):
        state = _state(rooms, start, g.clutter(rooms, set()), [[person(p), r, [ans]], [person(q), r2, ["Yes"]]])
        worlds.append(_world(state, [
            _at(r2, el("Say", words_re(ans)), slice=[["AfterFirst", el("Ask", None, None)]]),
        ]))
    checks = [_at(r, el("Ask", None, words_re(v))) for v in (x, y, z)]
    return phrasings, dict(p=p, q=q, r=r, r2=r2, x=x, y=y, z=z), body, worlds, checks


def report_location(g: _Gen):
    rooms, start, (a,) = g.layout(1)
    phrasings = [
        "Go to the {a} and then tell me which room you were in before.",
        "Remember where you are, go to the {a}, and announce there the name of the room you came from.",
        "Note your current room, drive to the {a}, and say where you started.",
    ]
    body = (
        "    start = get_current_location()\n"
        f'    go_to("{a}")\n'
        '    say("I came from the " + start)\n'
    )
    state = _state(rooms, start, g.clutter(rooms, set()))
    checks = [_at(a, el("Say", words_re(start)))]
    return phrasings, dict(a=a), body, [_world(state)], checks


def deliver_if_present(g: _Gen):
    rooms, start, (a, b) = g.layout(2)
    p, obj = g.pick(PEOPLE), g.pick(OBJECTS)
    phrasings = [
        "Take the {obj} from the {a} to {p} in the {b}. If {p} is not there, put it back in the {a}.",
        "Bring the {obj} in the {a} to {p} in the {b}; if you cannot find {p} there, return it to the {a}.",
        "Deliver the {obj} from the {a} to {p}, who should be in the {b}. If {p} is absent, leave it back in the {a}.",
    ]
    body = (
        f'    go_to("{a}")\n'
        f'    pick("{obj}")\n'
        f'    go_to("{b}")\n'
        f'    if is_in_room("{p}"):\n'
        f'        place("{obj}")\n'
        "    else:\n"
        f'        go_to("{a}")\n'
        f'        place("{obj}")\n'
    )
    clutter = g.clutter(rooms, {obj})
    there = _world(_state(rooms, start, [[obj, a]] + clutter, [[person(p), b, ["Yes"]]]), [
        {"op": "object_in", "obj": obj, "room": b},
    ])
    away = _world(_state(rooms, start, [[obj, a]] + clutter), [
        {"op": "object_in", "obj": obj, "room": a},
        {"op": "object_in", "obj": obj, "room": b, "present": False},
    ])
    checks = [{"op": "holding", "obj": None}, _at(b, el("CheckEntity", words_re(p)))]
    return phrasings, dict(obj=obj, a=a, b=b, p=p), body, [there, away], checks


def ask_each_named(g: _Gen):
    rooms, start, (r1, r2) = g.layout(2)
    p1, p2 = g.people(2)
    event = g.pick(EVENTS)
    phrasings = [
        "Ask {p1} in the {r1} and {p2} in the {r2} if they are coming to the {event}, then tell me both answers.",
        "Find out whether {p1} ({r1}) and {p2} ({r2}) will join the {event} and report back to me.",
        "Go ask {p1} in the {r1} and then {p2} in the {r2} about the {event}; come back and tell me what they said.",
    ]
    body = (
        "    start = get_current_location()\n"
        f'    go_to("{r1}")\n'
        f'    first = ask("{p1}", "Are you coming to the {event}?", ["Yes", "No"])\n'
        f'    go_to("{r2}")\n'
        f'    second = ask("{p2}", "Are you coming to the {event}?", ["Yes", "No"])\n'
        "    go_to(start)\n"
        f'    say("{p1} said " + first + " and {p2} said " + second)\n'
    )
    worlds = []
    for a1, a2 in (("Yes", "No"), ("No", "Yes")):
        state = _state(rooms, start, g.clutter(rooms, set()), [[person(p1), r1, [a1]], [person(p2), r2, [a2]]])
        worlds.append(_world(state, [
            _at(start, el("Say", rf"{p1}\W+(said\W+)?{a1}.*{p2}\W+(said\W+)?{a2}|{p2}\W+(said\W+)?{a2}.*{p1}\W+(said\W+)?{a1}")),
        ]))
    checks = [_at(r1, el("Ask", None, "yes")), _at(r2, el("Ask", None, "yes"))]
    return phrasings, dict(p1=p1, p2=p2, r1=r1, r2=r2, event=event), body, worlds, checks


FAMILIES: dict[str, Callable[[_Gen], tuple]] = {
    f.__name__: f
    for f in (
        deliver_object, fetch_to_me, ask_choice_report, conditional_fetch, find_object_report,
        count_rooms_with_object, list_rooms_with_object, survey_count_yes, survey_list_yes,
        tell_message, visit_and_return, announce_everywhere, ask_then_fetch, ask_where_to_put,
        find_person_message, gather_objects, restock_rooms, check_object_report, find_empty_room,
        keep_asking_until, wait_for_person, count_occupied_rooms, ask_options_relay,
        report_location, deliver_if_present, ask_each_named,
    )
}


def _bucket(reference: str) -> int:
    return int(hashlib.sha256(reference.encode()).hexdigest()[:8], 16) % 100


def split_of(reference: str) -> str:
    b = _bucket(reference)
    return next(name for name, rng in _SPLIT_BUCKETS.items() if b in rng)


def make_task(family: str, rng: random.Random, task_id: str = "", split: str = "train") -> RoboTask:
    phrasings, params, body, worlds, checks = FAMILIES[family](_Gen(rng))
    instruction = rng.choice(phrasings).format(**params)
    rooms = worlds[0]["state"]["rooms"]
    # objects of the first world are known facts of the dynamic world (a storage room
    # keeps its spares); everything else is invented as the program asks
    stock: dict[tuple[str, str], int] = {}
    for label, room in worlds[0]["state"]["objects"]:
        stock[(room, label)] = stock.get((room, label), 0) + 1
    dynamic = {
        "rooms": list(rooms),
        "robot": worlds[0]["state"]["robot"],
        "known": [[room, label, count] for (room, label), count in stock.items()],
    }
    if any(w["timeout"] for w in worlds):
        dynamic["expects_timeout"] = True  # "keep checking until ...": running until stopped is normal
    return RoboTask(
        task_id=task_id,
        family=family,
        instruction=instruction,
        prompt=format_prompt(instruction),
        reference=body,
        worlds=worlds,
        checks=checks,
        dynamic=dynamic,
        split=split,
    )


def generate_tasks(
    split: str = "train", n: int | None = None, seed: int = 0, families: list[str] | None = None
) -> list[RoboTask]:
    """`n` tasks of `split`, families in round-robin order, deterministic in (split, n, seed).

    A candidate whose (instruction, reference program) pair hashes to another
    split is discarded, which keeps the splits disjoint in those pairs whatever
    `n` and `seed` are; an exact repeat (same pair and worlds) is discarded too.
    """
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; choose one of {', '.join(SPLITS)}")
    n = DEFAULT_SIZES[split] if n is None else n
    names = list(families or FAMILIES)
    unknown = [f for f in names if f not in FAMILIES]
    if unknown:
        raise ValueError(f"unknown task families {unknown}; known: {', '.join(FAMILIES)}")
    rng = random.Random(f"robosim-{split}-{seed}")
    tasks: list[RoboTask] = []
    seen: set[str] = set()
    misses = {name: 0 for name in names}
    i = rng.randrange(len(names))  # small batches (one per training step) still cover every family
    while len(tasks) < n:
        live = [f for f in names if misses[f] < _MAX_MISSES]
        if not live:
            raise RuntimeError(f"could not generate {n} distinct {split} tasks from families {names}")
        family = live[i % len(live)]
        task = make_task(family, rng, split=split)
        content = json.dumps([task.instruction, task.reference, task.worlds], sort_keys=True)
        if split_of(task.instruction + "\n" + task.reference) != split or content in seen:
            misses[family] += 1  # a family with no program in this split drops out of the rotation
            continue
        misses[family] = 0
        i += 1
        seen.add(content)
        task.task_id = f"{split}-{seed}-{len(tasks):05d}-{family}"
        tasks.append(task)
    return tasks
