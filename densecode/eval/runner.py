"""The evaluation library: `evaluate(spec) -> results` for MBPP, MBPP+, RoboEval, the robotics suite and any
domain's held-out split, and `run(spec)`, which also writes results.json, report.md and chart.png.

`densecode eval` (densecode/cli/eval.py) parses its flags into an `EvalSpec` (densecode/eval/spec.py) and calls
`run`; `densecode.api.evaluate` and the benchmarks call the same two functions.
"""

from __future__ import annotations

import json
import logging
import re
import shlex
import time
from datetime import UTC, datetime
from pathlib import Path

from densecode.errors import DensecodeError
from densecode.eval import mbpp as mbpp_mod
from densecode.eval.passk import mean_pass_at_k, pass_at_k
from densecode.eval.report import write_run
from densecode.eval.sampling import PROMPT_TOO_LONG, sample
from densecode.eval.spec import EvalSpec

log = logging.getLogger("densecode.eval")

# Seconds per program. MBPP reference 123 needs 2.5 s on a quiet core and 9+ s under load,
# so --canonical (the agreement check) uses 60 s; model outputs get 10 s by default.
DEFAULT_TIMEOUT_S = 10.0
CANONICAL_TIMEOUT_S = 60.0
# MBPP+ runs every input of a task in one sandboxed process: the limit grows with the
# inputs (EvalPlus gives each input max(1 s, 4 x the reference's time)), so slow but
# correct programs fit: Mbpp/599's reference needs 56-70 s for its 91 inputs on a
# loaded 2-core machine.
MBPPPLUS_SECONDS_PER_INPUT = 2.0
# EvalPlus runs candidates under a 4 GB address-space limit (Mbpp/255 needs more than 1 GB).
MBPPPLUS_MEMORY_MB = 4096


# ------------------------------------------------------------------ models


def _step_number(path: Path) -> int:
    numbers = re.findall(r"\d+", path.name)
    return int(numbers[-1]) if numbers else -1


def resolve_eval_model(name: str) -> tuple[str, str | None]:
    """(model path or id, LoRA adapter dir or None) for --model.

    Accepts a model directory, an adapter directory, a `densecode train` run
    directory (checkpoints/latest), its checkpoints/ directory, or one
    checkpoints/step-N directory (whose model/ subdirectory holds the policy).
    """
    path = Path(name).expanduser()
    if not path.is_dir():
        return name, None
    if (path / "config.json").is_file():
        return str(path), None
    if (path / "adapter_config.json").is_file():
        try:
            base = json.loads((path / "adapter_config.json").read_text())["base_model_name_or_path"]
        except (KeyError, json.JSONDecodeError):
            raise DensecodeError(f"{path}/adapter_config.json names no base_model_name_or_path") from None
        return str(base), str(path)
    if (path / "model").is_dir():
        return resolve_eval_model(str(path / "model"))
    for root in (path / "checkpoints", path):
        latest = root / "latest"
        if latest.is_file():
            candidate = root / latest.read_text().strip()
            if candidate.is_dir():
                return resolve_eval_model(str(candidate))
        steps = sorted((p for p in root.glob("step-*") if p.is_dir()), key=_step_number) if root.is_dir() else []
        if steps:
            return resolve_eval_model(str(steps[-1]))
    raise DensecodeError(
        f"--model {path}: no model there (expected config.json, a LoRA adapter, or a densecode train run "
        "directory with checkpoints/step-N/model)"
    )


def load_model(spec):
    from densecode.config import ModelConfig
    from densecode.models import load_model_and_tokenizer

    name, adapter = resolve_eval_model(spec.model)
    model, tokenizer = load_model_and_tokenizer(ModelConfig(name_or_path=name, dtype=spec.dtype), device=spec.device)
    if adapter is not None:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, adapter).merge_and_unload()
        model.eval()
    return model, tokenizer, adapter or name


def prompt_style(spec, tokenizer) -> str:
    from densecode.prompts import resolve_prompt_style

    return resolve_prompt_style(spec.prompt_style, tokenizer, what="--prompt-style", model=spec.model)


