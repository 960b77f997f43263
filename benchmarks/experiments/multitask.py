"""ASTOR vs joint vs curriculum vs model merging vs the best single-task specialist, plus ASTOR's ablations.

Every arm is a `densecode train --domain multi` run (its own folder, its own seed) on the same tasks, model and
budget; the held-out score of a task is its domain's headline metric (codegen pass_rate, codeio accuracy, testgen
coverage, commitmsg rouge_l, robotics success_rate) from the run's last eval, and the average is their mean.

    python -m benchmarks.experiments.multitask --seeds 0 1 2 --parallel 2                  # the full benchmark (hours)
    python -m benchmarks.experiments.multitask --recipe gae --seeds 0 1 2 --parallel 2     # the published GAE one
    python -m benchmarks.experiments.multitask --quick                                     # pipeline check: ~minutes on CPU
    python -m benchmarks.experiments.multitask --eval-split validation --arms specialists --steps 300 --eval-every 50
    python -m benchmarks.experiments.multitask --tasks codeio,robotics --steps 20 --arms astor joint --seeds 0

Arms (`--arms`, default all):
    astor               tasks.schedule=astor (utility quotas, prompt priority, adaptive per-task KL)
    joint               tasks.schedule=joint (uniform mix)
    curriculum          tasks.schedule=curriculum (tasks in order, equal steps)
    no_task_quotas      astor with tasks.astor.task_quotas=false      (ablation: no task allocation)
    no_prompt_priority  astor with tasks.astor.prompt_priority=false  (ablation: uniform prompts within a task)
    no_adaptive_kl      astor with tasks.astor.adaptive_kl=false      (ablation: beta_k = beta_base,k)
    shared_beta         astor with tasks.astor.shared_beta=true       (ablation: one beta for every task)
    specialists         one single-task run per task (tasks.tasks=[k]); rows: "best specialist" (per task the best
                        specialist's score on it, every specialist evaluated on every task) and "merging" (the
                        specialists' task vectors averaged: python -m densecode.domains.multi.merge, then evaluated)

Recipes (`--recipe`, every arm and specialist alike): `outcome` (default) is the single-task recipe of
configs/robotics.yaml and codegen.yaml - PPO's critic-free outcome credit, 4 responses per prompt, only
above-baseline responses reinforced, lr 3e-5, top_p 1.0, the update on signal rows only, no KL term (every task's
beta_base 0 unless --set tasks.kl_beta=... names one; with all of them 0 ASTOR's adaptive KL has nothing to scale,
so the two KL ablations, identical to astor then, are left out of the default arms); `gae` is the recipe the
published benchmark ran on (a critic's GAE over the dense token rewards, one response per prompt, each task's KL
weight its beta_base). Each recipe has its own default --workdir, --archive and --out.

Same total samples per arm: a multi-task arm trains --steps steps of --batch-size prompts; each of the K specialists
trains --steps steps of --batch-size/K prompts (the K of them together: the same prompts and samples; merging reuses
them). Samples per prompt: algo.ppo.samples_per_prompt (PPO: 4 with the outcome recipe, 1 with gae) or
algo.grpo.group_size (GRPO) in every arm.

Resumable: an arm whose run has its last eval is reused; a run that stopped early continues with --resume; finished
evals (merged model, specialists on every task) are reused. Runs go seed by seed, each seed's specialists evaluated
as soon as they are trained; every finished run's result files (no weights) and every eval are archived under
--archive, kept with the project, and restored from there on another machine, so the benchmark can be finished over
several sessions. Results go to --out: multitask.json (every run's
numbers), multitask.md (the table, also printed) and multitask.png (per-task held-out score per arm, and the
average; mean +- sd over seeds). Records for benchmarks/run_all.py (RESULTS.md) go to $DENSECODE_BENCH_JSON or --json.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.common import ROOT

DEFAULT_TASKS = "codegen,codeio,testgen,commitmsg,robotics"
QUICK_TASKS = "codeio,commitmsg"
MULTI_ARMS: dict[str, list[str]] = {
    "astor": ["tasks.schedule=astor"],
    "joint": ["tasks.schedule=joint"],
    "curriculum": ["tasks.schedule=curriculum"],
    "no_task_quotas": ["tasks.schedule=astor", "tasks.astor.task_quotas=false"],
    "no_prompt_priority": ["tasks.schedule=astor", "tasks.astor.prompt_priority=false"],
    "no_adaptive_kl": ["tasks.schedule=astor", "tasks.astor.adaptive_kl=false"],
    "shared_beta": ["tasks.schedule=astor", "tasks.astor.shared_beta=true"],
}
ARMS = (*MULTI_ARMS, "specialists")
ROWS = ("base", *MULTI_ARMS, "best_specialist", "merging")  # table rows (base: the model before training)
LABELS = {"base": "base model (step 0)", "best_specialist": "best specialist per task",
          "merging": "merging (specialists' task vectors averaged)"}

# The config every run starts from (written to <workdir>/base.yaml); --set changes it for every run.
GAE_BASE = {
    "domain": "multi",
    "model": {"name_or_path": "densecode-tiny", "dtype": "float32", "value_model": "separate"},
    "lora": {"enabled": False},
    # One rollout call samples every task: no shared stop strings (codeio/commitmsg stop at a newline, code does
    # not); evals use each domain's own stops. Responses end at EOS or max_new_tokens in training.
    "generation": {"max_new_tokens": 128, "temperature": 1.0, "top_p": 0.95, "grammar": "off", "stop": [],
                   "batch_size": 32},
    "reward": {"mode": "dense", "code_regions": "auto"},
    "algo": {"name": "ppo", "num_minibatches": 2, "max_grad_norm": 1.0,
             "ppo": {"epochs": 1, "gamma": 1.0, "lam": 0.95, "clip_eps": 0.2, "value_clip": 0.3, "vf_coef": 1.0,
                     "whiten_advantages": True, "vf_lr": 5.0e-4, "adaptive_kl": False},
             "grpo": {"group_size": 4}},
    "train": {"lr": 2.0e-5, "log_every": 1, "num_threads": 1},
}
# The single-task recipe (configs/robotics.yaml, configs/codegen.yaml) on the GAE base's model, generation and evals.
OUTCOME_BASE = {
    **GAE_BASE,
    "generation": {**GAE_BASE["generation"], "top_p": 1.0},
    "algo": {"name": "ppo", "num_minibatches": 4, "max_grad_norm": 1.0, "skip_zero_advantage_rows": True,
             "ppo": {"credit": "outcome", "samples_per_prompt": 4, "negative_scale": 0.0, "epochs": 1, "gamma": 1.0,
                     "lam": 0.95, "clip_eps": 0.2, "value_clip": 0.3, "vf_coef": 1.0, "whiten_advantages": True,
                     "vf_lr": 5.0e-4, "adaptive_kl": False},
             "grpo": {"group_size": 4}},
    "train": {**GAE_BASE["train"], "lr": 3.0e-5},
    # Each task's responses end at its own stop strings, as in its single-task run and its evals (a codeio answer at
    # its newline, not at --max-new-tokens with the rest trained on the outcome's advantage).
    "tasks": {"task_stops": True},
}
RECIPES = {"outcome": OUTCOME_BASE, "gae": GAE_BASE}
KL_ARMS = ("no_adaptive_kl", "shared_beta")  # arms that differ from astor only through beta_base
QUICK = {"steps": 2, "batch_size": 4, "eval_tasks": 2, "seeds": [0], "max_new_tokens": 16, "save_every": 1,
         "extra": ["tasks.astor.synergy_every=1", "tasks.astor.pool_size=8", "generation.batch_size=8"]}


# ------------------------------------------------------------------ plan


@dataclass
class Run:
    """One `densecode train` run: an arm (or one task's specialist) at one seed."""

    arm: str  # a MULTI_ARMS key, or "specialist:<task>"
    seed: int
    tasks: list[str]
    batch_size: int
    sets: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.arm.replace(':', '-')}-seed{self.seed}"


