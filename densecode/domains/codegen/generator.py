"""The codegen task generator: seeded, deterministic, with train / validation / test fixed by a hash of the function.

A task is one concrete function (a family's `Spec`: parameters + names) with test inputs. The prompt is the function's
signature and docstring (description + one worked example); the model writes the body. The hidden asserts use other
inputs; their expected values come from the family's oracle (trusted code of this package), never from running the
reference text, which runs only in the sandbox (the canonical-answer test checks it against these asserts).

Split: `split_of(spec.key)` hashes the function's identity (family, parameters, names), so all tasks of one function --
whatever their inputs -- are in one split: 80% train, 10% validation, 10% test.
"""

from __future__ import annotations

import copy
import hashlib
import random
import textwrap

from densecode.domains.codegen.families import FAMILIES, RUN_OPS_SETUP, Family, Spec
from densecode.errors import DensecodeError

SPLITS = ("train", "validation", "test")
# Shares of the hash space: [0, 80) train, [80, 90) validation, [90, 100) test.
_SPLIT_BOUNDS = (("train", 80), ("validation", 90), ("test", 100))
MAX_DRAWS_PER_TASK = 200  # a split with no function left among the allowed families ends the search
MAX_INPUT_DRAWS = 20  # tries for test inputs with at least two different expected values


def split_of(key: str) -> str:
    """The split a task's identity `key` belongs to (stable across runs, machines and Python versions)."""
    bucket = int(hashlib.sha256(key.encode("utf-8")).hexdigest()[:8], 16) % 100
    return next(name for name, bound in _SPLIT_BOUNDS if bucket < bound)


def check_split(split: str) -> str:
    if split not in SPLITS:
        raise DensecodeError(f"unknown split {split!r}: choose one of {', '.join(SPLITS)}")
    return split


def select_families(names: list[str] | tuple[str, ...] = (), levels: list[int] | tuple[int, ...] = (1, 2, 3),
                    kinds: tuple[str, ...] = ("function", "class")) -> list[Family]:
    """The families a config allows (`tasks.families`: names, empty = all; `tasks.levels`)."""
    by_name = {f.name: f for f in FAMILIES}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise DensecodeError(f"tasks.families: unknown famil{'ies' if len(unknown) > 1 else 'y'} "
                             f"{', '.join(map(repr, unknown))}; choose from {', '.join(sorted(by_name))}")
    bad_levels = [lv for lv in levels if lv not in (1, 2, 3)]
    if bad_levels or not levels:
        raise DensecodeError(f"tasks.levels must be a non-empty list of 1, 2, 3; got {list(levels)}")
    chosen = [by_name[n] for n in names] if names else list(FAMILIES)
    chosen = [f for f in chosen if f.level in levels and f.kind in kinds]
    if not chosen:
        raise DensecodeError(f"tasks.families / tasks.levels: no codegen family of kind {' or '.join(kinds)} with "
                             f"level in {list(levels)} among {list(names) or 'all families'}")
    return chosen


def draw_spec(rng: random.Random, families: list[Family]) -> Spec:
    fam = rng.choice(families)
    params = fam.params(rng)
    entry = rng.choice(fam.entries)
    args = tuple(rng.choice(choices) for choices in fam.arg_names)
    return Spec(fam, tuple(sorted(params.items())), entry, args)


def draw_inputs(rng: random.Random, spec: Spec, n: int) -> list[tuple]:
    """`n` distinct argument tuples (fewer when the family's input space is that small)."""
    seen, out = set(), []
    for _ in range(n * 20):
        args = spec.family.inputs(rng, spec.p)
        key = repr(args)
        if key not in seen:
            seen.add(key)
            out.append(args)
            if len(out) == n:
                break
    return out


def expected(spec: Spec, args: tuple):
    """The oracle's value for one call (on a copy: an oracle never sees the arguments the test text shows)."""
    return spec.call(*copy.deepcopy(args))


def call_text(spec: Spec, args: tuple) -> str:
    if spec.family.kind == "class":
        init, ops = args
        return f"run_ops({spec.entry}, {init!r}, {ops!r})"
    return f"{spec.entry}({', '.join(repr(a) for a in args)})"


def _docstring(text: str, indent: str) -> str:
    return textwrap.fill(text, width=100, initial_indent=indent, subsequent_indent=indent)


def prompt_of(spec: Spec, example: tuple | None) -> str:
    """Signature + docstring (the description and, for functions, one worked example); the model writes the body."""
    desc = _docstring(spec.description(), "    ")
    if spec.family.kind == "class":
        return f'class {spec.entry}:\n    """\n{desc}\n    """\n\n'
    head = f"def {spec.entry}({', '.join(spec.args)}):\n"
    if example is None:
        return f'{head}    """\n{desc}\n    """\n'
    value = expected(spec, example)
    return f'{head}    """\n{desc}\n\n    >>> {call_text(spec, example)}\n    {value!r}\n    """\n'


def task_of(spec: Spec, inputs: list[tuple], split: str) -> dict:
    """One task dict: the first input is the docstring's example, the others (or all, if only one) are tested."""
    is_class = spec.family.kind == "class"
    example = None if is_class or len(inputs) < 2 else inputs[0]
    tested = inputs if example is None else inputs[1:]
    prompt = prompt_of(spec, example)
    tests = [f"assert {call_text(spec, args)} == {expected(spec, args)!r}" for args in tested]
    body = spec.body()
    digest = hashlib.sha256((prompt + "\n".join(tests)).encode("utf-8")).hexdigest()[:12]
    return {
        "task_id": f"codegen/{spec.family.name}/{digest}",
        "family": spec.family.name,
        "category": spec.family.category,
        "level": spec.family.level,
        "split": split,
        "split_key": spec.key,
        "entry_point": spec.entry,
        "prompt": prompt,
        "tests": tests,
        "setup": RUN_OPS_SETUP if is_class else "",
        "canonical": body,  # the response that solves the task (the body under the prompt)
        "reference": prompt + body,  # the whole program
    }


def generate_tasks(split: str, n: int, seed: int, families: list[Family] | None = None, n_tests: int = 4) -> list[dict]:
    """`n` tasks of `split`, deterministic in `seed` (and the family list)."""
    check_split(split)
    fams = list(families) if families is not None else list(FAMILIES)
    rng = random.Random(f"codegen:{split}:{seed}")
    out: list[dict] = []
    draws = 0
    while len(out) < n:
        draws += 1
        if draws > MAX_DRAWS_PER_TASK * (n + 1):
            raise DensecodeError(f"codegen: found only {len(out)} of {n} {split} tasks among the families "
                                 f"{', '.join(f.name for f in fams)}; allow more families (tasks.families)")
        spec = draw_spec(rng, fams)
        if split_of(spec.key) != split:
            continue
        for _ in range(MAX_INPUT_DRAWS):
            # Tests that all expect one value would pass a constant answer: draw again (deterministically).
            inputs = draw_inputs(rng, spec, n_tests + 1)
            tested = inputs[1:] if spec.family.kind == "function" and len(inputs) > 1 else inputs
            if len({repr(expected(spec, args)) for args in tested}) > 1:
                break
        out.append(task_of(spec, inputs, split))
    return out