# ------------------------------------------------------------------ MBPP / MBPP+


def _scores_code(benchmark: str, tasks_out: list[dict], n: int) -> dict:
    from densecode.eval.passk import ks_for

    scores: dict = {}
    names = {"mbpp": [("verdict", "MBPP")],
             "mbppplus": [("base_verdict", "MBPP (base tests)"), ("plus_verdict", "MBPP+ (base + extra tests)")]}
    for key, label in names[benchmark]:
        correct = [sum(s[key] == "pass" for s in t["samples"]) for t in tasks_out]
        counts = [len(t["samples"]) for t in tasks_out]
        for k in ks_for(n):
            scores[f"{label} pass@{k}"] = round(mean_pass_at_k(counts, correct, k), 4)
        scores[f"{label} solved"] = sum(c > 0 for c in correct)
    scores["tasks"] = len(tasks_out)
    return scores


def evaluate_code(spec, out: dict) -> dict:
    from densecode.sandbox import Limits, SandboxPool

    tasks = mbpp_mod.load_tasks(spec.benchmark, spec.data, spec.split)
    if spec.limit is not None:
        tasks = tasks[: spec.limit]
    timeout = spec.timeout or (CANONICAL_TIMEOUT_S if spec.canonical else DEFAULT_TIMEOUT_S)
    prompts_style = "canonical"
    if spec.canonical:
        prompts = [t.problem for t in tasks]
        completions = [[t.canonical] for t in tasks]
        programs = [[t.canonical] for t in tasks]
        finish = [["reference"] for _ in tasks]
        out["model"] = "canonical solutions"
    else:
        model, tokenizer, model_name = load_model(spec)
        out["model"] = model_name
        prompts_style = prompt_style(spec, tokenizer)
        # MBPP's own prompt split (tasks 2, 3, 4, ...) gives the examples, as in the MBPP paper;
        # MBPP+ has no such split, so it gets densecode's invented ones.
        pool = mbpp_mod.load_tasks("mbpp", spec.data, "prompt") if spec.benchmark == "mbpp" and spec.few_shot else None
        shots = mbpp_mod.few_shot_examples(spec.few_shot, pool)
        if spec.benchmark == "mbpp" and shots:
            # Never evaluate a task that is shown as an example.
            shown = {s.problem for s in shots}
            tasks = [t for t in tasks if t.problem not in shown]
        if prompts_style == "chat":
            prompts = [mbpp_mod.chat_prompt(t, shots, tokenizer) for t in tasks]
            stop = mbpp_mod.CHAT_STOP
        else:
            prompts = [mbpp_mod.completion_prompt(t, shots) for t in tasks]
            stop = mbpp_mod.COMPLETION_STOP
        samples, timing = sample(spec, model, tokenizer, prompts, stop)
        out["timing"].update(timing)
        del model
        completions = [[s.completion for s in ss] for ss in samples]
        finish = [[s.finish_reason for s in ss] for ss in samples]
        programs = [[mbpp_mod.program_from_completion(t, c, prompts_style) for c in cs]
                    for t, cs in zip(tasks, completions)]
    out["settings"].update(prompt_style=prompts_style, timeout_s=timeout, tasks=len(tasks))

    jobs, owner = [], []
    for i, (task, progs) in enumerate(zip(tasks, programs)):
        for j, program in enumerate(progs):
            if not program.strip():
                continue
            if spec.benchmark == "mbpp":
                jobs.append(mbpp_mod.mbpp_job(task, program, timeout))
            else:
                n_inputs = len(task.base_input) + len(task.plus_input)
                jobs.append(mbpp_mod.mbppplus_job(task, program, max(timeout, MBPPPLUS_SECONDS_PER_INPUT * n_inputs)))
            owner.append((i, j))
    limits = Limits(memory_mb=MBPPPLUS_MEMORY_MB) if spec.benchmark == "mbppplus" else Limits()
    start = time.perf_counter()
    with SandboxPool(max_workers=spec.workers, limits=limits) as pool:
        results = pool.run(jobs, progress=True)
    out["timing"]["judge_s"] = round(time.perf_counter() - start, 2)
    out["timing"]["programs_judged"] = len(jobs)

    judged = {key: mbpp_mod.verdict_record(spec.benchmark, tasks[key[0]], r) for key, r in zip(owner, results)}
    no_code = {"verdict": "fail", "outcome": "no_code", "error": "no code in the response", "n_passed": 0,
               "n_tests": 0, "duration_s": 0.0}
    if spec.benchmark == "mbppplus":
        no_code.update(base_verdict="fail", plus_verdict="fail")
    tasks_out = []
    for i, task in enumerate(tasks):
        samples = []
        for j, program in enumerate(programs[i]):
            rec = dict(judged.get((i, j), no_code))
            if finish[i][j] == PROMPT_TOO_LONG:
                rec.update(outcome=PROMPT_TOO_LONG, error="the prompt does not fit the model's context")
            samples.append({"completion": completions[i][j], "program": program, "finish_reason": finish[i][j], **rec})
        n_correct = sum(s["verdict"] == "pass" for s in samples)
        first = samples[0]
        entry = {"task_id": task.task_id, "prompt": prompts[i], "completion": first["completion"],
                 "program": first["program"], "verdict": first["verdict"], "outcome": first["outcome"],
                 "error": first["error"], "n": len(samples), "n_correct": n_correct,
                 "pass@1": pass_at_k(len(samples), n_correct, 1), "samples": samples}
        if spec.benchmark == "mbppplus":
            entry["base_verdict"] = first["base_verdict"]
        tasks_out.append(entry)
    out["tasks"] = tasks_out
    out["scores"] = _scores_code(spec.benchmark, tasks_out, spec.n)
    out["outcomes"] = _count(s["outcome"] for t in tasks_out for s in t["samples"])
    return out


