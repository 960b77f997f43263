"""The component interface, the simulator hook, and the component registry.

A component takes a batch of samples and returns, per sample, one float per
response token (rewards: bad things negative) plus diagnostics saying what fired
where, and its verdict as typed fields of `ComponentOutput` (the task's outcome,
whether the response is wrong, the errors it located on tokens). Adding a component =
one new module with a `RewardComponent` subclass, one entry in `REGISTRY` (or
`{"class": "pkg.module:Class"}` in the config's `reward.components.<name>`), and a
weight in `reward.weights`: its verdict reaches GRPO, PPO's outcome credit, RFT and
the rollout stats, and its `metrics` reach the logs, with no edit anywhere else.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, get_args, runtime_checkable

import numpy as np

from densecode.errors import DensecodeError
from densecode.rewards.sample import Sample

# Exceptions that mean "did not parse": when a runner (tests, simulator) reports one, nothing ran, so it is no
# runtime error it could locate; on a truncated program it is usually the cut itself (an unclosed bracket is
# reported on the line that opened it). Syntax errors are the syntax component's to locate.
PARSE_ERRORS = ("SyntaxError", "IndentationError", "TabError")


def is_parse_error(text: str) -> bool:
    return any(name in text for name in PARSE_ERRORS)


@dataclass(frozen=True)
class LocatedError:
    """An error a component located on response tokens (a syntax error, the line that raised)."""

    tokens: tuple[int, int]  # [first, last + 1] response tokens
    message: str = ""


@dataclass
class ComponentOutput:
    values: np.ndarray  # float32, one per response token
    # What fired, where: {"rule": ..., "span": [start, end] (response chars),
    # "tokens": [first, last+1], "message": ..., "value": ...}.
    diagnostics: list[dict] = field(default_factory=list)
    # Scalars for logging only (reward/<name>/<key>): nothing reads a verdict from here.
    info: dict[str, float] = field(default_factory=dict)
    # The verdict: what GRPO (r_i, truncation masking), PPO's outcome credit, RFT, the rollout stats and eval read,
    # from every component alike. None = this component has no say on it.
    # The task's verifiable outcome in [0, 1] (the tests' pass rate, a simulator's success rate, a literal's
    # correctness); several components giving one: their mean.
    outcome: float | None = None
    # The whole response is wrong (a failing test, a runtime or robot error, a syntax error, a clean run that
    # failed the task's checks). A component whose score is a degree and no pass/fail leaves it None.
    incorrect: bool | None = None
    # Errors located on tokens (a syntax error, a line that raised; no parse error a runner reports): on lines a
    # truncation did not reach they are evidence the cut did not cause (GRPO's cut_proof).
    errors: list[LocatedError] = field(default_factory=list)
    ran_cleanly: bool | None = None  # the program ran without a runtime or robot error (rollout/executability)
    parsed: bool | None = None  # the code parses (the syntax component; GRPO's temperature steps down on it)
    kl: float | None = None  # the sequence KL to the reference this component measured (the KL controller's input)

    @classmethod
    def zeros(cls, sample: Sample, **info: float) -> ComponentOutput:
        return cls(np.zeros(sample.n_tokens, dtype=np.float32), [], dict(info))

    def verdict(self) -> dict[str, Any]:
        """The verdict fields, JSON-safe (rollouts.jsonl's "verdicts")."""
        return {"outcome": self.outcome, "incorrect": self.incorrect, "ran_cleanly": self.ran_cleanly,
                "parsed": self.parsed, "kl": self.kl,
                "errors": [{"tokens": list(e.tokens), "message": e.message} for e in self.errors]}


class RewardComponent:
    """Base class. Subclasses set `name` and implement `__call__`; `metrics` is optional."""

    name: str = "component"

    def __call__(self, samples: list[Sample]) -> list[ComponentOutput]:  # pragma: no cover - interface
        raise NotImplementedError

    def metrics(self, outputs: list[ComponentOutput]) -> dict[str, float]:
        """This component's own rollout metrics over one batch's outputs, logged as named (e.g.
        rollout/test_pass_rate). A multi-task batch passes every sample's output, a task without this component
        giving an empty one (its verdict fields None). The info scalars are logged besides, as reward/<name>/<key>."""
        return {}


Spread = Literal["each", "split", "last"]  # a component's `spread` option (spread_over, spread_score)
SPREADS: tuple[str, ...] = get_args(Spread)


def check_spread(component: str, spread: str) -> str:
    if spread not in SPREADS:
        raise DensecodeError(f"reward.components.{component}.spread must be one of {', '.join(SPREADS)}; "
                             f"got {spread!r}")
    return spread


def spread_over(values: np.ndarray, tokens, value: float, spread: str = "each") -> None:
    """Add a located value (a failing line's penalty, a Ruff finding) to `tokens` (an index list or a boolean mask)
    of `values`, in place.

    "each" (the reference implementation) puts the whole value on every token, so with
    gamma = 1 a response's return grows with its length: a positive value is a length
    bonus and a negative one a length penalty. "split" divides it evenly, so the tokens'
    values sum to `value` whatever the response's length. "last" splits a located value
    like "split" (see spread_score for what it changes).
    """
    idx = np.flatnonzero(tokens) if isinstance(tokens, np.ndarray) and tokens.dtype == bool else np.asarray(tokens, dtype=int)
    if idx.size == 0:
        return
    values[idx] += value if spread == "each" else value / idx.size


def spread_score(values: np.ndarray, tokens, value: float, spread: str = "each") -> None:
    """Add a value the whole response earned (the simulator's score, the tests' pass fraction, the DFG match) over
    its code `tokens`, in place: as spread_over, except with "last", which puts it on the response's last token.

    Why "last": with gamma = 1 a token's return is the reward still to come, so a score split over the code tokens
    leaves the last tokens' returns almost free of it (measured in docs/results.md: dense credit moves the
    outcome's weight from the end of a response to its start). On the last token every token's return carries the
    whole score, as in sparse mode, while the located values keep their tokens.
    """
    if spread == "last":
        if values.size:
            values[-1] += value
        return
    spread_over(values, tokens, value, spread)


def diag(rule: str, span: tuple[int, int] | None, tokens: list[int], message: str, value: float, **extra: Any) -> dict:
    """A diagnostic record (JSON-friendly)."""
    out = {
        "rule": rule,
        "span": list(span) if span is not None else None,
        "tokens": [min(tokens), max(tokens) + 1] if tokens else None,
        "message": message,
        "value": float(value),
    }
    out.update(extra)
    return out


@dataclass
class SimFeedback:
    score: float  # in [0, 1]: e.g. clean runs / runs, or task progress
    # (1-based PROGRAM line, negative penalty, reason) for errors that a line caused.
    line_penalties: list[tuple[int, float, str]] = field(default_factory=list)
    info: dict = field(default_factory=dict)  # numbers for logging (reward/sim/<key>)
    # The verdict the sim component passes on (ComponentOutput's fields of the same names); None = no say.
    outcome: float | None = None  # the task's success rate over the runs
    incorrect: bool | None = None  # a run raised, or ran cleanly and failed the task's checks
    ran_cleanly: bool | None = None  # no run raised a Python or robot error
    judged: bool = True  # False: the simulator failed on every run (its bug): no reward either way


@runtime_checkable
class SimulatorBackend(Protocol):
    def evaluate(self, programs: list[str], tasks: list[dict]) -> list[SimFeedback]: ...


# name -> "module:Class"; imported lazily so a component's dependencies load only when used.
REGISTRY: dict[str, str] = {
    "syntax": "densecode.rewards.syntax:SyntaxComponent",
    "lint": "densecode.rewards.lint:LintComponent",
    "tests": "densecode.rewards.unit_tests:TestsComponent",
    "dfg": "densecode.rewards.dfg:DFGComponent",
    "sim": "densecode.rewards.sim:SimComponent",
    "kl": "densecode.rewards.kl:KLComponent",
    "missing_eos": "densecode.rewards.missing_eos:MissingEosComponent",
}


def load_class(path: str) -> type:
    if ":" not in path:
        raise DensecodeError(f"component class {path!r} must look like 'package.module:ClassName'")
    mod_name, cls_name = path.split(":", 1)
    try:
        module = importlib.import_module(mod_name)
    except ImportError as exc:
        raise DensecodeError(f"cannot import reward component module {mod_name!r}: {exc}") from None
    try:
        return getattr(module, cls_name)
    except AttributeError:
        raise DensecodeError(f"module {mod_name!r} has no reward component class {cls_name!r}") from None
