"""Judging a predicted value written as a Python literal, and finding where a wrong answer first goes wrong.

Judge (`judge`): `ast.literal_eval` of the answer (leading/trailing whitespace ignored, at most MAX_ANSWER_CHARS) must
equal the expected value under `values_equal`:
- containers keep their type: a list is not a tuple; sets and dicts compare without order;
- numbers compare as numbers (2 == 2.0) but a bool is not a number (True != 1); when the expected value is a float,
  within `rel_tol` / `abs_tol` (math.isclose), an expected int must be matched exactly;
- None, bools and strings by equality.

Departure (`departure`): the first character of the answer that no correct literal can start with the characters before
it -- the longest prefix of the answer that some correct spelling of the expected value begins with. Correct spellings:
any whitespace between tokens; strings in ' or " with any escape of a character (\\n, \\x41, \\u00e9, ...); numbers in
decimal notation whose value is in tolerance (the digits typed so far must still allow a value in range: "3.1" is a
fine start for 3.14159, "3.2" departs at "2"), an exponent only as Python's repr writes it; lists/tuples/sets/dicts with
their own brackets, items in any order for sets and dicts, an optional trailing comma (required for a 1-tuple);
the empty set as `set()`. An answer that is a correct literal but is still incomplete departs at its end (the
position after its last character). The matcher is a recursive descent that records the furthest position any
alternative reached, so sets and dicts (any order) are explored without enumerating spellings.
"""

from __future__ import annotations

import ast
import math
from fractions import Fraction
from typing import Any

MAX_ANSWER_CHARS = 10_000  # literal_eval on longer (untrusted) text is not attempted
REL_TOL = 1e-6
ABS_TOL = 1e-6
_WS = " \t\r\n"
_NAMED_ESCAPES = {"\n": "\\n", "\t": "\\t", "\r": "\\r", "\\": "\\\\", "'": "\\'", '"': '\\"', "\a": "\\a",
                  "\b": "\\b", "\f": "\\f", "\v": "\\v"}


class NotALiteral(ValueError):
    """The answer is not a Python literal (the message says why)."""


def parse_answer(text: str) -> Any:
    """The value of a literal answer; NotALiteral when it is not one."""
    text = text.strip()
    if not text:
        raise NotALiteral("empty answer")
    if len(text) > MAX_ANSWER_CHARS:
        raise NotALiteral(f"answer longer than {MAX_ANSWER_CHARS} characters")
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError) as exc:
        raise NotALiteral(f"not a Python literal ({type(exc).__name__})") from None


def is_literal_value(value: Any, depth: int = 0) -> bool:
    """Values a literal answer can spell exactly and the departure matcher knows (no bytes, complex, nan, inf)."""
    if depth > 50:
        return False
    if value is None or isinstance(value, (bool, int, str)):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if type(value) in (list, tuple, set):
        return all(is_literal_value(v, depth + 1) for v in value)
    if type(value) is dict:
        return all(is_literal_value(k, depth + 1) and is_literal_value(v, depth + 1) for k, v in value.items())
    return False


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def values_equal(got: Any, want: Any, rel_tol: float = REL_TOL, abs_tol: float = ABS_TOL) -> bool:
    """Does the answer's value `got` equal the expected `want` (rules in the module docstring)?"""
    if isinstance(want, bool) or isinstance(got, bool):
        return type(got) is type(want) and got == want
    if _is_number(want) and _is_number(got):
        if isinstance(want, float):
            return math.isclose(got, want, rel_tol=rel_tol, abs_tol=abs_tol)
        return got == want
    if want is None or isinstance(want, str):
        return type(got) is type(want) and got == want
    if type(want) in (list, tuple):
        return (type(got) is type(want) and len(got) == len(want)
                and all(values_equal(g, w, rel_tol, abs_tol) for g, w in zip(got, want)))
    if type(want) is set:
        return type(got) is set and len(got) == len(want) and _match_all(list(got), list(want), rel_tol, abs_tol)
    if type(want) is dict:
        if type(got) is not dict or len(got) != len(want):
            return False
        keys = list(got)
        for wk, wv in want.items():
            gk = next((k for k in keys if type(k) is type(wk) and k == wk), _MISSING)  # the same key, usually
            if gk is _MISSING:
                gk = next((k for k in keys if values_equal(k, wk, rel_tol, abs_tol)), _MISSING)
            if gk is _MISSING or not values_equal(got[gk], wv, rel_tol, abs_tol):
                return False
        return True
    return False


_MISSING = object()


def _match_all(got: list, want: list, rel_tol: float, abs_tol: float) -> bool:
    """Each expected item pairs with its own answer item (exact matches first, then within tolerance)."""
    free = list(got)
    for w in sorted(want, key=lambda v: 0 if v in free else 1):
        hit = next((i for i, g in enumerate(free) if values_equal(g, w, rel_tol, abs_tol)), None)
        if hit is None:
            return False
        free.pop(hit)
    return True


