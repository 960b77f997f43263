"""Held-out quality of a model on the five tasks (the table docs/embedded-model.md reports for densecode-tiny).

    python -m densecode.embedded.quality --model densecode-tiny --tasks 300
    python -m densecode.embedded.quality --model densecode-tiny --tasks 300 --mbpp ../shared/data/mbpp/mbpp.jsonl

For each task (robotics, codegen, codeio, testgen, commitmsg) it answers the first N tasks of the domain's fixed
`test` split (never trained on: every domain's splits are disjoint by a hash of the task's content), greedily and at
the training temperature of the domain's shipped config (T=1.0, top_p 0.95), judges every answer with the domain's own
judge (in the sandbox) and reports: the share that parses, that runs (where the answer is a program), the success
rate and the mean score, overall and by level. `--mbpp` adds MBPP's 500 test tasks (pass@1, greedy).
"""

from __future__ import annotations

import argparse
import ast
import json
import time

from densecode.embedded.corpus import TASK_DOMAINS

SETTINGS = (("greedy", 0.0), ("T=1.0", 1.0))

# Outcome classes that mean a program answer did not run to a verdict (syntax, Python error, time/memory limits).
# codeio and commitmsg answers are not programs: "runs" does not apply to them.
NOT_RUN = {
    "robotics": {"parse_error", "python_error", "timeout", "simulator_error"},
    "codegen": {"syntax_error", "runtime_error", "timeout", "memory", "output_limit", "sandbox_violation", "failure"},
    "testgen": {"judge_error"},
}


def parses(domain: str, task: dict, response: str) -> bool:
    """Whether an answer is well-formed for its task: Python that parses (robotics and codegen with their prompt,
    which the answer continues; testgen alone), a Python literal (codeio), a non-empty line (commitmsg)."""
    try:
        if domain in ("robotics", "codegen", "mbpp"):
            ast.parse(task["prompt"] + response)
        elif domain == "testgen":
            ast.parse(response)
        elif domain == "codeio":
            ast.literal_eval(response.strip())
        else:
            return bool(response.strip())
    except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
        return False
    return True


def domain_for(name: str, mbpp_path: str | None = None):
    """The domain as its shipped config builds it (generation settings, options), optionally on MBPP's file."""
    from densecode.config import load_config
    from densecode.domains import build_domain

    if name == "mbpp":
        cfg = load_config("codegen", [f"tasks.path={mbpp_path}", "tasks.format=mbpp"])
        cfg.generation.max_new_tokens = 256  # MBPP references are longer than the generator's
        return build_domain(cfg)
    return build_domain(load_config(name))


def _max_new_tokens(domain) -> int:
    return int(domain.options.eval_max_new_tokens or getattr(domain.generation, "max_new_tokens", 128))


def summarize(name: str, tasks: list[dict], responses: list[str], records: list[dict]) -> dict:
    n = max(len(records), 1)
    ok_parse = [parses(name, t, r) for t, r in zip(tasks, responses)]
    out = {"n": len(records), "parses": sum(ok_parse) / n,
           "success": sum(r.get("outcome") == "success" for r in records) / n,
           "score": sum(float(r.get("score", 0.0)) for r in records) / n}
    not_run = NOT_RUN.get("codegen" if name == "mbpp" else name)
    out["runs"] = (sum(p and str(r.get("outcome")) not in not_run for p, r in zip(ok_parse, records)) / n
                   if not_run is not None else None)
    outcomes: dict[str, int] = {}
    by_level: dict[str, dict] = {}
    for task, record in zip(tasks, records):
        outcomes[str(record.get("outcome"))] = outcomes.get(str(record.get("outcome")), 0) + 1
        level = str(task.get("level") or "-")
        cell = by_level.setdefault(level, {"n": 0, "success": 0.0, "score": 0.0})
        cell["n"] += 1
        cell["success"] += record.get("outcome") == "success"
        cell["score"] += float(record.get("score", 0.0))
    for cell in by_level.values():
        cell["success"] /= cell["n"]
        cell["score"] /= cell["n"]
    out["outcomes"] = dict(sorted(outcomes.items()))
    out["by_level"] = dict(sorted(by_level.items()))
    return out


