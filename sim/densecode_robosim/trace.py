"""Trace elements and the RoboEval-style `Trace` query helpers.

A run of a robot program yields a list of `TraceElement(name, value1, value2)`
for the traced calls (GoTo, CheckEntity, Ask, Say, Pick, Place). Checks query it
with pattern elements built by `GoTo(r"lobby")`, `Ask(question_re, option_re)`,
... which match a trace element of the same kind by regex search on value1
(and, for Ask, some option must match value2). Matching is case-insensitive:
RoboEval lowercases string literals in programs before running them, densecode
runs programs unmodified, so case-insensitive checks keep the same verdicts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

TRACED = ("GoTo", "CheckEntity", "Ask", "Say", "Pick", "Place")


@dataclass
class TraceElement:
    name: str
    value1: Any = None
    value2: Any = None

    def matches(self, other: TraceElement) -> bool:
        """True if `self` (a pattern) matches `other` (a recorded element)."""
        if self.name != other.name or not isinstance(other.value1, str):
            return False
        if self.value1 is not None and not _search(self.value1, other.value1):
            return False
        if self.name == "Ask" and self.value2 is not None:
            options = other.value2 if isinstance(other.value2, list) else []
            return any(isinstance(o, str) and _search(self.value2, o) for o in options)
        return True

    def to_list(self) -> list:
        return [self.name, self.value1, self.value2]

    @classmethod
    def from_list(cls, item: list) -> TraceElement:
        return cls(item[0], item[1] if len(item) > 1 else None, item[2] if len(item) > 2 else None)

    def __repr__(self) -> str:
        if self.value2 is None:
            return f"{self.name}({self.value1!r})"
        return f"{self.name}({self.value1!r}, {self.value2!r})"


def _search(pattern: str, text: str) -> bool:
    try:
        return re.search(pattern, text, re.IGNORECASE) is not None
    except re.error:
        return pattern.lower() in text.lower()


def GoTo(value: str) -> TraceElement:  # noqa: N802 - RoboEval's names
    return TraceElement("GoTo", value)


def CheckEntity(value: str) -> TraceElement:  # noqa: N802
    return TraceElement("CheckEntity", value)


def Ask(question: str, option: str | None = None) -> TraceElement:  # noqa: N802
    return TraceElement("Ask", question, option)


def Say(value: str) -> TraceElement:  # noqa: N802
    return TraceElement("Say", value)


def Pick(value: str) -> TraceElement:  # noqa: N802
    return TraceElement("Pick", value)


def Place(value: str) -> TraceElement:  # noqa: N802
    return TraceElement("Place", value)


class Trace:
    """A slice of a run's trace. Slicing helpers return the WHOLE trace when the
    pattern is absent: a RoboEval quirk its checks rely on, kept on purpose."""

    def __init__(self, elements: list[TraceElement]):
        self.elements = list(elements)

    def __len__(self) -> int:
        return len(self.elements)

    def __iter__(self):
        return iter(self.elements)

    def __repr__(self) -> str:
        return f"Trace({self.elements!r})"

    def _first(self, pattern: TraceElement) -> int | None:
        for i, el in enumerate(self.elements):
            if pattern.matches(el):
                return i
        return None

    def _last(self, pattern: TraceElement) -> int | None:
        for i in range(len(self.elements) - 1, -1, -1):
            if pattern.matches(self.elements[i]):
                return i
        return None

    def AfterFirst(self, pattern: TraceElement) -> Trace:  # noqa: N802
        i = self._first(pattern)
        return Trace(self.elements if i is None else self.elements[i + 1 :])

    def BeforeFirst(self, pattern: TraceElement) -> Trace:  # noqa: N802
        i = self._first(pattern)
        return Trace(self.elements if i is None else self.elements[:i])

    def AfterLast(self, pattern: TraceElement) -> Trace:  # noqa: N802
        i = self._last(pattern)
        return Trace(self.elements if i is None else self.elements[i + 1 :])

    def BeforeLast(self, pattern: TraceElement) -> Trace:  # noqa: N802
        i = self._last(pattern)
        return Trace(self.elements if i is None else self.elements[:i])

    def Exists(self, pattern: TraceElement) -> bool:  # noqa: N802
        return self._first(pattern) is not None

    def Precedes(self, a: TraceElement, b: TraceElement) -> bool:  # noqa: N802
        return self.AfterFirst(a).Exists(b)

    def ActAtFirst(self, location: str, pattern: TraceElement) -> bool:  # noqa: N802
        """After the first GoTo matching `location` and before the next GoTo to a
        different place, `pattern` occurs."""
        start = self._first(GoTo(location))
        if start is None:
            return False
        for el in self.elements[start + 1 :]:
            if el.name == "GoTo" and not (isinstance(el.value1, str) and _search(location, el.value1)):
                return False
            if pattern.matches(el):
                return True
        return False

    def Count(self, pattern: TraceElement) -> int:  # noqa: N802
        return sum(1 for el in self.elements if pattern.matches(el))
