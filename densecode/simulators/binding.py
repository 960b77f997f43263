"""API bindings: how a program's function calls become a gymnasium env's actions.

A binding maps each API function name the program may call to

    action: a template of the env's action; the strings "$0", "$1", ... and
            "$<param>" are replaced by the call's arguments (any JSON value).
            Every "$<name>" must name one of `params` (a misspelt placeholder
            is a config error, never sent to the env as text); "$$..." is the
            literal string "$...".
    params: names of the positional parameters (so keyword calls bind too)
    result: where the function's return value comes from after the step:
            "obs", "obs.<key>", "info.<key>", "reward", "terminated", or null
            (returns None); dotted paths go into nested dicts/lists. The path
            must exist in every step output of that call (a value of None is
            fine): a missing key is a binding error, not a None result.

plus, for the whole binding:

    error:      path to a robot-error message (truthy = the call failed and
                the run ends as a robot error), e.g. "info.error"
    score:      "clean" (1 per run without error: the reference's behaviour),
                "reward_sum" (sum of step rewards, clipped to [0, 1]) or
                "end_reward" (the reward of `end_action`, clipped to [0, 1])
    end_action: action sent after the program returns (score "end_reward")

Example (configs/warehouse.yaml):

    api:
      move: {action: {op: 0, arg: "$direction"}, params: [direction]}
      scan: {action: {op: 1, arg: ""}, result: info.result}
    error: info.error
    score: end_reward
    end_action: {op: 6, arg: ""}
"""

from __future__ import annotations

import difflib
import keyword
import re
from dataclasses import dataclass, field
from typing import Any

from densecode.errors import DensecodeError

SCORES = ("clean", "reward_sum", "end_reward")
RESULT_ROOTS = ("obs", "info", "reward", "terminated", "truncated")


class CallError(Exception):
    """A call that does not fit its binding (wrong arguments): a robot error for the run."""


class BindingError(Exception):
    """The binding does not fit the env's real step output (e.g. a result path that does not exist)."""


MISSING = object()  # `extract`'s value for a path that does not exist in a step's outputs
_PLACEHOLDER = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*|[0-9]+)")


@dataclass
class ApiFunction:
    name: str
    action: Any
    params: list[str] = field(default_factory=list)
    result: str | None = None

    def build_action(self, args: list, kwargs: dict) -> Any:
        values = list(args)
        if len(values) > len(self.params) and self.params:
            raise CallError(f"{self.name}() takes {len(self.params)} argument(s) but {len(values)} were given")
        for p in self.params[len(values):]:
            if p not in kwargs:
                raise CallError(f"{self.name}() missing argument {p!r}")
            values.append(kwargs.pop(p))
        if kwargs:
            raise CallError(f"{self.name}() got unexpected keyword argument(s) {sorted(kwargs)}")
        named = dict(zip(self.params, values))
        return _fill(self.action, values, named, self.name)


def placeholders(template: Any) -> list[str]:
    """Every "$name" / "$N" placeholder in an action template (nested dicts and lists included)."""
    if isinstance(template, str):
        m = _PLACEHOLDER.fullmatch(template)
        return [m.group(1)] if m else []
    if isinstance(template, dict):
        return [p for v in template.values() for p in placeholders(v)]
    if isinstance(template, list):
        return [p for v in template for p in placeholders(v)]
    return []


def _fill(template: Any, values: list, named: dict, fn: str) -> Any:
    if isinstance(template, str) and template.startswith("$$"):
        return template[1:]
    if isinstance(template, str) and template.startswith("$"):
        key = template[1:]
        if key.isdigit():
            if int(key) >= len(values):
                raise CallError(f"{fn}() needs argument {int(key) + 1}")
            return values[int(key)]
        if key in named:
            return named[key]
        return template
    if isinstance(template, dict):
        return {k: _fill(v, values, named, fn) for k, v in template.items()}
    if isinstance(template, list):
        return [_fill(v, values, named, fn) for v in template]
    return template


def extract(path: str | None, step: dict, missing: Any = None) -> Any:
    """Follow a dotted path ("info.result", "obs.position.0") into a step's outputs.

    A key absent from a dict (or an index past a list's end) gives `missing`; a None met on the way gives None
    (e.g. "info.error.message" when info["error"] is None: no error).
    """
    if path is None:
        return None
    parts = path.split(".")
    value = step[parts[0]]
    for part in parts[1:]:
        if value is None:
            return None
        if isinstance(value, dict):
            if part not in value:
                return missing
            value = value[part]
        elif isinstance(value, (list, tuple)) and part.lstrip("-").isdigit():
            if not -len(value) <= int(part) < len(value):
                return missing
            value = value[int(part)]
        else:
            return missing
    return value


