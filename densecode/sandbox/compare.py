"""Comparators, all run in the parent on plain data / text.

`outputs_match` is the EvalPlus rule for function outputs. `compare_stdout`
is a MicroCoder-Evaluator style chain for program output: each method is
tried in turn, one that raises falls through to the next, and the first that
matches is recorded.
"""

from __future__ import annotations

import ast
import math
import re

MAX_LITERAL_CHARS = 200_000  # literal_eval on untrusted text beyond this is not attempted


# ---------------------------------------------------------------- function outputs (EvalPlus)


def _is_floats(x) -> bool:
    if isinstance(x, float):
        return True
    if isinstance(x, (list, tuple)) and x:
        return all(isinstance(i, float) for i in x)
    return False


def _close(out, exp, atol: float, rtol: float) -> bool:
    if isinstance(exp, bool) or isinstance(out, bool):
        return out == exp and type(out) is type(exp)
    if isinstance(exp, (int, float)) and isinstance(out, (int, float)):
        if math.isnan(exp) or math.isnan(out):
            return math.isnan(exp) and math.isnan(out)
        return abs(out - exp) <= atol + rtol * abs(exp)
    if isinstance(exp, (list, tuple)) and isinstance(out, (list, tuple)):
        return type(out) is type(exp) and len(out) == len(exp) and all(_close(o, e, atol, rtol) for o, e in zip(out, exp))
    return out == exp


def outputs_match(out, exp, atol: float = 0.0) -> bool:
    """EvalPlus: exact equality, else (floats, or atol > 0) np.allclose(out, exp, rtol=1e-07, atol=atol)."""
    try:
        if out == exp:  # plain builtin values only: no custom __eq__ can run here
            return True
    except Exception:  # noqa: BLE001
        return False
    if atol == 0 and _is_floats(exp):
        atol = 1e-6
    if atol == 0:
        return False
    try:
        return _close(out, exp, atol, 1e-7)
    except Exception:  # noqa: BLE001
        return False


# ---------------------------------------------------------------- program output (stdio)

_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$|^[+-]?(inf|nan)$", re.IGNORECASE)


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.strip().splitlines()]


def _tokens(text: str) -> list[str]:
    return text.split()


def _numbers(text: str) -> list[float]:
    toks = _tokens(text)
    if not toks or not all(_NUMBER.match(t) for t in toks):
        raise ValueError("not all tokens are numbers")
    return [float(t) for t in toks]


def cmp_exact(out: str, exp: str, rtol: float, atol: float) -> bool:
    return out == exp


def cmp_lines(out: str, exp: str, rtol: float, atol: float) -> bool:
    return _lines(out) == _lines(exp)


def cmp_whitespace(out: str, exp: str, rtol: float, atol: float) -> bool:
    return _tokens(out) == _tokens(exp)


def cmp_numeric(out: str, exp: str, rtol: float, atol: float) -> bool:
    a, b = _numbers(out), _numbers(exp)
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if math.isnan(x) or math.isnan(y):
            if not (math.isnan(x) and math.isnan(y)):
                return False
        elif not abs(x - y) <= atol + rtol * abs(y):  # np.allclose's rule
            return False
    return True


def _literal(text: str):
    text = text.strip()
    if len(text) > MAX_LITERAL_CHARS:
        raise ValueError("output too long for literal parsing")
    return ast.literal_eval(text)


def _normalise(value):
    """tuple -> list, recursively; sets stay sets (compared unordered)."""
    if isinstance(value, (list, tuple)):
        return [_normalise(v) for v in value]
    if isinstance(value, dict):
        return {k: _normalise(v) for k, v in value.items()}
    return value


def _structures_equal(a, b, rtol: float, atol: float) -> bool:
    if isinstance(a, (set, frozenset)) or isinstance(b, (set, frozenset)):
        return set(a) == set(b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_structures_equal(x, y, rtol, atol) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_structures_equal(a[k], b[k], rtol, atol) for k in a)
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return abs(a - b) <= atol + rtol * abs(b)
    return a == b or str(a) == str(b)


def cmp_structure(out: str, exp: str, rtol: float, atol: float) -> bool:
    """Both sides parse as Python literals (whole text, or line by line): compare as list/tuple/set/str."""
    try:
        a, b = _normalise(_literal(out)), _normalise(_literal(exp))
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        la, lb = _lines(out), _lines(exp)
        if len(la) != len(lb):
            return False
        a, b = [_normalise(_literal(x)) for x in la], [_normalise(_literal(x)) for x in lb]
    return _structures_equal(a, b, rtol, atol)


def _decimals(token: str) -> int:
    return len(token.split(".", 1)[1]) if "." in token and "e" not in token.lower() else 0


def cmp_rounding(out: str, exp: str, rtol: float, atol: float) -> bool:
    """Numbers equal after rounding the output to the expected number of decimals."""
    out_toks, exp_toks = _tokens(out), _tokens(exp)
    if len(out_toks) != len(exp_toks) or not exp_toks:
        return False
    for o, e in zip(out_toks, exp_toks):
        if not (_NUMBER.match(o) and _NUMBER.match(e)):
            return False
        d = _decimals(e)
        if d == 0:
            if float(o) != float(e):  # an integer answer is never "rounded" into
                return False
        elif round(float(o), d) != round(float(e), d):
            return False
    return True


COMPARATORS = (
    ("exact", cmp_exact),
    ("lines", cmp_lines),
    ("whitespace", cmp_whitespace),
    ("numeric", cmp_numeric),
    ("structure", cmp_structure),
    ("rounding", cmp_rounding),
)


def compare_stdout(out: str, exp: str, rtol: float = 1e-6, atol: float = 1e-9, comparators=COMPARATORS) -> tuple[bool, str | None, dict]:
    """-> (matched, method that matched or None, {method: error text} for methods that raised)."""
    errors: dict[str, str] = {}
    for name, fn in comparators:
        try:
            if fn(out, exp, rtol, atol):
                return True, name, errors
        except Exception as exc:  # noqa: BLE001 - a failing comparator falls through to the next
            errors[name] = f"{type(exc).__name__}: {exc}"[:200]
    return False, None, errors