def measure(model, tokenizer, *, tasks=TASK_DOMAINS, split: str = "test", n_tasks: int = 300, seed: int = 0,
            settings=SETTINGS, mbpp_path: str | None = None, progress: bool = True) -> dict:
    """{task: {setting label: summary}} over the first `n_tasks` tasks of each domain's `split`."""
    from tqdm.auto import tqdm

    names = list(tasks) + (["mbpp"] if mbpp_path else [])
    results: dict[str, dict] = {}
    jobs = [(name, label, t) for name in names for label, t in (settings if name != "mbpp" else settings[:1])]
    bar = tqdm(jobs, desc="quality", unit="pass", disable=not progress, dynamic_ncols=True)
    domains = {}
    for name, label, temperature in bar:
        bar.set_postfix_str(f"{name} {label}")
        if name not in domains:
            domain = domain_for(name, mbpp_path)
            domain.prepare()
            held_out = domain.tasks(split, 500 if name == "mbpp" else n_tasks, seed)
            domains[name] = (domain, held_out)
        domain, held_out = domains[name]
        t0 = time.perf_counter()
        # A prompt with no room left for the answer in the model's context is a failure, not a crash.
        room = int(getattr(model.config, "n_positions", 10**9)) - _max_new_tokens(domain)
        fits = [len(tokenizer(t["prompt"], add_special_tokens=False)["input_ids"]) <= room for t in held_out]
        answered = domain.generate(model, tokenizer, [t["prompt"] for t, ok in zip(held_out, fits) if ok],
                                   temperature=temperature, seed=seed)
        it = iter(answered)
        responses = [next(it) if ok else "" for ok in fits]
        t_gen = time.perf_counter() - t0
        records = domain.score(held_out, responses)
        for record, ok in zip(records, fits):
            if not ok:
                record.update(outcome="prompt_too_long", score=0.0)
        summary = summarize(name, held_out, responses, records)
        summary.update(temperature=temperature, generate_seconds=round(t_gen, 1),
                       judge_seconds=round(time.perf_counter() - t0 - t_gen, 1))
        results.setdefault(name, {})[label] = summary
    return results


def mean_success(results: dict, label: str = "greedy") -> float:
    """The average over tasks of one setting's success rate (the build's validation score)."""
    values = [r[label]["success"] for name, r in results.items() if name != "mbpp" and label in r]
    return sum(values) / max(len(values), 1)


# The targets of the five-task model (issue #15): every task's success within BAND at each decoding setting, robotics
# greedy success at least that of the robotics-only densecode-tiny, and code answers that parse.
BAND = (0.15, 0.70)
ROBOTICS_GREEDY_MIN = 0.42
PARSE_MIN = 0.90
CODE_TASKS = ("codegen", "codeio", "testgen")


def band_report(results: dict) -> list[tuple[str, bool]]:
    """(check, met) for each target that applies to `results` (MBPP is reported, never judged)."""
    checks = []
    for name, per in results.items():
        if name == "mbpp":
            continue
        for label, s in per.items():
            lo, hi = BAND
            checks.append((f"{name} {label}: success {s['success']:.1%} in [{lo:.0%}, {hi:.0%}]",
                           lo <= s["success"] <= hi))
            if name in CODE_TASKS:
                checks.append((f"{name} {label}: parses {s['parses']:.1%} >= {PARSE_MIN:.0%}", s["parses"] >= PARSE_MIN))
        if name == "robotics" and "greedy" in per:
            checks.append((f"robotics greedy: success {per['greedy']['success']:.1%} >= {ROBOTICS_GREEDY_MIN:.0%}",
                           per["greedy"]["success"] >= ROBOTICS_GREEDY_MIN))
    return checks


def markdown_table(results: dict) -> str:
    rows = ["| task | decoding | n | parses | runs | success | score | success by level |",
            "|---|---|---|---|---|---|---|---|"]
    for name, per in results.items():
        for label, s in per.items():
            runs = "-" if s["runs"] is None else f"{s['runs']:.1%}"
            levels = ", ".join(f"L{k} {v['success']:.0%}" for k, v in s["by_level"].items() if k != "-") or "-"
            rows.append(f"| {name} | {label} | {s['n']} | {s['parses']:.1%} | {runs} | {s['success']:.1%} | "
                        f"{s['score']:.3f} | {levels} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    import torch

    from densecode.config import ModelConfig
    from densecode.errors import DensecodeError
    from densecode.models import load_model_and_tokenizer

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="densecode-tiny")
    parser.add_argument("--tasks", type=int, default=300, help="held-out tasks per domain")
    parser.add_argument("--only", default=",".join(TASK_DOMAINS), help="comma-separated subset of the five tasks")
    parser.add_argument("--split", default="test", choices=("validation", "test"))
    parser.add_argument("--mbpp", default=None, metavar="PATH", help="also MBPP's 500 test tasks (mbpp.jsonl)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--json", default=None, help="also write the results here")
    args = parser.parse_args(argv)
    only = [t.strip() for t in args.only.split(",") if t.strip()]
    unknown = sorted(set(only) - set(TASK_DOMAINS))
    if unknown:
        print(f"error: --only {','.join(unknown)}: choose from {','.join(TASK_DOMAINS)}")
        return 2
    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        model, tokenizer = load_model_and_tokenizer(ModelConfig(name_or_path=args.model, dtype="float32"))
        model.eval()
        results = measure(model, tokenizer, tasks=only, split=args.split, n_tasks=args.tasks, seed=args.seed,
                          mbpp_path=args.mbpp)
    except DensecodeError as exc:
        print(f"error: {exc}")
        return 2
    print(markdown_table(results))
    checks = band_report(results)
    print(f"\ntargets met: {sum(ok for _, ok in checks)} of {len(checks)}")
    for text, ok in checks:
        print(f"  [{'x' if ok else ' '}] {text}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