def judge(answer: str, want: Any, rel_tol: float = REL_TOL, abs_tol: float = ABS_TOL) -> tuple[bool, str]:
    """(correct, outcome): outcome is "success", "wrong_value" or "not_a_literal"."""
    try:
        got = parse_answer(answer)
    except NotALiteral:
        return False, "not_a_literal"
    return (True, "success") if values_equal(got, want, rel_tol, abs_tol) else (False, "wrong_value")


# ------------------------------------------------------------------------------------------------ departure


def _escapes(ch: str, quote: str) -> tuple[str, ...]:
    """Every spelling of one character inside a `quote`-quoted string (the character itself first)."""
    out = []
    if ch.isprintable() and ch not in (quote, "\\"):
        out.append(ch)
    if ch in _NAMED_ESCAPES:
        out.append(_NAMED_ESCAPES[ch])
    o = ord(ch)
    if o < 0x100:
        out.append(f"\\x{o:02x}")
    if o < 0x10000:
        out.append(f"\\u{o:04x}")
    out.append(f"\\U{o:08x}")
    return tuple(out)


def _common(text: str, pos: int, word: str) -> int:
    n = 0
    while n < len(word) and pos + n < len(text) and text[pos + n] == word[n]:
        n += 1
    return n


class _Matcher:
    """End positions of complete correct spellings of a value at a position; `far` = the furthest consistent point."""

    def __init__(self, text: str, rel_tol: float, abs_tol: float):
        self.t = text
        self.n = len(text)
        self.rel_tol, self.abs_tol = rel_tol, abs_tol
        self.far = 0
        self.memo: dict[tuple[int, int], tuple[int, ...]] = {}

    def reach(self, pos: int) -> None:
        if pos > self.far:
            self.far = pos

    def ws(self, pos: int) -> int:
        while pos < self.n and self.t[pos] in _WS:
            pos += 1
        self.reach(pos)
        return pos

    def char(self, pos: int, c: str) -> bool:
        if pos < self.n and self.t[pos] == c:
            self.reach(pos + 1)
            return True
        return False

    def value(self, v: Any, pos: int) -> tuple[int, ...]:
        key = (id(v), pos)
        if key not in self.memo:
            self.memo[key] = ()  # a value never contains itself; this also stops runaway recursion
            self.memo[key] = self._value(v, pos)
        return self.memo[key]

    def _value(self, v: Any, pos: int) -> tuple[int, ...]:
        if v is None or isinstance(v, bool):
            return self.word(repr(v), pos)
        if _is_number(v):
            return self.number(v, pos)
        if isinstance(v, str):
            return self.string(v, pos)
        if type(v) is list:
            return self.sequence(list(v), pos, "[", "]", one_needs_comma=False)
        if type(v) is tuple:
            return self.sequence(list(v), pos, "(", ")", one_needs_comma=True)
        if type(v) is set:
            return self.word("set()", pos) if not v else self.unordered([(x, None) for x in v], pos)
        if type(v) is dict:
            return self.unordered(list(v.items()), pos, is_dict=True)
        return ()

    def word(self, word: str, pos: int) -> tuple[int, ...]:
        k = _common(self.t, pos, word)
        self.reach(pos + k)
        return (pos + len(word),) if k == len(word) else ()

    # numbers ----------------------------------------------------------------------------------------
    def number(self, v: int | float, pos: int) -> tuple[int, ...]:
        end = pos
        while end < self.n and (self.t[end].isdigit() or self.t[end] in ".eE_"
                                or (self.t[end] in "+-" and (end == pos or self.t[end - 1] in "eE"))):
            end += 1
        token = self.t[pos:end]
        ok = 0
        for k in range(1, len(token) + 1):
            if not self._number_prefix_ok(token[:k], v):
                break
            ok = k
        self.reach(pos + ok)
        if ok < len(token) or not token:
            return ()
        try:
            got = ast.literal_eval(token)
        except (ValueError, SyntaxError):
            return ()
        return (end,) if _is_number(got) and values_equal(got, v, self.rel_tol, self.abs_tol) else ()

    def _target(self, v: int | float) -> tuple[Fraction, Fraction]:
        w = Fraction(v)
        tol = Fraction(max(self.rel_tol * abs(v), self.abs_tol)) if isinstance(v, float) else Fraction(0)
        return w - tol, w + tol

    def _number_prefix_ok(self, s: str, v: int | float) -> bool:
        lo, hi = self._target(v)
        sign, body = 1, s
        if body[:1] in "+-":
            sign, body = (-1 if body[0] == "-" else 1), body[1:]
        # the magnitudes the answer may still reach, as an interval of |value| with this sign
        mlo, mhi = (max(lo, Fraction(0)), hi) if sign > 0 else (max(-hi, Fraction(0)), -lo)
        if mhi < mlo:
            return False
        if not body:
            return True
        if any(r.startswith(s) for r in (repr(v), repr(float(v)))):
            return True  # Python's own spelling (the only one with an exponent that counts)
        if "e" in body.lower() or "_" in body:
            return False
        whole, dot, frac = body.partition(".")
        if (whole and not whole.isdigit()) or (frac and not frac.isdigit()) or "." in frac:
            return False
        if len(whole) > 1 and whole[0] == "0" and whole.strip("0"):
            return False  # 012 is not a Python literal
        if dot:
            base = Fraction(int(whole or "0")) + Fraction(int(frac or "0"), 10 ** len(frac))
            return base <= mhi and base + Fraction(1, 10 ** len(frac)) >= mlo
        first = int(whole)
        if first == 0:
            return mlo <= 1
        scale = 1
        while first * scale <= mhi:
            if (first + 1) * scale >= mlo:
                return True
            scale *= 10
        return False

    # strings ----------------------------------------------------------------------------------------
    def string(self, v: str, pos: int) -> tuple[int, ...]:
        if pos >= self.n or self.t[pos] not in "'\"":
            return ()
        quote = self.t[pos]
        i = pos + 1
        self.reach(i)
        for ch in v:
            best, hit = 0, None
            for spelling in _escapes(ch, quote):
                k = _common(self.t, i, spelling)
                if k == len(spelling):
                    hit = spelling
                    break
                best = max(best, k)
            if hit is None:
                self.reach(i + best)
                return ()
            i += len(hit)
            self.reach(i)
        return (i + 1,) if self.char(i, quote) else ()

    # containers -------------------------------------------------------------------------------------
    def _close(self, pos: int, closer: str, comma_required: bool) -> set[int]:
        """After the last item at `pos`: an optional (or required) trailing comma, then the closing bracket."""
        out = set()
        p = self.ws(pos)
        if not comma_required and self.char(p, closer):
            out.add(p + 1)
        if self.char(p, ","):
            q = self.ws(p + 1)
            if self.char(q, closer):
                out.add(q + 1)
        return out

    def sequence(self, items: list, pos: int, opener: str, closer: str, one_needs_comma: bool) -> tuple[int, ...]:
        if not self.char(pos, opener):
            return ()
        positions = {self.ws(pos + 1)}
        if not items:
            return tuple(sorted(p + 1 for p in positions if self.char(p, closer)))
        for i, item in enumerate(items):
            nxt: set[int] = set()
            last = i == len(items) - 1
            for p in positions:
                for e in self.value(item, p):
                    if last:
                        nxt |= self._close(e, closer, comma_required=one_needs_comma and len(items) == 1)
                    else:
                        q = self.ws(e)
                        if self.char(q, ","):
                            nxt.add(self.ws(q + 1))
            positions = nxt
            if not positions:
                return ()
        return tuple(sorted(positions))

    def _item(self, item: tuple[Any, Any], pos: int, is_dict: bool) -> set[int]:
        key, val = item
        if not is_dict:
            return set(self.value(key, pos))
        out: set[int] = set()
        for e in self.value(key, pos):
            q = self.ws(e)
            if self.char(q, ":"):
                out |= set(self.value(val, self.ws(q + 1)))
        return out

    def unordered(self, items: list[tuple[Any, Any]], pos: int, is_dict: bool = False) -> tuple[int, ...]:
        if not self.char(pos, "{"):
            return ()
        start = self.ws(pos + 1)
        if not items:
            return (start + 1,) if self.char(start, "}") else ()
        full = (1 << len(items)) - 1
        ends: set[int] = set()
        frontier = {(start, 0)}
        seen = set(frontier)
        while frontier:
            nxt = set()
            for p, mask in frontier:
                for j in range(len(items)):
                    if mask >> j & 1:
                        continue
                    m2 = mask | (1 << j)
                    for e in self._item(items[j], p, is_dict):
                        if m2 == full:
                            ends |= self._close(e, "}", comma_required=False)
                            continue
                        q = self.ws(e)
                        if self.char(q, ","):
                            state = (self.ws(q + 1), m2)
                            if state not in seen:
                                seen.add(state)
                                nxt.add(state)
            frontier = nxt
        return tuple(sorted(ends))


def departure(answer: str, want: Any, rel_tol: float = REL_TOL, abs_tol: float = ABS_TOL) -> int | None:
    """Index in `answer` of the first character that departs from every correct literal of `want`;
    None when the answer (trailing whitespace ignored) is a complete correct spelling; len(answer.rstrip()) when it
    is a correct but unfinished start."""
    text = answer.rstrip()
    if not text:
        return len(answer)  # only whitespace: a correct start that stops before the literal
    m = _Matcher(text, rel_tol, abs_tol)
    ends = m.value(want, m.ws(0))
    if len(text) in ends:
        return None
    return min(m.far, len(text))
