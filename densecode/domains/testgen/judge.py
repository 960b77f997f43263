"""Judge testgen responses in the sandbox: which asserts hold on the reference, the coverage they reach, the mutants
they kill, and each holding assert's marginal share of both (what the token reward puts on its line).

One sandbox program per response (the harness, `harness.py`, with the reference, its mutants and the checked
asserts), run as a StdioJob; its single result line carries a per-job random nonce. Verdicts are computed here from
that plain data: coverage with coverage.py's static analysis (`analysis.py`), kills against the mutants that are not
equivalent on the task's sample inputs.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from densecode.domains.testgen.analysis import Coverage, code_shape, coverage_numbers
from densecode.domains.testgen.asserts import ParsedAssert, parse_asserts
from densecode.domains.testgen.mutants import make_mutants

HARNESS_PATH = Path(__file__).parent / "harness.py"
HARNESS_SOURCE = HARNESS_PATH.read_text(encoding="utf-8")
# The sandbox workers load the harness file once under this name (SandboxPool.require_preload), so a program is two
# lines, not the harness compiled anew (~3 ms of each program's CPU). Each program still runs in its own process.
HARNESS_MODULE = "densecode_testgen_harness"
HARNESS_PRELOAD = f"{HARNESS_MODULE}={HARNESS_PATH}"


@dataclass(frozen=True)
class JudgeOptions:
    max_asserts: int = 12  # asserts after this many get nothing (a response is a test file, not a fuzzer)
    max_mutants: int = 10
    step_budget: int = 100000  # line events of a reference call under an assert before it counts as raising
    call_cpu_s: float = 0.01  # CPU seconds of an untraced call (equivalence, mutant under an assert) before it raises
    total_cpu_s: float = 2.0  # CPU seconds per response; mutant runs past it are skipped (kills not counted)
    assert_cpu_s: float = 1.0  # CPU seconds of the reference under one assert (a step on huge numbers is slow)
    timeout_s: float = 10.0


@dataclass
class AssertVerdict:
    source: str
    span: tuple[int, int]
    status: str  # holds | fails | rejected | not_assert | over_limit | unjudged
    message: str = ""
    coverage_gain: float = 0.0  # share of the coverable units this assert covered first
    kill_gain: float = 0.0  # share of the live mutants this assert killed first


@dataclass
class TestgenReport:
    __test__ = False  # not a pytest class

    asserts: list[AssertVerdict] = field(default_factory=list)
    coverage: Coverage | None = None
    mutation_score: float = 0.0
    n_mutants: int = 0  # live (non-equivalent) mutants
    n_killed: int = 0
    n_equivalent: int = 0
    error: str | None = None  # the judge could not run (no result from the sandbox)

    @property
    def n_holding(self) -> int:
        return sum(a.status == "holds" for a in self.asserts)

    @property
    def n_failing(self) -> int:
        return sum(a.status in ("fails", "rejected") for a in self.asserts)

    def outcome(self, target: float) -> str:
        if self.error:
            return "judge_error"
        tests = [a for a in self.asserts if a.status not in ("not_assert", "over_limit")]
        if not tests:
            return "no_asserts"
        if self.n_failing:
            return "failing_assert"
        if self.coverage is not None and self.coverage.total + 1e-6 >= target:
            return "success"
        return "incomplete"


@lru_cache(maxsize=4096)
def _mutant_sources(reference: str, limit: int) -> tuple[str, ...]:
    return tuple(m["source"] for m in make_mutants(reference, limit))


# The mutants' statuses (live / equivalent / hangs / load_error) of a task, from the `E` line of an earlier run:
# a property of the task, not of a response, so a GRPO group or a fixed eval set computes it once.
_STATUS_CACHE: OrderedDict[str, list[str]] = OrderedDict()


def _task_key(task: dict, opts: JudgeOptions) -> str:
    data = [task["reference"], task["entry_point"], list(task.get("inputs") or []), opts.max_mutants, opts.call_cpu_s]
    return hashlib.sha256(json.dumps(data).encode()).hexdigest()


def build_program(task: dict, asserts: list[str], opts: JudgeOptions, status: list[str] | None = None,
                  preloaded: bool = False) -> tuple[str, str]:
    """(sandbox program, nonce) judging `asserts` against the task's reference and mutants (`status`: the mutants'
    known statuses, which skips their equivalence check). `preloaded`: the program imports the harness the
    worker holds (HARNESS_PRELOAD) instead of carrying its source."""
    spec = {"reference": task["reference"], "entry": task["entry_point"],
            "mutants": list(_mutant_sources(task["reference"], opts.max_mutants)),
            "inputs": list(task.get("inputs") or []), "asserts": asserts, "status": status,
            "step_budget": opts.step_budget, "call_cpu_s": opts.call_cpu_s, "total_cpu_s": opts.total_cpu_s,
            "assert_cpu_s": opts.assert_cpu_s}
    nonce = "@@testgen-" + secrets.token_hex(8) + "@@"
    if preloaded:
        program = f"import {HARNESS_MODULE} as _h\n_h.main(_h.json.loads({json.dumps(spec)!r}), {nonce!r})\n"
    else:
        program = f"{HARNESS_SOURCE}\n\nmain(json.loads({json.dumps(spec)!r}), {nonce!r})\n"
    return program, nonce


def _result_line(stdout: str, nonce: str, kind: str = "R"):
    """The harness's `kind` line (R: the result dict, E: the mutants' statuses) marked with this job's nonce."""
    mark = nonce + kind
    for line in reversed(stdout.splitlines()):
        if line.startswith(mark):
            try:
                data = json.loads(line[len(mark):])
            except ValueError:
                return None
            return data if isinstance(data, (dict if kind == "R" else list)) else None
    return None


