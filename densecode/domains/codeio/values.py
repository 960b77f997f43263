"""The true value of a call, computed by running the code in densecode's sandbox (never in this process).

One StdioJob per (setup, code, call): the program runs the code, evaluates the call and writes its repr between two
markers (the function's own prints stay outside them). The parent reads the text between the last pair of markers,
parses it with `ast.literal_eval` and keeps it only if it is a value a literal answer can spell exactly
(`is_literal_value`: no objects, bytes, nan, inf) and its repr is at most `max_chars` long. Results are cached per
program text, so the same task is run once per process.

`batch > 1` (generated tasks: the codegen families' own templates) runs up to `batch` calls in one program, each
item's setup + code exec'd in a fresh namespace and its call evaluated there, its value or its exception written
under its index; items a crashed or timed-out batch left without a result run again one per program. Real data runs
one item per program (`batch=1`), so one row's code never shares a process with another's.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from densecode.domains.codeio.literal import NotALiteral, is_literal_value, parse_answer, values_equal

MARK = "\x1e=densecode-value=\x1e"
SEP = "\x1f"
_CACHE: dict[str, "Computed"] = {}
_CACHE_LIMIT = 200_000


@dataclass(frozen=True)
class Computed:
    ok: bool
    text: str  # repr of the value (ok) or why there is none
    value: Any = None


def value_program(code: str, call: str, setup: str = "") -> str:
    parts = [setup.rstrip("\n"), code.rstrip("\n"), "import sys as _dc_sys",
             f"_dc_sys.stdout.write({MARK!r} + repr({call}) + {MARK!r})"]
    return "\n".join(p for p in parts if p) + "\n"


def batch_program(items: list[tuple[str, str, str]]) -> str:
    """One program for several (setup, code, call) items: `MARK index SEP ok|error text MARK` per item."""
    listed = ",\n    ".join(repr((f"{setup}\n{code}", call)) for setup, code, call in items)
    return (f"import sys as _dc_sys\n_dc_items = [\n    {listed},\n]\n"
            "for _dc_i, (_dc_code, _dc_call) in enumerate(_dc_items):\n"
            "    _dc_ns = {'__name__': '__main__'}\n"
            "    try:\n"
            "        exec(compile(_dc_code, '<task>', 'exec'), _dc_ns)\n"
            "        _dc_out = 'ok' + repr(eval(_dc_call, _dc_ns))\n"
            "    except Exception as _dc_exc:\n"
            "        _dc_out = 'error' + type(_dc_exc).__name__ + ' ' + str(_dc_exc)[:200]\n"
            f"    _dc_sys.stdout.write({MARK!r} + str(_dc_i) + {SEP!r} + _dc_out + {MARK!r})\n"
            "    _dc_sys.stdout.flush()\n")


def _parse_batch(result: Any, n: int, max_chars: int) -> list[Computed | None]:
    """Per item of a batch program: its Computed, or None when the program ended before writing it."""
    out: list[Computed | None] = [None] * n
    for piece in (result.stdout or "").split(MARK)[1::2]:
        index, _, body = piece.partition(SEP)
        if not index.isdigit() or int(index) >= n:
            continue
        if body.startswith("ok"):
            out[int(index)] = _literal(body[2:], max_chars)
        elif body.startswith("error"):
            out[int(index)] = Computed(False, f"runtime_error: {body[5:]}"[:300])
    return out


def _parse(result: Any, max_chars: int) -> Computed:
    if result.outcome not in ("passed", "wrong_answer") or result.exc_type:
        why = f"{result.outcome}: {result.exc_type or ''} {result.exc_message or ''}".strip()
        return Computed(False, why[:300])
    pieces = (result.stdout or "").split(MARK)
    if len(pieces) < 3:
        return Computed(False, "the program printed no value")
    return _literal(pieces[-2], max_chars)


def _literal(text: str, max_chars: int) -> Computed:
    """The value a repr printed in the sandbox stands for, if a literal answer can spell it exactly."""
    if len(text) > max_chars:
        return Computed(False, f"the value's repr has {len(text)} characters (limit {max_chars})")
    try:
        value = parse_answer(text)
    except NotALiteral:
        return Computed(False, f"the value {text[:80]!r} is not a Python literal")
    canonical = canonical_repr(value) if is_literal_value(value) else None
    if canonical is None or not values_equal(parse_answer(canonical), value):
        return Computed(False, f"the value {text[:80]!r} cannot be written exactly as a literal answer")
    return Computed(True, canonical, value)


def canonical_repr(value: Any) -> str:
    """repr with set items sorted by their own repr: the same text in every process (string hashing is salted per
    process, so a set's repr order is not)."""
    if type(value) is set:
        return "{" + ", ".join(sorted(canonical_repr(v) for v in value)) + "}" if value else "set()"
    if type(value) is list:
        return "[" + ", ".join(canonical_repr(v) for v in value) + "]"
    if type(value) is tuple:
        inner = ", ".join(canonical_repr(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if type(value) is dict:
        return "{" + ", ".join(f"{canonical_repr(k)}: {canonical_repr(v)}" for k, v in value.items()) + "}"
    return repr(value)


def compute_values(items: list[tuple[str, str, str]], pool: Any = None, max_chars: int = 300,
                   timeout_s: float | None = None, batch: int = 1) -> list[Computed]:
    """For each (setup, code, call): the call's value, computed in the sandbox (`batch` items per program)."""
    from densecode.sandbox import StdioJob, get_default_pool

    programs = [value_program(code, call, setup) for setup, code, call in items]
    keys = [hashlib.sha256(f"{max_chars}\0{p}".encode()).hexdigest() for p in programs]
    todo = {k: (p, item) for k, p, item in zip(keys, programs, items) if k not in _CACHE}
    if todo:
        pool = pool or get_default_pool()
        order = list(todo)
        kw = {} if timeout_s is None else {"timeout_s": timeout_s}
        if len(_CACHE) + len(order) > _CACHE_LIMIT:
            _CACHE.clear()
        singles = order
        if batch > 1:
            groups = [order[i:i + batch] for i in range(0, len(order), batch)]
            results = pool.run([StdioJob(code=batch_program([todo[k][1] for k in g]), cases=[("", "")], **kw)
                                for g in groups])
            singles = []
            for group, res in zip(groups, results):
                for k, computed in zip(group, _parse_batch(res, len(group), max_chars)):
                    if computed is None:
                        singles.append(k)  # the batch died before this item: run it alone
                    else:
                        _CACHE[k] = computed
        if singles:
            results = pool.run([StdioJob(code=todo[k][0], cases=[("", "")], **kw) for k in singles])
            for k, res in zip(singles, results):
                _CACHE[k] = _parse(res, max_chars)
    return [_CACHE[k] for k in keys]
