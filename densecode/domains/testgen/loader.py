"""Real testgen tasks from MBPP: the reference solution is the function to test, MBPP's own asserts the canonical
answer.

A row needs `code` and `test_list` (MBPP fields; `test_setup_code` is prepended to the reference). The entry point is
the function the first test calls; the sample inputs for the mutants' equivalence check are the literal arguments of
the tests' calls plus random perturbations of them (`random_sample`). Every canonical answer is judged in the
sandbox at load: a row whose asserts do not all hold on its reference (or fall outside the test language) is
rejected with a `file:line: ...` reason, never trained on.
`target_coverage` is what MBPP's asserts reach; `level` follows the reference's branching (`level_of`).
"""

from __future__ import annotations

import ast
import hashlib
import random
import sys
from pathlib import Path

from densecode.domains.testgen.analysis import code_shape
from densecode.domains.testgen.asserts import quiet_parse
from densecode.domains.testgen.generator import format_prompt, split_of
from densecode.domains.testgen.judge import JudgeOptions, judge
from densecode.errors import DensecodeError
from densecode.jsonl import numbered, read_jsonl


def _calls_of(tests: list[str], entry: str) -> list[str]:
    """reprs of the literal argument lists of every call of `entry` in the tests."""
    out = []
    for test in tests:
        try:
            tree = quiet_parse(test)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == entry \
                    and not node.keywords:
                try:
                    args = [ast.literal_eval(a) for a in node.args]
                except (ValueError, SyntaxError, TypeError):
                    continue
                if repr(args) not in out:
                    out.append(repr(args))
    return out


def _perturb(value, rng: random.Random):
    """A nearby value of the same type and no larger (so a perturbed call costs about what the test's call does)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + rng.choice((-1, 1))
    if isinstance(value, float):
        return value + rng.choice((-0.5, 0.5))
    if isinstance(value, (str, list, tuple)) and value:
        kind = rng.choice(("drop", "reverse", "rotate"))
        out = value[:-1] if kind == "drop" else (value[::-1] if kind == "reverse" else value[1:] + value[:1])
        return out
    return value


def random_sample(inputs: list[str], seed: str, n: int = 12) -> list[str]:
    """The tests' argument lists plus up to `n` random perturbations of them: the sample on which mutants that
    behave like the reference are found (the tests' own inputs alone would make every live mutant killable)."""
    rng = random.Random(seed)
    parsed = [ast.literal_eval(a) for a in inputs]
    out = list(inputs)
    for _ in range(4 * n):
        if not parsed or len(out) >= len(inputs) + n:
            break
        args = list(rng.choice(parsed))
        i = rng.randrange(len(args)) if args else 0
        if args:
            args[i] = _perturb(args[i], rng)
        text = repr(args)
        if text not in out:
            out.append(text)
    return out


def _entry_point(tests: list[str], reference: str, where: str) -> str:
    defined = {n.name for n in quiet_parse(reference).body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    for test in tests:
        try:
            tree = quiet_parse(test)
        except SyntaxError:
            raise DensecodeError(f"{where}: test {test!r} is not valid Python") from None
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in defined:
                return node.func.id
    raise DensecodeError(f"{where}: no test calls a function the reference defines ({', '.join(sorted(defined))})")


def level_of(reference: str) -> int:
    """1-3 by the reference's branching (coverage.py's branch lines): 0-1 branches easy, 2-3 medium, more hard."""
    n = len({a[0] for a in code_shape(reference).branch_arcs})
    return 1 if n <= 1 else (2 if n <= 3 else 3)


def task_from_row(row: dict, where: str) -> dict:
    if not isinstance(row.get("code"), str) or not isinstance(row.get("test_list"), list) or not row["test_list"]:
        raise DensecodeError(f"{where}: a testgen row needs 'code' (the function) and 'test_list' (its asserts); "
                             f"got keys {sorted(row)}")
    setup = str(row.get("test_setup_code") or "").replace("\r\n", "\n")
    reference = (setup + "\n" if setup.strip() else "") + row["code"].replace("\r\n", "\n")
    try:
        quiet_parse(reference)
    except SyntaxError as exc:
        raise DensecodeError(f"{where}: the reference does not parse ({exc.msg}, line {exc.lineno})") from None
    tests = [str(t) for t in row["test_list"]]
    entry = _entry_point(tests, reference, where)
    task_id = row.get("task_id", hashlib.sha256(reference.encode()).hexdigest()[:12])
    return {"task_id": f"testgen/mbpp/{task_id}", "prompt": format_prompt(reference), "reference": reference,
            "entry_point": entry, "inputs": random_sample(_calls_of(tests, entry), f"mbpp:{task_id}"),
            "canonical": "\n".join(tests) + "\n", "target_coverage": 1.0, "level": level_of(reference),
            "family": "mbpp", "split": split_of(reference), "where": where}


def load_tasks(path: str | Path, *, limit: int = 0, pool=None, opts: JudgeOptions | None = None,
               log=sys.stderr) -> tuple[list[dict], list[str]]:
    """(accepted tasks, rejection reasons): every row's canonical asserts judged in the sandbox."""
    path = Path(path)
    rows = read_jsonl(path, what="testgen tasks", hint="MBPP rows with 'code' and 'test_list'")
    tasks = [task_from_row(row, where) for where, row in numbered(path, rows)]
    if limit:
        tasks = tasks[:limit]
    reports = judge(tasks, [t["canonical"] for t in tasks], pool, opts)
    accepted, rejected = [], []
    for task, report in zip(tasks, reports):
        bad = [a for a in report.asserts if a.status != "holds"]
        if report.error or bad or not report.asserts:
            reason = report.error or "; ".join(f"{a.source[:60]!r}: {a.message}" for a in bad[:2]) or "no asserts"
            rejected.append(f"{task['where']}: canonical asserts rejected: {reason}")
            continue
        task["target_coverage"] = round(report.coverage.total, 6)
        accepted.append(task)
    if rejected and log is not None:
        print(f"testgen: {len(rejected)} of {len(tasks)} tasks in {path} rejected (canonical asserts fail):",
              file=log)
        for line in rejected[:20]:
            print("  " + line, file=log)
    if not accepted:
        raise DensecodeError(f"{path}: no task left after rejecting those whose canonical asserts fail "
                             f"(first: {rejected[0] if rejected else 'no rows'})")
    return accepted, rejected


def main(argv: list[str] | None = None) -> int:
    """`python -m densecode.domains.testgen.loader FILE [--limit N]`: how many rows load, and what the canonical
    asserts reach (the figures docs/code-tasks.md quotes)."""
    import argparse

    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("path")
    ap.add_argument("--limit", type=int, default=0)
    args = ap.parse_args(argv)
    try:
        accepted, rejected = load_tasks(args.path, limit=args.limit, log=None)
    except DensecodeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    reports = judge(accepted, [t["canonical"] for t in accepted])
    n = len(accepted)
    print(f"{n} accepted, {len(rejected)} rejected")
    for line in rejected:
        print("  " + line)
    line = sum(r.coverage.line for r in reports) / n
    branch = sum(r.coverage.branch for r in reports) / n
    print(f"canonical asserts: coverage {sum(r.coverage.total for r in reports) / n:.3f} "
          f"(line {line:.3f}, branch {branch:.3f}), "
          f"mutation score {sum(r.mutation_score for r in reports) / n:.3f}, "
          f"live mutants per task {sum(r.n_mutants for r in reports) / n:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
