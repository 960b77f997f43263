"""RoboEval's trace language as CodeBotler's `benchmark/rtl.py` defines it (the task files' checks run on it).

Task files build checks from pattern elements (`GoTo(r"lobby")`, `Ask(q, o)`,
...) and query a run's `Trace`. Semantics kept exactly, quirks included:

- a pattern matches an element of the same name when `re.search(pattern,
  value1, IGNORECASE)` finds something; an `Ask` pattern also needs some
  option (value2) to match its second pattern, and raises when the element
  has no options;
- `AfterFirst` / `BeforeFirst` / `AfterLast` / `BeforeLast` return the WHOLE
  trace when the pattern is absent;
- `ActAtFirst(loc, p)`: after the first `GoTo(loc)` and before the first GoTo
  whose value does not contain `loc` as a word (`^(?!.*\\bloc\\b).*$`), `p`
  occurs (and some `GoTo(loc)` exists);
- `Terminal(p)`: the last element matches (IndexError on an empty trace).

(densecode's training checks, `densecode_robosim.trace`, differ: see docs/roboeval.md.)
"""

from __future__ import annotations

import re
from typing import Any

SPECIAL_DELIM = "/$@!/"  # separates the fields of a trace line on the program's stdout


class TraceElement:
    def __init__(self, element_name: str, value1: Any, value2: Any = None) -> None:
        self.element_name = element_name
        self.value1 = value1
        self.value2 = value2

    def convert_to_str(self) -> str:
        return f"{self.element_name} {SPECIAL_DELIM} {self.value1} {SPECIAL_DELIM} {self.value2!s}"

    def to_list(self) -> list:
        return [self.element_name, self.value1, self.value2]

    def __repr__(self) -> str:
        return f"TraceElement({self.element_name!r}, {self.value1!r}, {self.value2!r})"

    __str__ = __repr__


class StaticCheck:
    """A pattern element: matches trace elements of the same name by regex."""

    def __init__(self, element_name: str, regex_value1: str, regex_value2: str | None = None) -> None:
        self.element_name = element_name
        self.regex_value1 = regex_value1
        self.regex_value2 = regex_value2

    def check_equal(self, other: TraceElement) -> bool:
        if self.element_name != other.element_name:
            return False
        match1 = bool(re.search(self.regex_value1, other.value1, re.IGNORECASE))
        if self.regex_value2 is None:
            return match1
        if other.value2 is None:
            raise ValueError(f"StaticCheck: {other.element_name} has no second value to match "
                             f"{self.regex_value2!r} against")
        for value in other.value2:
            if re.search(self.regex_value2, value, re.IGNORECASE):
                return match1
        return False

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.regex_value1!r}, {self.regex_value2!r})"


class GoTo(StaticCheck):
    def __init__(self, regex_value1: str) -> None:
        super().__init__("GoTo", regex_value1)


class Say(StaticCheck):
    def __init__(self, regex_value1: str) -> None:
        super().__init__("Say", regex_value1)


class Ask(StaticCheck):
    def __init__(self, regex_value1: str, regex_value2: str) -> None:
        super().__init__("Ask", regex_value1, regex_value2)


class CheckEntity(StaticCheck):
    def __init__(self, regex_value1: str) -> None:
        super().__init__("CheckEntity", regex_value1)


class Pick(StaticCheck):
    def __init__(self, regex_value1: str) -> None:
        super().__init__("Pick", regex_value1)


class Place(StaticCheck):
    def __init__(self, regex_value1: str) -> None:
        super().__init__("Place", regex_value1)


class Trace:
    def __init__(self, traces: list[TraceElement]):
        self.trace = traces

    def __len__(self) -> int:
        return len(self.trace)

    def _first(self, check: StaticCheck) -> int | None:
        return next((i for i, t in enumerate(self.trace) if check.check_equal(t)), None)

    def _last(self, check: StaticCheck) -> int | None:
        return next((i for i in range(len(self.trace) - 1, -1, -1) if check.check_equal(self.trace[i])), None)

    def AfterFirst(self, check: StaticCheck) -> Trace:  # noqa: N802 - RoboEval's names
        i = self._first(check)
        return self if i is None else Trace(self.trace[i + 1:])

    def BeforeFirst(self, check: StaticCheck) -> Trace:  # noqa: N802
        i = self._first(check)
        return self if i is None else Trace(self.trace[:i])

    def AfterLast(self, check: StaticCheck) -> Trace:  # noqa: N802
        i = self._last(check)
        return self if i is None else Trace(self.trace[i + 1:])

    def BeforeLast(self, check: StaticCheck) -> Trace:  # noqa: N802
        i = self._last(check)
        return self if i is None else Trace(self.trace[:i])

    def Exists(self, check: StaticCheck) -> bool:  # noqa: N802
        return self._first(check) is not None

    def Terminal(self, check: StaticCheck) -> bool:  # noqa: N802
        return check.check_equal(self.trace[-1])

    def Precedes(self, first: StaticCheck, then: StaticCheck) -> bool:  # noqa: N802
        return self.AfterFirst(first).Exists(then)

    def ActAtFirst(self, loc: str, action: StaticCheck) -> bool:  # noqa: N802
        elsewhere = GoTo(r"^(?!.*\b{loc}\b).*$".format(loc=loc))
        act_at = self.AfterFirst(GoTo(loc)).BeforeFirst(elsewhere).Exists(action)
        return act_at and self.Exists(GoTo(loc))


NAMES = ["Trace", "TraceElement", "StaticCheck", "GoTo", "Say", "Ask", "CheckEntity", "Pick", "Place", "SPECIAL_DELIM"]
