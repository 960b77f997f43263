"""JSON check specs judged against a run's trace and final world.

A task's checks are plain dicts (so tasks serialise to JSON). Element patterns
are lists: `["GoTo", regex]`, `["Say", regex]`, `["Ask", question_re, option_re]`,
`["Pick", regex]`, `["Place", regex]`, `["CheckEntity", regex]`. Ops:

- `{"op": "exists", "el": E}` / `{"op": "absent", "el": E}`
- `{"op": "precedes", "a": E, "b": E}`: some b after the first a
- `{"op": "act_at_first", "loc": regex, "el": E}`: RoboEval's ActAtFirst
- `{"op": "at", "loc": regex, "el": E}`: E happens while the robot is at loc
- `{"op": "count", "el": E, "min": int, "max": int}` (either bound optional)
- `{"op": "object_in", "obj": str, "room": str, "present": bool}` (final world)
- `{"op": "holding", "obj": str | None}` (final world)
- `{"op": "final_location", "loc": regex}`

Any check may carry `"slice": [[how, E], ...]` (how in AfterFirst, BeforeFirst,
AfterLast, BeforeLast) applied to the trace first, with RoboEval's quirk that
an absent pattern leaves the whole trace.
"""

from __future__ import annotations

import re
from typing import Any

from densecode_robosim.trace import Trace, TraceElement


def el(kind: str, value1: str | None = None, value2: str | None = None) -> list:
    return [kind, value1] if value2 is None else [kind, value1, value2]


def words_re(*words: str) -> str:
    """Regex matching a text that contains every word (in any order), case-insensitively."""
    # anchored: an unanchored search would retry the lookaheads at every position (quadratic)
    return "^" + "".join(rf"(?=.*\b{re.escape(w)}\b)" for w in words) + ".*"


def any_re(*alternatives: str) -> str:
    return "(" + "|".join(rf"\b{re.escape(a)}\b" for a in alternatives) + ")"


def _pattern(spec: list) -> TraceElement:
    return TraceElement(spec[0], spec[1] if len(spec) > 1 else None, spec[2] if len(spec) > 2 else None)


def _sliced(trace: Trace, spec: dict) -> Trace:
    for how, pattern in spec.get("slice", []):
        trace = getattr(trace, how)(_pattern(pattern))
    return trace


def _search(pattern: str, text: Any) -> bool:
    return isinstance(text, str) and re.search(pattern, text, re.IGNORECASE) is not None


def judge_check(spec: dict, elements: list[TraceElement], world: Any, start: str) -> bool:
    op = spec["op"]
    full = Trace(elements)
    trace = _sliced(full, spec)
    if op == "exists":
        return trace.Exists(_pattern(spec["el"]))
    if op == "absent":
        return not trace.Exists(_pattern(spec["el"]))
    if op == "precedes":
        return trace.Precedes(_pattern(spec["a"]), _pattern(spec["b"]))
    if op == "act_at_first":
        return trace.ActAtFirst(spec["loc"], _pattern(spec["el"]))
    if op == "at":
        # the robot's location is tracked over the whole run; the slice only
        # limits which elements may satisfy the check
        pattern = _pattern(spec["el"])
        allowed = {id(item) for item in trace.elements}
        location = start
        for item in full.elements:
            if item.name == "GoTo" and isinstance(item.value1, str):
                location = item.value1
            elif id(item) in allowed and pattern.matches(item) and _search(spec["loc"], location):
                return True
        return False
    if op == "count":
        n = trace.Count(_pattern(spec["el"]))
        return spec.get("min", 0) <= n <= spec.get("max", n)
    if op == "object_in":
        return world.object_in(spec["obj"], spec["room"]) == spec.get("present", True)
    if op == "holding":
        held = world.holding
        if spec["obj"] is None:
            return held is None
        return held is not None and held.lower() == spec["obj"].lower()
    if op == "final_location":
        return _search(spec["loc"], world.location)
    raise ValueError(f"unknown check op {op!r} in {spec!r}")


def describe(spec: dict) -> str:
    """A short human-readable text of a check (shown in feedback and explain pages)."""
    if "why" in spec:
        return spec["why"]
    op = spec["op"]
    show = lambda e: f"{e[0]}({', '.join(repr(v) for v in e[1:])})"  # noqa: E731
    if op in ("exists", "absent"):
        text = f"{'no ' if op == 'absent' else ''}{show(spec['el'])}"
    elif op == "precedes":
        text = f"{show(spec['a'])} before {show(spec['b'])}"
    elif op in ("act_at_first", "at"):
        text = f"{show(spec['el'])} at {spec['loc']!r}"
    elif op == "count":
        text = f"count {show(spec['el'])} in [{spec.get('min', 0)}, {spec.get('max', 'inf')}]"
    elif op == "object_in":
        text = f"{spec['obj']!r} {'in' if spec.get('present', True) else 'not in'} {spec['room']!r} at the end"
    elif op == "holding":
        text = f"holding {spec['obj']!r} at the end"
    else:
        text = f"ends at {spec.get('loc')!r}"
    if spec.get("slice"):
        text += " (within " + ", ".join(f"{how} {show(p)}" for how, p in spec["slice"]) + ")"
    return text


def judge(checks: list[dict], elements: list[TraceElement], world: Any, start: str) -> list[tuple[str, bool]]:
    """[(description, passed)] for every check."""
    return [(describe(c), judge_check(c, elements, world, start)) for c in checks]