def _remember(key: str, statuses) -> None:
    if isinstance(statuses, list) and all(isinstance(x, str) for x in statuses):
        _STATUS_CACHE[key] = statuses
        _STATUS_CACHE.move_to_end(key)
        while len(_STATUS_CACHE) > 4096:
            _STATUS_CACHE.popitem(last=False)


def assemble(task: dict, parsed: list[ParsedAssert], judged_idx: list[int], data: dict | None,
             opts: JudgeOptions) -> TestgenReport:
    """The report of one response from the harness's plain data (`data`; None when the run gave none)."""
    verdicts = []
    for i, p in enumerate(parsed):
        status = "unjudged" if p.valid else ("not_assert" if p.problem.startswith("not an assert") else "rejected")
        verdicts.append(AssertVerdict(p.source, p.span, status, p.problem or ""))
    report = TestgenReport(asserts=verdicts)
    shape = code_shape(task["reference"])
    if data is None or "error" in data or len(data.get("asserts", [])) != len(judged_idx):
        report.error = (data or {}).get("error") or "the sandbox gave no result (timeout or crash)"
        report.coverage = coverage_numbers(shape, set(), set(), set(), tested=False)
        return report
    baseline = set(data.get("baseline", []))
    stmts, barcs = shape.units(baseline)
    n_units = len(stmts) + len(barcs)
    statuses = data.get("mutants", [])
    live = [k for k, s in enumerate(statuses) if s == "live"]
    report.n_mutants = len(live)
    report.n_equivalent = sum(s == "equivalent" for s in statuses)
    seen_lines: set[int] = set()
    seen_arcs: set[tuple[int, int]] = set()
    killed: set[int] = set()
    for idx, rec in zip(judged_idx, data["asserts"]):
        v = verdicts[idx]
        if not rec.get("holds"):
            v.status = "fails"
            v.message = f"fails on the reference ({rec.get('error') or 'AssertionError'})"
            continue
        v.status = "holds"
        lines, arcs = shape.covered(rec.get("lines", []), rec.get("arcs", []))
        new_lines = (lines & stmts) - seen_lines
        new_arcs = (arcs & barcs) - seen_arcs
        seen_lines |= new_lines
        seen_arcs |= new_arcs
        new_kills = {k for k in rec.get("kills", []) if k in live} - killed
        killed |= new_kills
        v.coverage_gain = (len(new_lines) + len(new_arcs)) / n_units if n_units else 0.0
        v.kill_gain = len(new_kills) / len(live) if live else 0.0
        v.message = (f"holds; covers {len(new_lines)} new line(s), {len(new_arcs)} new branch(es); "
                     f"kills {len(new_kills)} new mutant(s)")
    report.coverage = coverage_numbers(shape, baseline, seen_lines, seen_arcs,
                                       tested=any(v.status == "holds" for v in verdicts))
    report.n_killed = len(killed)
    report.mutation_score = len(killed) / len(live) if live else 0.0
    return report


