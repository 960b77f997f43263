"""Plain-data codec: the only form in which values cross the sandbox boundary.

`encode` runs in the child on candidate objects and reduces them to JSON made of
builtin values, with tags for what JSON cannot express (tuple, set, frozenset,
non-str dict keys, bytes, complex, nan/inf, huge ints). `decode` runs in the
parent and only ever builds builtin objects, so a candidate cannot smuggle an
object with a custom `__eq__` (or anything else with behaviour) into the
comparison. Subclasses of builtins (namedtuple, Counter, numpy.float64, an
`int` subclass whose `__eq__` always returns True) are reduced to their builtin
base value: the candidate chooses the value, never the comparison.
Anything else becomes an opaque marker that equals nothing.
"""

from __future__ import annotations

import math

MAX_DEPTH = 100
_BIG_INT_BITS = 12_000  # below the 4300-decimal-digit str() limit of CPython >= 3.11


class Opaque:
    """Stands for a value that is not plain data (e.g. an instance of a candidate class)."""

    __slots__ = ("type_name",)

    def __init__(self, type_name: str):
        self.type_name = type_name

    def __eq__(self, other):
        return False

    def __ne__(self, other):
        return True

    __hash__ = object.__hash__

    def __bool__(self):
        raise TypeError(f"value of type {self.type_name} is not plain data")

    def __repr__(self):
        return f"<non-plain {self.type_name}>"


class EncodeError(ValueError):
    pass


def encode(value, _depth: int = 0):
    """Candidate object -> JSON-able plain structure (runs in the child)."""
    if _depth > MAX_DEPTH:
        raise EncodeError("value nested too deeply")
    d = _depth + 1
    t = type(value)
    if value is None or t is bool or t is str:
        return value
    if t is int:
        return value if value.bit_length() < _BIG_INT_BITS else {"$h": hex(value)}
    if t is float:
        return value if math.isfinite(value) else {"$f": repr(value)}
    if t is list:
        return [encode(x, d) for x in value]
    if t is tuple:
        return {"$t": [encode(x, d) for x in value]}
    if t is dict:
        return {"$d": [[encode(k, d), encode(v, d)] for k, v in value.items()]}
    if t is set:
        return {"$s": [encode(x, d) for x in value]}
    if t is frozenset:
        return {"$fs": [encode(x, d) for x in value]}
    if t is bytes or t is bytearray:
        return {"$b": bytes(value).hex()}
    if t is complex:
        return {"$c": [encode(value.real, d), encode(value.imag, d)]}
    # Subclasses of builtins: reduce to the builtin base value (drops any custom dunder).
    for base in (bool, int, float, str, bytes, complex, tuple, list, dict, set, frozenset):
        if isinstance(value, base):
            if base is dict:
                return encode(dict(dict.items(value)), d)
            return encode(base(value), d)
    module = getattr(t, "__module__", "") or ""
    if module == "numpy" or module.startswith("numpy."):
        tolist = getattr(value, "tolist", None)
        if tolist is not None:
            return encode(tolist(), d)
    return {"$o": f"{module}.{getattr(t, '__qualname__', '?')}"}


def decode(obj, _depth: int = 0):
    """Plain structure -> builtin Python objects (runs in the parent on untrusted JSON)."""
    if _depth > MAX_DEPTH + 2:
        raise EncodeError("value nested too deeply")
    d = _depth + 1
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if isinstance(obj, list):
        return [decode(x, d) for x in obj]
    if isinstance(obj, dict) and len(obj) == 1:
        (tag, payload), = obj.items()
        if tag == "$t":
            return tuple(decode(x, d) for x in payload)
        if tag == "$d":
            return {decode(k, d): decode(v, d) for k, v in payload}
        if tag == "$s":
            return {decode(x, d) for x in payload}
        if tag == "$fs":
            return frozenset(decode(x, d) for x in payload)
        if tag == "$f":
            if payload not in ("nan", "inf", "-inf"):
                raise EncodeError(f"bad float tag {payload!r}")
            return float(payload)
        if tag == "$h":
            return int(payload, 16)
        if tag == "$b":
            return bytes.fromhex(payload)
        if tag == "$c":
            return complex(decode(payload[0], d), decode(payload[1], d))
        if tag == "$o":
            return Opaque(str(payload))
    raise EncodeError(f"malformed plain value: {str(obj)[:80]}")


def to_json_value(value):
    """Python value -> plain JSON value for the API bridge (no tags; tuples become lists)."""
    if value is None or type(value) in (bool, int, str):
        return value
    if type(value) is float:
        return value
    if type(value) in (list, tuple):
        return [to_json_value(x) for x in value]
    if type(value) is dict and all(type(k) is str for k in value):
        return {k: to_json_value(v) for k, v in value.items()}
    raise TypeError(f"bad argument type {type(value).__name__}: only str/int/float/bool/None/list/dict cross the API")