def _int_if_whole(x: float):
    """Breakdown cells are counts; keep them integers unless n > 1 made them fractional."""
    x = round(float(x), 2)
    return int(x) if x.is_integer() else x


def _count(values) -> dict:
    counts: dict = {}
    for v in values:
        counts[v] = counts.get(v, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: -kv[1]))


# ------------------------------------------------------------------ robotics / RoboEval

ROBO_TABLE_LABELS = {"python_error": "Python error", "robot_error": "robot-execution error",
                     "task_failure": "task failure", "success": "success"}


def _robo_bodies(spec, prompts: list[str], out: dict) -> list[list[str]]:
    import densecode_robosim as robosim

    model, tokenizer, model_name = load_model(spec)
    out["model"] = model_name
    samples, timing = sample(spec, model, tokenizer, prompts, list(robosim.STOP_STRINGS))
    out["timing"].update(timing)
    return [[s.completion for s in ss] for ss in samples]


def evaluate_robotics(spec, out: dict) -> dict:
    """densecode's held-out robotics split, judged on every world of each task."""
    import densecode_robosim as robosim

    from densecode.eval.roboeval import table_class
    from densecode.simulators.robosim import evaluate as evaluate_programs
    from densecode.simulators.robosim import summarize

    if spec.split not in ("test", "validation", "train"):
        raise DensecodeError(f"--split {spec.split}: the robotics suite has test, validation and train splits")
    split = spec.split
    n_tasks = spec.tasks or spec.limit or 200
    tasks = robosim.generate_tasks(split=split, n=n_tasks, seed=spec.task_seed)
    timeout = spec.timeout or 1.0
    out["settings"].update(split=split, tasks=len(tasks), task_seed=spec.task_seed, timeout_s=timeout)
    prompts = [t.prompt for t in tasks]
    if spec.canonical:
        bodies = [[t.reference] for t in tasks]
        out["model"] = "reference programs"
    else:
        bodies = _robo_bodies(spec, prompts, out)
    flat_programs = [robosim.tasks.program_from_body(b) for bs in bodies for b in bs]
    flat_tasks = [t for t, bs in zip(tasks, bodies) for _ in bs]
    start = time.perf_counter()
    outcomes = evaluate_programs(flat_programs, flat_tasks, mode="concrete", timeout_s=timeout)
    out["timing"]["judge_s"] = round(time.perf_counter() - start, 2)
    tasks_out, k = [], 0
    for task, bs in zip(tasks, bodies):
        samples = []
        for body in bs:
            o = outcomes[k]
            k += 1
            samples.append({"completion": body, "program": robosim.tasks.program_from_body(body),
                            "verdict": "pass" if o.success else "fail", "outcome": o.outcome,
                            "error": _robo_error(o.error),
                            "table_class": table_class(o.outcome, timeout_class="task_failure")})
        n_correct = sum(s["verdict"] == "pass" for s in samples)
        tasks_out.append({"task_id": task.task_id, "family": task.family, "prompt": task.prompt,
                          "completion": samples[0]["completion"], "verdict": samples[0]["verdict"],
                          "outcome": samples[0]["outcome"], "error": samples[0]["error"], "n": len(samples),
                          "n_correct": n_correct, "pass@1": pass_at_k(len(samples), n_correct, 1),
                          "samples": samples})
    all_samples = [s for t in tasks_out for s in t["samples"]]
    summary = summarize(outcomes)
    out["tasks"] = tasks_out
    from densecode.eval.passk import ks_for

    counts = [t["n"] for t in tasks_out]
    correct = [t["n_correct"] for t in tasks_out]
    out["scores"] = {f"success pass@{k}": round(mean_pass_at_k(counts, correct, k), 4) for k in ks_for(spec.n)}
    out["scores"].update({"parses": round(summary["parses"], 4), "no Python error": round(summary["no_python_error"], 4),
                          "no robot error": round(summary["no_robot_error"], 4), "tasks": len(tasks_out)})
    out["outcomes"] = _count(s["outcome"] for s in all_samples)
    # Per task, the paper's columns averaged over samples (sums to the number of tasks).
    out["breakdown"] = {label: _int_if_whole(sum(sum(s["table_class"] == cls for s in t["samples"]) / t["n"]
                                                 for t in tasks_out))
                        for cls, label in ROBO_TABLE_LABELS.items()}
    out["breakdown_total"] = len(tasks_out)
    return out