def describe_missing(path: str, step: dict) -> str:
    """Why `path` does not resolve: the deepest part that exists and the keys it has."""
    parts = path.split(".")
    value, walked = step[parts[0]], parts[0]
    for part in parts[1:]:
        if isinstance(value, dict) and part in value:
            value, walked = value[part], f"{walked}.{part}"
            continue
        if isinstance(value, dict):
            keys = sorted(map(str, value))
            close = difflib.get_close_matches(part, keys, n=1)
            hint = f"; did you mean {walked}.{close[0]}?" if close else ""
            return f"{walked} has no key {part!r} (keys: {', '.join(keys) or 'none'}){hint}"
        if isinstance(value, (list, tuple)):
            if part.lstrip("-").isdigit() and -len(value) <= int(part) < len(value):
                value, walked = value[int(part)], f"{walked}.{part}"
                continue
            return f"{walked} is a list of {len(value)}; {part!r} is not an index in it"
        return f"{walked} is a {type(value).__name__}, not a mapping with key {part!r}"
    return f"{path} resolves"


@dataclass
class ApiBinding:
    functions: dict[str, ApiFunction]
    error: str | None = None
    score: str = "clean"
    end_action: Any = None

    @property
    def names(self) -> list[str]:
        return list(self.functions)

    @classmethod
    def from_config(cls, opts: dict) -> ApiBinding:
        api = opts.get("api")
        where = "tasks.api"
        if not isinstance(api, dict) or not api:
            raise DensecodeError(
                f"{where} must map each API function name to its binding, e.g. "
                "{move: {action: {op: 0, arg: \"$direction\"}, params: [direction]}}"
            )
        functions = {}
        for name, spec in api.items():
            if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
                raise DensecodeError(f"{where}: {name!r} is not a valid Python function name")
            if not isinstance(spec, dict) or "action" not in spec:
                raise DensecodeError(f"{where}.{name} needs an 'action' template (the env action for this call)")
            unknown = sorted(set(spec) - {"action", "params", "result"})
            if unknown:
                raise DensecodeError(f"{where}.{name}: unknown key(s) {unknown} (known: action, params, result)")
            result = spec.get("result")
            _check_path(result, f"{where}.{name}.result")
            params = spec.get("params") or []
            if not isinstance(params, list) or not all(isinstance(p, str) for p in params):
                raise DensecodeError(f"{where}.{name}.params must be a list of parameter names")
            _check_placeholders(spec["action"], params, f"{where}.{name}")
            functions[name] = ApiFunction(name, spec["action"], list(params), result)
        score = opts.get("score", "clean")
        if score not in SCORES:
            raise DensecodeError(f"tasks.score must be one of {', '.join(SCORES)}; got {score!r}")
        if score == "end_reward" and opts.get("end_action") is None:
            raise DensecodeError("tasks.score 'end_reward' needs tasks.end_action (the action sent when the program returns)")
        _check_path(opts.get("error"), "tasks.error")
        return cls(functions, opts.get("error"), score, opts.get("end_action"))


def _check_placeholders(action: Any, params: list[str], where: str) -> None:
    """A placeholder that names no parameter would reach the env as the literal text "$flor": refuse it."""
    for key in placeholders(action):
        if key.isdigit():
            if params and int(key) >= len(params):
                raise DensecodeError(f"{where}.action: placeholder '${key}' is argument {int(key) + 1}, but params "
                                     f"lists {len(params)} ({', '.join(params)}); use $0..${len(params) - 1} or "
                                     "a parameter name")
            continue
        if key not in params:
            close = difflib.get_close_matches(key, params, n=1)
            hint = f"did you mean '${close[0]}'?" if close else f"add {key!r} to {where}.params"
            raise DensecodeError(f"{where}.action: placeholder '${key}' matches no parameter "
                                 f"(params: [{', '.join(params)}]); {hint} (write '$${key}' for the literal text)")


def unused_params(fn: ApiFunction) -> list[str]:
    """Parameters of `fn` that its action template never uses (the argument is dropped on the floor)."""
    used = set(placeholders(fn.action))
    return [p for i, p in enumerate(fn.params) if p not in used and str(i) not in used]


def _check_path(path: Any, where: str) -> None:
    if path is None:
        return
    if not isinstance(path, str) or path.split(".")[0] not in RESULT_ROOTS:
        raise DensecodeError(f"{where} must be null or a path starting with one of {', '.join(RESULT_ROOTS)}; got {path!r}")
