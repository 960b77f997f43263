"""Generated testgen tasks: a rendered library function, sample inputs, and canonical asserts that cover it.

Deterministic in (split, n, seed). A task's split is fixed by a hash of its reference source (80% train, 10%
validation, 10% test), so the splits are disjoint whatever the seed. The canonical asserts are chosen greedily from
asserts on sampled inputs (each `assert f(args) == value`, the value computed by the harness running our own
library function here, in this process: it is densecode's code, not a model's) until no input adds coverage, then
up to two more for mutation strength; `target_coverage` is what they reach (1.0 for nearly every task).
"""

from __future__ import annotations

import copy
import hashlib
import random

from densecode.domains.testgen import harness
from densecode.domains.testgen.analysis import code_shape, coverage_numbers
from densecode.domains.testgen.library import TEMPLATES, Rendered, render, sample_arg

SPLITS = ("train", "validation", "test")
N_INPUTS = 32
MAX_CANONICAL = 8
N_EQUIVALENCE_INPUTS = 12
PROMPT_HEADER = ("# Write assert statements that test the function below. Each assert must hold for this code;\n"
                 "# together they should run every line and branch of it.\n")
TESTABLE = tuple(t for t in TEMPLATES if t.args)  # (classes need scripts, not calls: commitmsg uses them)


def split_of(content: str) -> str:
    bucket = int(hashlib.sha256(content.encode()).hexdigest()[:8], 16) % 100
    return "train" if bucket < 80 else ("validation" if bucket < 90 else "test")


def format_prompt(reference: str) -> str:
    return f"{PROMPT_HEADER}{reference.rstrip()}\n\n\n# Tests\n"


def call_text(entry: str, args: list) -> str:
    return f"{entry}({', '.join(repr(a) for a in args)})"


def simplest_cover(asserts: list[str], units: list[set], holds: list[bool], target: set) -> list[int] | None:
    """Indices of holding asserts that together cover `target`, preferring short ones: greedy on the coverage gained
    (ties to the shortest assert), then every assert the others make redundant dropped (longest first). None if the
    holding asserts cannot cover `target`."""
    chosen: list[int] = []
    got: set = set()
    pool = [i for i in range(len(asserts)) if holds[i]]
    while not target <= got:
        best = max(pool, key=lambda i: (len((units[i] & target) - got), -len(asserts[i]), -i), default=None)
        if best is None or not (units[best] & target) - got:
            return None
        chosen.append(best)
        got |= units[best]
    for i in sorted(chosen, key=lambda i: (-len(asserts[i]), -i)):
        rest = [j for j in chosen if j != i]
        if rest and target <= set().union(*(units[j] for j in rest)):
            chosen = rest
    return sorted(chosen)


def _canonical(r: Rendered, rng: random.Random) -> tuple[list[str], list[str], float, list[str]] | None:
    """(inputs as reprs, canonical asserts, coverage they reach, the simplest asserts reaching the same coverage) or
    None if no input runs cleanly."""
    inputs, seen = [], set()
    for _ in range(N_INPUTS * 3):
        args = [sample_arg(kind, rng) for kind in r.template.args]
        key = repr(args)
        if key not in seen:
            seen.add(key)
            inputs.append(args)
        if len(inputs) >= N_INPUTS:
            break
    ns: dict = {}
    exec(compile(r.source, "<library>", "exec"), ns)  # noqa: S102 - our own library code
    fn = ns[r.entry]
    candidates, cand_args = [], []
    for args in inputs:
        try:  # our own library function on our own inputs: it terminates; some inputs make it raise
            value = fn(*copy.deepcopy(args))
        except Exception:  # noqa: BLE001, S112 - an input the function rejects is no test case
            continue
        candidates.append(f"assert {call_text(r.entry, args)} == {value!r}")
        cand_args.append(args)
    if not candidates:
        return None
    data = harness.run({"reference": r.source, "entry": r.entry, "asserts": candidates, "step_budget": 10 ** 6})
    shape = code_shape(r.source)
    units = [set(shape.covered(a["lines"], a["arcs"])[0]) | {("arc",) + x for x in shape.covered(a["lines"], a["arcs"])[1]}
             for a in data["asserts"]]
    chosen: list[int] = []
    covered: set = set()
    while True:
        best = max(range(len(candidates)), key=lambda i: (len(units[i] - covered), -i))
        if not units[best] - covered or not data["asserts"][best]["holds"]:
            break
        chosen.append(best)
        covered |= units[best]
    extra = [i for i in range(len(candidates)) if i not in chosen and data["asserts"][i]["holds"]]
    chosen += extra[:2]
    chosen = chosen[:MAX_CANONICAL]
    lines = {u for u in covered if isinstance(u, int)}
    arcs = {u[1:] for u in covered if isinstance(u, tuple)}
    cov = coverage_numbers(shape, set(data["baseline"]), lines, arcs)
    # The mutants' equivalence check runs on the canonical inputs and a few more (not all: it runs per judgement).
    order = sorted(chosen) + [i for i in range(len(cand_args)) if i not in chosen]
    sample = [repr(cand_args[i]) for i in order[:N_EQUIVALENCE_INPUTS]]
    holds = [a["holds"] for a in data["asserts"]]
    simple = simplest_cover(candidates, units, holds, covered)
    simple_asserts = [candidates[i] for i in simple] if simple is not None else [candidates[i] for i in sorted(chosen)]
    return sample, [candidates[i] for i in sorted(chosen)], cov.total, simple_asserts


def make_task(r: Rendered, rng: random.Random) -> dict | None:
    made = _canonical(r, rng)
    if made is None:
        return None
    inputs, asserts, target, simple = made
    digest = hashlib.sha256(r.source.encode()).hexdigest()[:12]
    return {"task_id": f"testgen/{r.template.family}/{digest}", "prompt": format_prompt(r.source),
            "reference": r.source, "entry_point": r.entry, "inputs": inputs,
            "canonical": "\n".join(asserts) + "\n", "target_coverage": round(target, 6),
            # The shortest holding asserts that reach the same coverage: what the embedded model's corpus trains on
            # (short inputs make the expected values computable for a small model); judged like `canonical`.
            "simple_canonical": "\n".join(simple) + "\n",
            "level": r.template.level, "family": r.template.family, "split": split_of(r.source)}


def generate_tasks(split: str, n: int, seed: int, levels: tuple[int, ...] = (1, 2, 3)) -> list[dict]:
    """`n` tasks of `split`, deterministic in `seed` (distinct within one call while the split has enough)."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(SPLITS)}; got {split!r}")
    pool = [t for t in TESTABLE if t.level in levels]
    rng = random.Random(f"testgen:{split}:{seed}")
    out, seen = [], set()
    attempts = 0
    while len(out) < n:
        attempts += 1
        t = pool[rng.randrange(len(pool))]
        r = render(t, rng)
        if split_of(r.source) != split or (r.source in seen and attempts < 50 * n + 1000):
            continue
        task = make_task(r, random.Random(f"inputs:{r.source}"))
        if task is None:
            continue
        seen.add(r.source)
        out.append(task)
    return out