def _robo_error(error: dict | None) -> str | None:
    if not error:
        return None
    kind = error.get("kind", "")
    what = error.get("type") or error.get("call") or ""
    line = f" (line {error['line']})" if error.get("line") else ""
    return f"{kind} {what}: {error.get('message', '')}{line}".strip()[:500]


def evaluate_roboeval_benchmark(spec, out: dict) -> dict:
    """The user's RoboEval copy: 80 prompts, per-prompt pass@1 and the paper's error breakdown."""
    if spec.data is None:
        raise DensecodeError(
            "RoboEval is not downloaded by densecode (its licence forbids training on it): pass --data with your own "
            "CodeBotler checkout (its root, benchmark/ or benchmark/tasks)"
        )
    if spec.canonical:
        raise DensecodeError("--canonical: RoboEval ships no reference programs; evaluate a model instead")
    from densecode.eval.roboeval import (
        evaluate_roboeval,
        load_roboeval,
        resolve_style,
        roboeval_prompts,
    )

    suite = load_roboeval(spec.data, semantics=spec.roboeval_semantics, subset=spec.roboeval_subset)
    style, prefix = resolve_style(spec.prompt_style, suite.prompt_prefix_path, spec.data)
    entries = roboeval_prompts(suite, style, prefix)
    if spec.limit is not None:
        entries = entries[: spec.limit]
    bodies = _robo_bodies(spec, [e["prompt"] for e in entries], out)
    timeout = spec.timeout or 1.0
    out["settings"].update(tasks=len({e["task"] for e in entries}), prompts=len(entries), timeout_s=timeout,
                           roboeval_semantics=suite.semantics, prompt_style=style,
                           prompt_file=str(suite.prompt_prefix_path) if style == "codebotler" else None,
                           tasks_dir=str(suite.tasks_dir), subset=spec.roboeval_subset,
                           skipped_files=[f"{path}: {why}" for path, why in suite.skipped])
    start = time.perf_counter()
    report = evaluate_roboeval(suite, {e["key"]: bs for e, bs in zip(entries, bodies)}, timeout_s=timeout,
                               progress=True)
    out["timing"]["judge_s"] = round(time.perf_counter() - start, 2)
    by_key = {p["key"]: p for p in report["per_prompt"]}
    tasks_out = []
    for entry, bs in zip(entries, bodies):
        p = by_key[entry["key"]]
        samples = [{"completion": b, "verdict": "pass" if s["outcome"] == "success" else "fail",
                    "outcome": s["outcome"], "error": _robo_error(s["error"]), "states": s["states"]}
                   for b, s in zip(bs, p["samples"])]
        n_correct = sum(s["verdict"] == "pass" for s in samples)
        tasks_out.append({"task_id": entry["key"], "task": entry["task"], "prompt": entry["prompt"],
                          "completion": samples[0]["completion"],
                          "verdict": samples[0]["verdict"], "outcome": samples[0]["outcome"],
                          "error": samples[0]["error"], "n": len(samples), "n_correct": n_correct,
                          "pass@1": p["pass@1"], "samples": samples})
    out["tasks"] = tasks_out
    out["scores"] = {"pass@1": round(report["pass@1"], 4), "successes": _int_if_whole(report["successes"]),
                     "prompts": report["n_prompts"], "tasks": report["n_tasks"]}
    out["outcomes"] = report["outcomes"]
    out["breakdown"] = {label: _int_if_whole(report["breakdown"][cls]) for cls, label in ROBO_TABLE_LABELS.items()}
    out["breakdown_total"] = report["n_prompts"]
    return out