def judge(tasks: list[dict], responses: list[str], pool=None, opts: JudgeOptions | None = None
          ) -> list[TestgenReport]:
    """One report per (task, response); one sandbox program each (responses with no valid assert run none). A task
    that several responses share and whose mutants are not known yet first gets one program that finds them."""
    from densecode.sandbox import StdioJob

    opts = opts or JudgeOptions()
    if pool is None:
        from densecode.sandbox import get_default_pool

        pool = get_default_pool()
    preloaded = hasattr(pool, "require_preload")
    if preloaded:
        pool.require_preload(HARNESS_PRELOAD)
    parsed_all = []
    for task, response in zip(tasks, responses):
        parsed = parse_asserts(response, task["reference"])
        judged_idx = []
        for i, p in enumerate(parsed):
            if not p.valid:
                continue
            if len(judged_idx) >= opts.max_asserts:
                parsed[i] = ParsedAssert(p.source, p.span, f"over the limit of {opts.max_asserts} asserts")
                continue
            judged_idx.append(i)
        parsed_all.append((task, parsed, judged_idx, _task_key(task, opts)))
    shared = Counter(key for _, _, idx, key in parsed_all if idx)
    first: dict[str, tuple] = {}  # task key -> (equivalence-only job, its nonce)
    for task, _, idx, key in parsed_all:
        if idx and shared[key] > 1 and key not in _STATUS_CACHE and key not in first:
            program, nonce = build_program(task, [], opts, preloaded=preloaded)
            first[key] = (StdioJob(code=program, cases=[("", "")], timeout_s=opts.timeout_s), nonce)
    if first:
        for (key, (_, nonce)), res in zip(first.items(), pool.run([job for job, _ in first.values()])):
            _remember(key, _result_line(res.stdout, nonce, "E"))
    plans, jobs = [], []
    for task, parsed, judged_idx, key in parsed_all:
        if not judged_idx:  # nothing to run: no coverage, no kills
            plans.append((task, parsed, judged_idx, key, "", None))
            continue
        program, nonce = build_program(task, [parsed[i].source for i in judged_idx], opts, _STATUS_CACHE.get(key),
                                       preloaded=preloaded)
        plans.append((task, parsed, judged_idx, key, nonce, len(jobs)))
        jobs.append(StdioJob(code=program, cases=[("", "")], timeout_s=opts.timeout_s))
    results = pool.run(jobs) if jobs else []
    reports = []
    for task, parsed, judged_idx, key, nonce, j in plans:
        if j is None:
            data = {"asserts": []}
        else:
            data = _result_line(results[j].stdout, nonce)
            if key not in _STATUS_CACHE:
                _remember(key, _result_line(results[j].stdout, nonce, "E"))
        report = assemble(task, parsed, judged_idx, data, opts)
        for v in report.asserts:
            if v.status == "rejected" and v.message.startswith("over the limit"):
                v.status = "over_limit"
        reports.append(report)
    return reports