def plan_runs(args) -> list[Run]:
    runs = []
    for seed in args.seeds:
        for arm in args.arms:
            if arm == "specialists":
                k = len(args.tasks)
                runs += [Run(f"specialist:{t}", seed, [t], max(1, args.batch_size // k), ["tasks.schedule=joint"])
                         for t in args.tasks]
            else:
                runs.append(Run(arm, seed, list(args.tasks), args.batch_size, list(MULTI_ARMS[arm])))
    return runs


PER_TASK = ("options", "reward_weights", "task_weights", "kl_beta")  # tasks.<key>: task -> value mappings
PASSES = {"scores": False, "sampled_scores": True}  # result key -> from the sampled eval pass


def split_per_task_sets(args) -> None:
    """Resolve the user's per-task mappings (tasks.options.<task>, tasks.kl_beta.<task>, ...) once, so each run gets
    only its own tasks' entries (a specialist's config may not name the other tasks)."""
    from densecode.domains import load_config  # `tasks:` typed by the domain

    cfg = load_config(args.base_config, ["domain=multi", f"tasks.tasks=[{','.join(args.tasks)}]", *args.sets])
    args.per_task = {k: dict(getattr(cfg.tasks, k)) for k in PER_TASK}
    prefixes = tuple(f"tasks.{k}" for k in PER_TASK)
    args.sets = [s for s in args.sets if not s.split("=", 1)[0].strip().startswith(prefixes)]


def choose_kl_and_arms(args) -> None:
    """The outcome recipe has no KL term, as the single-task recipes: beta_base 0 for every task the user gave none.
    With every beta_base 0 the KL ablations are astor itself, so the default arms leave them out."""
    if args.recipe == "outcome":
        args.per_task["kl_beta"] = {t: float(args.per_task["kl_beta"].get(t, 0.0)) for t in args.tasks}
    no_beta = not any(args.per_task["kl_beta"].get(t, 1.0) for t in args.tasks)  # unset: the domain's KL weight
    if args.arms is None:
        args.arms = [a for a in ARMS if not (no_beta and a in KL_ARMS)]


def add_sampled_evals(args) -> None:
    """Every task's held-out eval also samples at the training temperature (fixed seed; `sampled_*` metrics):
    PPO trains the sampling distribution, and on the embedded model greedy decoding does not follow it
    (docs/results.md). A task whose options already set eval_sampled_temperature keeps the user's value."""
    import dataclasses

    from densecode.config import load_config
    from densecode.domains.registry import get_domain_class

    cfg = load_config(args.base_config, ["domain=multi", f"tasks.tasks=[{','.join(args.tasks)}]", *args.sets])
    options = args.per_task["options"]
    for t in args.tasks:
        if any(f.name == "eval_sampled_temperature" for f in dataclasses.fields(get_domain_class(t).Options)):
            options[t] = {"eval_sampled_temperature": float(cfg.generation.temperature), **(options.get(t) or {})}
        if args.eval_split is not None:  # --eval-split: every task's held-out split (validation: tuning the budget)
            options[t] = {**(options.get(t) or {}), "eval_split": args.eval_split}


def overrides(run: Run, args) -> list[str]:
    """The --set list of a run: the benchmark's budget, the algorithm's defaults here, the arm's switches, the
    user's --set (its per-task mappings cut to the run's tasks)."""
    sets = [f"tasks.tasks=[{','.join(run.tasks)}]", f"train.seed={run.seed}", f"train.batch_size={run.batch_size}",
            f"train.eval_tasks={args.eval_tasks}", f"train.eval_every={args.eval_every or args.steps}",
            f"train.save_every={args.save_every}", f"generation.max_new_tokens={args.max_new_tokens}", *args.extra]
    if args.algo == "grpo":
        # GRPO: beta_k acts in the loss (tasks.kl_beta, algo.grpo.beta), not in the reward; group advantages on each
        # task's verifiable outcome (the default sequence_reward=outcome: execution accuracy, coverage, text
        # similarity, pass rate, robot success). The user's --set can change both.
        sets += ["reward.weights.kl=0"]
    sets += [*run.sets, *args.sets]
    for key, mapping in args.per_task.items():
        mine = {t: v for t, v in mapping.items() if t in run.tasks}
        if mine:
            sets.append(f"tasks.{key}={json.dumps(mine)}")
    return sets


def train_argv(run: Run, args, run_dir: Path, resume: bool) -> list[str]:
    argv = ["train", "--config", str(args.base_config), "--domain", "multi", "--model", args.model, "--algo",
            args.algo, "--output-dir", str(run_dir), "--no-progress", "--steps", str(args.steps)]
    for s in overrides(run, args):
        argv += ["--set", s]
    return argv + (["--resume", str(run_dir)] if resume else [])


# ------------------------------------------------------------------ reading runs


def eval_records(run_dir: Path) -> dict[int, dict]:
    """Eval records by step (a resumed run's later record for a step wins)."""
    path = run_dir / "metrics.jsonl"
    out: dict[int, dict] = {}
    if path.is_file():
        for line in path.read_text().splitlines():
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:  # a line cut by a kill
                continue
            if rec.get("kind") == "eval":
                out[int(rec["step"])] = rec
    return out


def finished(run_dir: Path, steps: int) -> bool:
    """Its last eval is logged and its weights are kept, or it was restored from an archive (results only)."""
    from densecode.eval.run_archive import archived_step

    if steps not in eval_records(run_dir):
        return False
    return (run_dir / "checkpoints" / "latest").is_file() or (archived_step(run_dir) or -1) >= steps


# ------------------------------------------------------------------ archive (runs outliving the machine)


def eval_json_names(run: Run) -> list[str]:
    """The benchmark's own eval outputs a specialist run needs once its weights are gone."""
    return [f"{run.name}.eval-all-tasks.json", f"merged-seed{run.seed}.eval.json"]


def archive_finished(run: Run, args, run_dir: Path) -> None:
    if args.archive is not None:
        from densecode.eval.run_archive import pack

        pack(run_dir, args.archive, args.steps)


def archive_eval(path: Path, args) -> None:
    if args.archive is not None:
        args.archive.mkdir(parents=True, exist_ok=True)
        tmp = args.archive / f".tmp-{path.name}"
        tmp.write_bytes(path.read_bytes())
        os.replace(tmp, args.archive / path.name)


def restore_archived(runs: list[Run], args, workdir: Path) -> int:
    """Runs finished on an earlier machine come back from --archive (their result files) instead of training again.
    A specialist comes back only with its evals on every task and its seed's merged-model eval archived too: those
    need its weights, which an archive does not keep. Returns how many runs were restored."""
    from densecode.eval.run_archive import archive_path, restore

    if args.archive is None or not args.archive.is_dir():
        return 0
    for src in args.archive.glob("*.json"):
        if not (workdir / src.name).is_file():
            (workdir / src.name).write_bytes(src.read_bytes())
    restored = 0
    for run in runs:
        d, src = workdir / run.name, archive_path(args.archive, run.name)
        if not src.is_file() or finished(d, args.steps):
            continue
        if run.arm.startswith("specialist:") and not all((workdir / n).is_file() for n in eval_json_names(run)):
            continue
        restore(src, d)
        restored += 1
    return restored


def headline(task: str, metrics: dict, prefix: str = "eval/", sampled: bool = False) -> float | None:
    """A task's held-out score from eval metrics: its domain's headline metric (the multi domain's rule), from the
    greedy pass or (sampled=True) the pass at the training temperature, None when that pass did not run."""
    from densecode.domains.registry import get_domain_class

    cls = get_domain_class(task)
    for key in (cls.headline_metric, "success_rate", "score"):
        name = f"{prefix}{task}/{'sampled_' if sampled else ''}{key}"
        if name in metrics:
            return float(metrics[name])
    if sampled:
        return None
    raise SystemExit(f"no held-out score for task {task} in {sorted(metrics)[:8]}...: did the eval run?")


# ------------------------------------------------------------------ running


def comparable(cfg: dict, saved: bool = False) -> dict:
    """A run's config as check_same_settings compares it (in place): without what may differ for the same run."""
    cfg.get("train", {}).pop("steps", None)  # more steps continue a run
    cfg.get("train", {}).pop("output_dir", None)  # a run restored from the archive was trained elsewhere
    tasks = cfg.get("tasks") or {}
    astor = tasks.get("astor") if isinstance(tasks.get("astor"), dict) else {}
    if saved:
        # Runs saved before tasks.astor.potential_signal existed took the utilities' variances of sequence rewards.
        astor.setdefault("potential_signal", "reward")
    if tasks.get("schedule") != "astor":
        # The signal feeds only the utilities, which only the astor schedule acts on (joint, curriculum and the
        # specialists log them): such a run is the same run whatever its value.
        astor.pop("potential_signal", None)
    return cfg


def check_same_settings(run: Run, args, run_dir: Path) -> None:
    """A run folder made with other settings (another --batch-size, --set, model...) is not reused silently."""
    import yaml

    from densecode.config import to_dict
    from densecode.domains import load_config  # typed `tasks:`, as the run's config.yaml has them

    saved = run_dir / "config.yaml"
    if not saved.is_file():
        return
    want = to_dict(load_config(args.base_config, ["domain=multi", *overrides(run, args),
                                                  f"model.name_or_path={args.model}", f"algo.name={args.algo}",
                                                  f"train.output_dir={run_dir}", f"train.steps={args.steps}"]))
    want, have = comparable(want), comparable(yaml.safe_load(saved.read_text()), saved=True)
    if want != have:
        diff = sorted(f"{sec}.{k}" for sec in set(want) | set(have) if isinstance(want.get(sec), dict)
                      for k in set(want[sec]) | set(have.get(sec) or {})
                      if want[sec].get(k) != (have.get(sec) or {}).get(k))
        raise SystemExit(f"{run_dir} was trained with other settings ({', '.join(diff) or 'config'} differ): "
                         "use another --workdir (and --archive), or the same arguments as before")


def run_training(runs: list[Run], args, workdir: Path, bar) -> None:
    """Every unfinished run: in this process one at a time (--in-process) or `--parallel` subprocesses."""
    todo = []
    for run in runs:
        d = workdir / run.name
        check_same_settings(run, args, d)
        if finished(d, args.steps):
            bar.update(1)
            continue
        from densecode.training import holds_a_run

        todo.append((run, d, holds_a_run(d)))
    if args.in_process:
        from densecode.cli import main as cli_main

        for run, d, resume in todo:
            bar.set_postfix_str(run.name)
            rc = cli_main(train_argv(run, args, d, resume))
            if rc != 0 or not finished(d, args.steps):
                raise SystemExit(f"training run {run.name} failed (exit {rc}); rerun to resume it")
            archive_finished(run, args, d)
            bar.update(1)
        return
    env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"), TOKENIZERS_PARALLELISM="false")
    running: list[tuple[subprocess.Popen, Run, Path]] = []
    failed = []
    while todo or running:
        while todo and len(running) < max(1, args.parallel):
            run, d, resume = todo.pop(0)
            cmd = [sys.executable, "-m", "densecode.cli", *train_argv(run, args, d, resume)]
            d.parent.mkdir(parents=True, exist_ok=True)
            with open(workdir / f"{run.name}.log", "a") as log:  # the child keeps its own copy of the handle
                log.write("$ " + " ".join(shlex.quote(c) for c in cmd) + "\n")
                log.flush()
                proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
            running.append((proc, run, d))
            bar.set_postfix_str(", ".join(r.name for _, r, _ in running))
        time.sleep(0.5)
        for item in list(running):
            proc, run, d = item
            if proc.poll() is None:
                continue
            running.remove(item)
            bar.update(1)
            if proc.returncode != 0 or not finished(d, args.steps):
                failed.append(run.name)
                bar.write(f"training run {run.name} failed (exit {proc.returncode}); log: {workdir / run.name}.log")
            else:
                archive_finished(run, args, d)
    if failed:
        raise SystemExit(f"{len(failed)} run(s) failed: {', '.join(failed)}; rerun the same command to resume them")


def final_model(run_dir: Path) -> Path:
    from densecode.rl.trainer import resolve_checkpoint

    return resolve_checkpoint(run_dir) / "model"


def evaluate_model(model_dir: Path, run: Run, args, out_json: Path) -> dict:
    """Held-out metrics of a model on all the benchmark's tasks, by the trainer's own eval (MultiDomain.evaluate,
    the same tasks, n and seed as the training runs' evals). Reused when out_json exists."""
    if out_json.is_file():
        return json.loads(out_json.read_text())
    import torch
    from accelerate.utils import set_seed

    from densecode.config import load_config
    from densecode.domains import build_domain
    from densecode.models import load_model_and_tokenizer

    cfg = load_config(args.base_config, ["domain=multi", *overrides(run, args), f"model.name_or_path={model_dir}"])
    torch.set_num_threads(max(1, cfg.train.num_threads))
    set_seed(cfg.train.seed)
    domain = build_domain(cfg)
    domain.prepare()
    model, tokenizer = load_model_and_tokenizer(cfg.model, None, for_training=False)
    model.eval()
    metrics = {f"eval/{k}": float(v) for k, v in domain.evaluate(model, tokenizer, n=cfg.train.eval_tasks,
                                                                 seed=cfg.train.seed).items()}
    tmp = out_json.with_name(f".tmp-{out_json.name}")
    tmp.write_text(json.dumps(metrics, indent=1))
    os.replace(tmp, out_json)
    return metrics


def evaluate_seed(seed: int, args, workdir: Path, bar) -> None:
    """This seed's specialists, each on every task, and their merged model: evals cached as JSON in the workdir
    (and archived), so the specialists' weights are needed only until then."""
    tasks = args.tasks
    for t in tasks:
        run = Run(f"specialist:{t}", seed, [t], 1)
        out_json = workdir / f"{run.name}.eval-all-tasks.json"
        if not out_json.is_file():
            bar.set_postfix_str(f"eval {run.name} on every task")
            evaluate_model(final_model(workdir / run.name), Run("eval", seed, tasks, args.batch_size), args, out_json)
        archive_eval(out_json, args)
        bar.update(1)
    out_json = workdir / f"merged-seed{seed}.eval.json"
    if not out_json.is_file():
        bar.set_postfix_str(f"merge + eval seed {seed}")
        evaluate_model(merge_specialists(seed, args, workdir), Run("eval", seed, tasks, args.batch_size), args,
                       out_json)
    archive_eval(out_json, args)
    bar.update(1)


def merge_specialists(seed: int, args, workdir: Path) -> Path:
    """python -m densecode.domains.multi.merge over this seed's specialists (reused when done)."""
    out = workdir / f"merged-seed{seed}"
    if (out / "config.json").is_file():
        return out
    from densecode.domains.multi.merge import main as merge_main

    specs = [str(final_model(workdir / Run(f"specialist:{t}", seed, [t], 1).name)) for t in args.tasks]
    tmp = workdir / f".tmp-merged-seed{seed}"
    if merge_main([*specs, "--base", args.model, "--out", str(tmp)]) != 0:
        raise SystemExit(f"merging the specialists of seed {seed} failed")
    os.replace(tmp, out)
    return out


# ------------------------------------------------------------------ results


def collect(args, workdir: Path) -> dict:
    """Per row, per seed: {task: score, ..., "average": mean}; plus each run's own eval metrics."""
    tasks = args.tasks
    # PASSES: "scores" from the greedy evals, "sampled_scores" from the evals at the training temperature.
    tables: dict[str, dict[str, dict[int, dict[str, float]]]] = {key: {row: {} for row in ROWS} for key in PASSES}

    def row_of(metrics: dict, sampled: bool) -> dict[str, float] | None:
        per = {t: headline(t, metrics, sampled=sampled) for t in tasks}
        if any(v is None for v in per.values()):
            return None
        return {**per, "average": statistics.fmean(per.values())}

    def put(row: str, seed: int, metrics: dict) -> None:
        for key, sampled in PASSES.items():
            values = row_of(metrics, sampled)
            if values is not None:
                tables[key][row][seed] = values

    runs_out: dict[str, dict] = {}
    for seed in args.seeds:
        for arm in (a for a in args.arms if a in MULTI_ARMS):
            d = workdir / Run(arm, seed, tasks, 1).name
            evals = eval_records(d)
            put(arm, seed, evals[args.steps])
            runs_out[d.name] = {"first": evals[min(evals)], "last": evals[args.steps]}
            if seed not in tables["scores"]["base"] and min(evals) == 0:
                put("base", seed, evals[0])  # every arm's step-0 eval is the same model
        if "specialists" not in args.arms:
            continue
        cross = {}
        for t in tasks:
            run = Run(f"specialist:{t}", seed, [t], 1)
            d = workdir / run.name
            evals = eval_records(d)
            runs_out[d.name] = {"first": evals[min(evals)], "last": evals[args.steps]}
            cross[t] = json.loads((workdir / f"{run.name}.eval-all-tasks.json").read_text())
        for key, sampled in PASSES.items():
            per = {s: {t: headline(t, cross[s], sampled=sampled) for t in tasks} for s in tasks}
            if all(v is not None for row in per.values() for v in row.values()):
                # Per pass: per task the best specialist on that pass.
                best = {t: max(per[s][t] for s in tasks) for t in tasks}
                tables[key]["best_specialist"][seed] = {**best, "average": statistics.fmean(best.values())}
        runs_out[f"best_specialist-seed{seed}"] = {
            # on a tie the task's own specialist
            "which": {t: max(tasks, key=lambda s: (headline(t, cross[s]), s == t)) for t in tasks},
            "cross": {s: {t: headline(t, cross[s]) for t in tasks} for s in tasks}}
        put("merging", seed, json.loads((workdir / f"merged-seed{seed}.eval.json").read_text()))
    return {**{key: {r: v for r, v in table.items() if v} for key, table in tables.items()}, "runs": runs_out}


def learning(args, workdir: Path) -> list[dict]:
    """Does each trained run learn its own tasks? Per run (multi-task arm or specialist), task and eval pass (greedy,
    sampled), at every eval step after 0: the held-out score against the run's step-0 score on the same tasks, with
    the paired 95% interval over tasks (one seed: the task part of the noise). Read from eval_tasks.jsonl."""
    from densecode.rl.report import eval_task_rows, paired_interval

    out = []
    for seed in args.seeds:
        runs = [Run(a, seed, list(args.tasks), 1) for a in args.arms if a in MULTI_ARMS]
        if "specialists" in args.arms:
            runs += [Run(f"specialist:{t}", seed, [t], 1) for t in args.tasks]
        for run in runs:
            rows = eval_task_rows(workdir / run.name)
            for (step, name), after in sorted(rows.items()):
                before = rows.get((0, name))
                if step == 0 or before is None or len(before) != len(after) or not after:
                    continue
                task, _, decoding = name.rpartition("/")
                mean, lo, hi = paired_interval(before, after)
                out.append({"run": run.name, "arm": run.arm, "seed": seed, "task": task or run.tasks[0],
                            "pass": decoding, "step": step, "before": statistics.fmean(before),
                            "after": statistics.fmean(after), "change": mean, "lo": lo, "hi": hi, "n": len(after)})
    return out


def render_learning(rows: list[dict]) -> str:
    lines = ["| run | task | pass | step | step 0 | score | change [95% interval over tasks] | tasks |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        flag = " **above 0**" if r["lo"] > 0 else " below 0" if r["hi"] < 0 else ""
        lines.append(f"| {r['run']} | {r['task']} | {r['pass']} | {r['step']} | {r['before']:.3f} | {r['after']:.3f} "
                     f"| {r['change']:+.3f} [{r['lo']:+.3f}, {r['hi']:+.3f}]{flag} | {r['n']} |")
    return "\n".join(lines)


SCHEDULE_KEYS = ("quota", "potential", "potential_norm", "synergy", "utility", "beta")


def schedule_summary(args, workdir: Path, arm: str = "astor") -> dict[str, dict[str, float]]:
    """What the arm's scheduler did, per task: each logged `multi/<task>/<key>` averaged over the training steps of
    every seed's run (quota: share of the batch; potential: P_k in the signal's own units; potential_norm: P_k / max_j
    P_j; synergy S_k; utility U_k; beta: beta_k)."""
    sums: dict[str, dict[str, list[float]]] = {t: {k: [] for k in SCHEDULE_KEYS} for t in args.tasks}
    for seed in args.seeds:
        path = workdir / Run(arm, seed, args.tasks, 1).name / "metrics.jsonl"
        if not path.is_file():
            continue
        for row in map(json.loads, path.read_text().splitlines()):
            if row.get("kind") != "train":
                continue
            for t in args.tasks:
                for k in SCHEDULE_KEYS:
                    if f"multi/{t}/{k}" in row:
                        sums[t][k].append(float(row[f"multi/{t}/{k}"]))
    return {t: {k: statistics.fmean(v) for k, v in per.items() if v} for t, per in sums.items() if any(per.values())}


def render_schedule(summary: dict[str, dict[str, float]]) -> str:
    lines = [f"| task | {' | '.join(SCHEDULE_KEYS)} |", "|---" * (len(SCHEDULE_KEYS) + 1) + "|"]
    for t, per in summary.items():
        lines.append(f"| {t} | " + " | ".join(f"{per[k]:.4g}" if k in per else "-" for k in SCHEDULE_KEYS) + " |")
    return "\n".join(lines)


def mean_sd(xs: list[float]) -> tuple[float, float]:
    return statistics.fmean(xs), (statistics.stdev(xs) if len(xs) > 1 else 0.0)


def fmt(xs: list[float]) -> str:
    m, s = mean_sd(xs)
    return f"{m:.3f}" if len(xs) == 1 else f"{m:.3f} ± {s:.3f}"


def samples_per_arm(args, spp: int) -> dict[str, int]:
    multi = args.steps * args.batch_size * spp
    spec = len(args.tasks) * args.steps * max(1, args.batch_size // len(args.tasks)) * spp
    out = {r: multi for r in MULTI_ARMS}
    out.update(base=0, best_specialist=spec, merging=spec)
    return out


# Student t 0.975 quantiles by degrees of freedom (no scipy dependency); beyond 10 the df=10 value, a slightly
# conservative interval.
T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228}


def paired_differences(result: dict, key: str = "scores") -> dict[str, dict]:
    """ASTOR's average minus each other row's, seed by seed (seed s of every arm trains from the same seed and is
    evaluated on the same held-out tasks): the mean difference and its 95% t interval over seeds. The interval is
    training noise only: every arm sees the same held-out tasks, so it does not cover another held-out set."""
    table = result.get(key, {})
    astor = table.get("astor", {})
    out = {}
    for row, per_seed in table.items():
        seeds = [s for s in astor if s in per_seed]
        if row == "astor" or not seeds:
            continue
        diffs = [astor[s]["average"] - per_seed[s]["average"] for s in seeds]
        m, sd = mean_sd(diffs)
        half = T975[min(len(diffs) - 1, 10)] * sd / len(diffs) ** 0.5 if len(diffs) > 1 else float("nan")
        out[row] = {"mean": m, "lo": m - half, "hi": m + half, "per_seed": dict(zip(seeds, diffs))}
    return out


def render_differences(diffs: dict[str, dict]) -> str:
    lines = ["| ASTOR − row (average) | mean | 95% interval over seeds | per seed |", "|---|---|---|---|"]
    for row, d in diffs.items():
        interval = "n/a (1 seed)" if math.isnan(d["lo"]) else f"[{d['lo']:+.3f}, {d['hi']:+.3f}]"
        per = ", ".join(f"{v:+.3f}" for v in d["per_seed"].values())
        lines.append(f"| {LABELS.get(row, row)} | {d['mean']:+.3f} | {interval} | {per} |")
    return "\n".join(lines)


def render_table(result: dict, args, key: str = "scores") -> str:
    cols = [*args.tasks, "average"]
    lines = [f"| arm | {' | '.join(cols)} | seeds | training samples |", "|---" * (len(cols) + 3) + "|"]
    for row, per_seed in result.get(key, {}).items():
        cells = [fmt([per_seed[s][c] for s in per_seed]) for c in cols]
        lines.append(f"| {LABELS.get(row, row)} | {' | '.join(cells)} | {len(per_seed)} | "
                     f"{result['samples'][row]:,} |")
    return "\n".join(lines)


def write_plot(result: dict, args, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    passes = (("scores", "greedy"), ("sampled_scores", "sampled at the training temperature"))
    panels = [(key, title) for key, title in passes if result.get(key)]
    cols = [*args.tasks, "average"]
    n_rows = max(len(result[key]) for key, _ in panels)
    fig, axes = plt.subplots(len(panels), 1, squeeze=False,
                             figsize=(max(8, 1.6 * len(cols) * max(1, n_rows / 5)), 4.4 * len(panels)))
    x = np.arange(len(cols))
    for ax, (key, title) in zip(axes[:, 0], panels):
        rows = list(result[key])
        width = 0.8 / len(rows)
        top = 0.0
        for i, row in enumerate(rows):
            per_seed = result[key][row]
            stats = [mean_sd([per_seed[s][c] for s in per_seed]) for c in cols]
            ax.bar(x + (i - (len(rows) - 1) / 2) * width, [m for m, _ in stats], width,
                   yerr=[s for _, s in stats] if len(per_seed) > 1 else None, capsize=2, label=LABELS.get(row, row))
            top = max([top, *(m + s for m, s in stats)])
        ax.set_ylim(0, max(0.05, 1.25 * top))  # scores are in [0, 1]; room for the legend
        ax.set_xticks(x, cols)
        ax.set_ylabel(f"held-out score, {title.split()[0]}")
        ax.set_title(f"{result['title']}\n{title}; mean ± sd over seeds {args.seeds}", fontsize=9)
        ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def emit_records(result: dict, args, command: str) -> None:
    from densecode.eval.bench_records import emit, figure

    shown = args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out
    budget = "quick budget, pipeline check" if args.quick else f"{args.steps} steps"
    recs = []
    for key, label in (("scores", "greedy"), ("sampled_scores", "sampled")):
        avg = {row: mean_sd([v["average"] for v in per_seed.values()])[0]
               for row, per_seed in result.get(key, {}).items()}
        if "astor" not in avg:
            continue
        for other in ("joint", "best_specialist"):
            if other in avg:
                recs.append(figure(f"multitask held-out average score ({label}), ASTOR vs {other.replace('_', ' ')} "
                                   f"({','.join(args.tasks)}; {budget})", avg["astor"], "score",
                                   baseline=LABELS.get(other, other), baseline_value=avg[other],
                                   note=f"seeds {args.seeds}, {args.model}; table: {shown}/multitask.md"))
    emit(recs, args.json)


def main(argv: list[str] | None = None) -> int:
    from densecode.errors import DensecodeError

    try:
        return _main(argv)
    except DensecodeError as exc:  # a bad --set, task or model: one line, exit 2 (finished runs stay reusable)
        print(f"multitask benchmark: error: {exc}", file=sys.stderr)
        return 2


def _main(argv: list[str] | None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--tasks", default=None, help=f"comma-separated domains (default {DEFAULT_TASKS}; --quick: "
                                                  f"{QUICK_TASKS})")
    p.add_argument("--arms", nargs="+", default=None, choices=ARMS, metavar="ARM",
                   help=f"arms to run (default all: {' '.join(ARMS)}; the outcome recipe without a beta_base: all "
                        f"but {' '.join(KL_ARMS)})")
    p.add_argument("--recipe", choices=tuple(RECIPES), default="outcome",
                   help="outcome: the single-task defaults' recipe (default); gae: the published benchmark's")
    p.add_argument("--seeds", type=int, nargs="+", default=None, help="default 0 1 2 (--quick: 0)")
    p.add_argument("--model", default="densecode-tiny", help="base model of every arm (default: the embedded model)")
    p.add_argument("--algo", choices=("ppo", "grpo"), default="ppo")
    p.add_argument("--steps", type=int, default=None, help="training steps per run (default 60; --quick: 2)")
    p.add_argument("--batch-size", type=int, default=None,
                   help="prompts per step of a multi-task arm (default 20; --quick: 4); a specialist gets 1/K")
    p.add_argument("--eval-tasks", type=int, default=None, help="held-out tasks per task (default 64; --quick: 2)")
    p.add_argument("--eval-split", choices=("validation", "test"), default=None,
                   help="every task's held-out split (default: each domain's own, test); validation is for choosing "
                        "the budget, with its own default workdir, archive and output folder")
    p.add_argument("--eval-every", type=int, default=None,
                   help="held-out evals every N steps (default: at step 0 and the last step only); with "
                        "--eval-split validation the learning table shows each run's gain at every eval: the budget")
    p.add_argument("--max-new-tokens", type=int, default=None, help="default 128 (--quick: 16)")
    p.add_argument("--save-every", type=int, default=None, help="checkpoint interval (default 10; --quick: 1)")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                   help="config override for every run (e.g. tasks.kl_beta={codegen: 0.1})")
    p.add_argument("--workdir", default=None, help="run folders (default runs/multitask_bench[_quick])")
    p.add_argument("--archive", default=None,
                   help="each finished run's result files and the benchmark's evals are archived here and restored "
                        "from here on another machine (default benchmarks/results/runs/multitask; --quick: none); "
                        "'none': off")
    p.add_argument("--out", default=None, help="where multitask.{json,md,png} go (default benchmarks/results/"
                                               "multitask; --quick: the workdir)")
    p.add_argument("--parallel", type=int, default=1, help="training runs at once (each uses about one core)")
    p.add_argument("--in-process", action="store_true",
                   help="run each training in this process (one at a time; same code path as the CLI)")
    p.add_argument("--quick", action="store_true", help="tiny budget: 2 steps, 2 tasks, 1 seed (pipeline check)")
    p.add_argument("--json", default=os.environ.get("DENSECODE_BENCH_JSON"), help="run_all records file")
    args = p.parse_args(argv)
    command = "python -m benchmarks.experiments.multitask " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))

    q = args.quick
    args.tasks = [t.strip() for t in (args.tasks or (QUICK_TASKS if q else DEFAULT_TASKS)).split(",") if t.strip()]
    args.seeds = args.seeds if args.seeds is not None else (QUICK["seeds"] if q else [0, 1, 2])
    args.steps = args.steps or (QUICK["steps"] if q else 60)
    args.batch_size = args.batch_size or (QUICK["batch_size"] if q else 20)
    args.eval_tasks = args.eval_tasks or (QUICK["eval_tasks"] if q else 64)
    args.max_new_tokens = args.max_new_tokens or (QUICK["max_new_tokens"] if q else 128)
    args.save_every = args.save_every if args.save_every is not None else (QUICK["save_every"] if q else 10)
    args.extra = list(QUICK["extra"]) if q else []
    if len(args.tasks) < 2 or len(set(args.tasks)) != len(args.tasks):
        p.error(f"--tasks: name at least two different tasks (got {args.tasks})")
    if args.batch_size < len(args.tasks):
        p.error(f"--batch-size {args.batch_size} < {len(args.tasks)} tasks: every task needs a prompt per step")
    suffix = "" if args.recipe == "gae" else f"-{args.recipe}"  # the published (GAE) benchmark keeps its paths
    suffix += f"-{args.eval_split}" if args.eval_split == "validation" else ""
    workdir = Path(args.workdir or ROOT / ("runs/multitask_bench_quick" + suffix.replace("-", "_") if q
                                           else "runs/multitask_bench" + suffix.replace("-", "_"))).resolve()
    args.out = Path(args.out or (workdir if q else ROOT / f"benchmarks/results/multitask{suffix}")).resolve()
    if args.archive is None and not q:
        args.archive = str(ROOT / f"benchmarks/results/runs/multitask{suffix}")
    args.archive = None if args.archive in (None, "none") else Path(args.archive).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)
    import yaml

    from densecode.domains.registry import get_domain_class

    for t in args.tasks:
        get_domain_class(t)  # an unknown task fails here, before any training
    base = json.loads(json.dumps(RECIPES[args.recipe]))
    args.base_config = workdir / "base.yaml"
    args.base_config.write_text(yaml.safe_dump(base, sort_keys=False))
    split_per_task_sets(args)
    add_sampled_evals(args)
    choose_kl_and_arms(args)

    from tqdm.auto import tqdm

    runs = plan_runs(args)
    n_evals = (len(args.tasks) + 1) * len(args.seeds) if "specialists" in args.arms else 0
    bar = tqdm(total=len(runs) + n_evals, desc="multitask benchmark", unit="job", dynamic_ncols=True)
    t0 = time.perf_counter()
    try:
        restored = restore_archived(runs, args, workdir)
        if restored:
            bar.write(f"{restored} finished run(s) restored from {args.archive}")
        # Seed by seed: a seed's specialists are evaluated (and their evals archived) as soon as it is trained, so a
        # machine that goes away loses at most one seed's unevaluated specialists.
        for seed in args.seeds:
            run_training([r for r in runs if r.seed == seed], args, workdir, bar)
            if "specialists" in args.arms:
                evaluate_seed(seed, args, workdir, bar)
        result = collect(args, workdir)
    finally:
        bar.close()
    from densecode.config import load_config

    cfg = load_config(args.base_config, ["domain=multi", f"algo.name={args.algo}", *args.sets])
    spp = cfg.algo.grpo.group_size if args.algo == "grpo" else cfg.algo.ppo.samples_per_prompt
    result.update(samples=samples_per_arm(args, spp), command=command, seeds=args.seeds, tasks=args.tasks,
                  model=args.model, algo=args.algo, steps=args.steps, batch_size=args.batch_size,
                  eval_tasks=args.eval_tasks, quick=q, wall_s=round(time.perf_counter() - t0, 1),
                  title=f"multitask ({args.algo}, {args.model}, {args.steps} steps x {args.batch_size} prompts, "
                        f"{args.eval_tasks} held-out tasks per task)")
    result["differences"] = {key: paired_differences(result, key) for key in PASSES if result.get(key)}
    result["astor_schedule"] = schedule_summary(args, workdir) if "astor" in args.arms else {}
    result["learning"] = learning(args, workdir)
    table = render_table(result, args)
    sampled_table = render_table(result, args, "sampled_scores") if result.get("sampled_scores") else ""
    (args.out / "multitask.json").write_text(json.dumps(result, indent=1))
    md = [f"# {result['title']}", "", f"`{command}`", "",
          ("Held-out score per task (its domain's headline metric, greedy), mean ± sd over seeds "
           f"{args.seeds}; average = mean over tasks."), "", table, ""]
    if sampled_table:
        md += [("The same evals sampled at the training temperature (fixed sampling seed, the same draws for "
                "every arm):"), "", sampled_table, ""]
        table += "\n\nsampled at the training temperature:\n" + sampled_table
    for key, title in (("scores", "greedy"), ("sampled_scores", "sampled at the training temperature")):
        if result["differences"].get(key):
            diff_table = render_differences(result["differences"][key])
            md += [(f"Paired differences, {title}: ASTOR's average minus each row's, seed by seed; 95% t interval "
                    "over seeds (training noise; every arm is evaluated on the same held-out tasks):"), "",
                   diff_table, ""]
            table += f"\n\nASTOR minus each row, {title}:\n" + diff_table
    if result["astor_schedule"]:
        schedule_table = render_schedule(result["astor_schedule"])
        md += [("ASTOR's scheduler, per task, averaged over its training steps and seeds (potential in the units of "
                "`tasks.astor.potential_signal`):"), "", schedule_table, ""]
        table += "\n\nASTOR's scheduler (means over steps and seeds):\n" + schedule_table
    if result["learning"]:
        md += [("Does each run learn its own tasks? Held-out score at each eval against the run's step 0 on the same "
                "tasks, paired 95% interval over tasks (one seed each):"), "", render_learning(result["learning"]), ""]
    (args.out / "multitask.md").write_text("\n".join(md))
    write_plot(result, args, args.out / "multitask.png")
    emit_records(result, args, command)
    print(table)
    print(f"\nwrote {args.out / 'multitask.md'}, multitask.json, multitask.png (runs in {workdir})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