# ------------------------------------------------------------------ any domain


def domain_config(spec):
    """The config a domain eval uses: --config, else the shipped <domain>.yaml if there is one, then --set."""
    from densecode.config import load_config, resolve_config_path

    name = spec.domain or spec.benchmark
    path = spec.config
    overrides = list(spec.overrides)
    if path is None:
        candidate = resolve_config_path(name)
        path = candidate if Path(candidate).is_file() else None
    if name is not None:
        overrides.insert(0, f"domain={name}")
    if spec.prompt_style in ("chat", "completion"):  # --prompt-style overrides tasks.prompt_style
        overrides.append(f"tasks.prompt_style={spec.prompt_style}")
    return load_config(path, overrides)


def evaluate_domain(spec, out: dict) -> dict:
    """A domain's held-out split (its `tasks`), judged by its own `score` (sandbox, simulator, ...)."""
    from densecode.domains import build_domain
    from densecode.eval.passk import ks_for

    cfg = domain_config(spec)
    if spec.grammar_code_prefix is None:
        spec.grammar_code_prefix = cfg.generation.grammar_code_prefix
    domain = build_domain(cfg)
    domain.prepare()
    split = spec.split if spec.split in ("test", "validation", "train") else domain.options.eval_split
    n_tasks = spec.tasks or spec.limit or cfg.train.eval_tasks
    # --canonical judges the reference answers, which are completion-style responses: its tasks stay unstyled.
    tasks = domain.tasks(split, n_tasks, spec.task_seed)
    model = tokenizer = None
    if not spec.canonical:
        model, tokenizer, model_name = load_model(spec)
        domain.use_tokenizer(tokenizer, spec.model)
        tasks = domain.style_tasks(tasks)
    out["benchmark"] = domain.name
    out["settings"].update(domain=domain.name, split=split, tasks=len(tasks), task_seed=spec.task_seed,
                           prompt_style="canonical" if spec.canonical else domain.prompt_style)
    if spec.canonical:
        answers = [domain.canonical_response(t) for t in tasks]
        if any(a is None for a in answers):
            raise DensecodeError(f"domain {domain.name!r}: {sum(a is None for a in answers)} of {len(tasks)} tasks "
                                 "have no canonical answer (a `reference`), so --canonical cannot judge them")
        responses = [[a] for a in answers]
        out["model"] = "canonical answers"
    else:
        out["model"] = model_name
        stop = domain.stop_strings(cfg.generation.stop)
        samples, timing = sample(spec, model, tokenizer, [t["prompt"] for t in tasks], stop)
        out["timing"].update(timing)
        responses = [[s.completion for s in ss] for ss in samples]
    flat_tasks = [t for t, rs in zip(tasks, responses) for _ in rs]
    start = time.perf_counter()
    records = domain.score(flat_tasks, [r for rs in responses for r in rs])
    out["timing"]["judge_s"] = round(time.perf_counter() - start, 2)
    tasks_out, k = [], 0
    for i, (task, rs) in enumerate(zip(tasks, responses)):
        samples_out = []
        for r in rs:
            rec = records[k]
            k += 1
            samples_out.append({"completion": r, "verdict": "pass" if rec.get("outcome") == "success" else "fail",
                                "outcome": rec.get("outcome"), "score": rec.get("score"),
                                "error": rec.get("error") if isinstance(rec.get("error"), str) else None})
        n_correct = sum(s["verdict"] == "pass" for s in samples_out)
        tasks_out.append({"task_id": task.get("task_id", i), "prompt": task["prompt"],
                          "completion": samples_out[0]["completion"], "verdict": samples_out[0]["verdict"],
                          "outcome": samples_out[0]["outcome"], "error": samples_out[0]["error"],
                          "n": len(samples_out), "n_correct": n_correct,
                          "pass@1": pass_at_k(len(samples_out), n_correct, 1), "samples": samples_out})
    out["tasks"] = tasks_out
    counts = [t["n"] for t in tasks_out]
    correct = [t["n_correct"] for t in tasks_out]
    out["scores"] = {f"success pass@{k}": round(mean_pass_at_k(counts, correct, k), 4) for k in ks_for(spec.n)}
    out["scores"].update({key: round(v, 4) for key, v in domain.metrics(records).items()})
    out["outcomes"] = _count(str(r.get("outcome")) for r in records)
    return out


def evaluate(spec: EvalSpec) -> dict:
    """Run the evaluation `spec` describes; return the results dict (not yet written)."""
    spec = spec.resolved()
    out = {
        "benchmark": spec.benchmark,
        "model": spec.model,
        "created": datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "command": "densecode eval " + " ".join(shlex.quote(a) for a in spec.argv),
        "settings": {"data": spec.data, "split": spec.split, "n": spec.n, "temperature": spec.temperature,
                     "max_new_tokens": spec.max_new_tokens, "few_shot": spec.few_shot, "limit": spec.limit,
                     "canonical": spec.canonical, "grammar": spec.grammar, "seed": spec.seed},
        "timing": {},
    }
    start = time.perf_counter()
    if spec.benchmark in ("mbpp", "mbppplus"):
        evaluate_code(spec, out)
    elif spec.benchmark == "robotics" and spec.domain is None and spec.config is None and spec.prompt_style != "chat":
        # The fixed completion-prompt suite (RoboEval's table); chat prompts go through the robotics domain below.
        evaluate_robotics(spec, out)
    elif spec.benchmark == "roboeval":
        evaluate_roboeval_benchmark(spec, out)
    else:
        evaluate_domain(spec, out)
    out["timing"]["total_s"] = round(time.perf_counter() - start, 2)
    return out




def run(spec: EvalSpec) -> tuple[dict, dict]:
    """Evaluate and write the run folder (spec.out_dir): (results, {"results"|"report"|"chart": path})."""
    results = evaluate(spec)  # resolves and checks the spec
    return results, write_run(spec.out_dir, results)
