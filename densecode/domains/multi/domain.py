"""The `multi` domain: several registered domains trained as one model (ASTOR, joint, curriculum, single task).

Each task is a registered domain (robotics, code, codegen, ... or a third party's) built with its own options
(`tasks.options.<task>`). Every sample keeps its task in `task["_domain"]` and its pool slot in
`task["_prompt_slot"]`; the reward routes each sample to its task's assembler (reward.py); evals and metrics are
per task (`eval/<task>/...`) plus `eval/average/score` (the mean of the tasks' headline metrics). The scheduler
(scheduler.py) decides each step's prompts; `on_step_end` (the trainer's generic task-source hook) feeds it the
step's rewards and, every `astor.synergy_every` steps, the gradient-probe synergy; its state is checkpointed.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, ClassVar

import numpy as np
import torch

from densecode.domains.base import Domain
from densecode.domains.multi.options import SCHEDULES, MultiOptions
from densecode.domains.multi.scheduler import TaskScheduler
from densecode.domains.registry import get_domain_class, register_domain
from densecode.errors import ConfigError, DensecodeError


def _headline(domain: Domain, metrics: dict[str, float]) -> float:
    for key in (domain.headline_metric, "success_rate", "score"):
        if key in metrics:
            return float(metrics[key])
    return 0.0


@register_domain
class MultiDomain(Domain):
    name = "multi"
    description = "several domains trained as one model: ASTOR utility scheduling + per-task KL, joint, curriculum"
    Options = MultiOptions
    headline_metric = "average/score"

    def __init__(self, options: Any = None, **kwargs):
        super().__init__(options, **kwargs)
        opts = self.options
        if not opts.tasks:
            raise DensecodeError("tasks.tasks is empty: name the domains to train, e.g. --set tasks.tasks=[robotics,code]")
        if len(set(opts.tasks)) != len(opts.tasks) or "multi" in opts.tasks:
            raise DensecodeError(f"tasks.tasks={opts.tasks}: each domain once, and not 'multi' itself")
        if opts.schedule not in SCHEDULES:
            raise DensecodeError(f"tasks.schedule must be one of {', '.join(SCHEDULES)}; got {opts.schedule!r}")
        for key in ("options", "reward_weights", "task_weights", "kl_beta"):
            extra = sorted(set(getattr(opts, key)) - set(opts.tasks))
            if extra:
                raise DensecodeError(f"tasks.{key} names {extra}, which are not in tasks.tasks={opts.tasks}")
        self.domains: dict[str, Domain] = {t: self._build_task(t) for t in opts.tasks}
        self.scheduler = TaskScheduler(opts.tasks, opts.schedule, opts.astor, seed=int(opts.train_seed),
                                       curriculum_steps=opts.curriculum_steps)
        self.reward: Any = None
        # Where beta_k acts: the reward's kl component (PPO) or the algorithm's KL loss term (GRPO); set when the
        # reward is built. _kl_loss_base: the algorithm's own coefficient, seen at the first kl_loss_coefs call.
        self.kl_in_loss = False
        self._kl_loss_base: float | None = None
        self._items: dict[tuple[str, int], tuple[str, dict]] = {}
        self._pick_s = 0.0

    def _build_task(self, task: str) -> Domain:
        from densecode.config import apply_mapping

        raw = dict(self.options.options.get(task) or {})
        cls = get_domain_class(task, raw, self.base_dir)
        # A task's prompt style is the multi-task run's unless its own options set one.
        raw.setdefault("prompt_style", self.options.prompt_style)
        raw.setdefault("chat_answer_prefix", self.options.chat_answer_prefix)
        sub_opts = cls.Options()
        try:
            apply_mapping(sub_opts, raw, "tasks.options", prefix=f"tasks.options.{task}.")
        except ConfigError as exc:
            raise DensecodeError(str(exc)) from None
        return cls(sub_opts, generation=self.generation, base_dir=self.base_dir, name=task)

    def prepare(self) -> None:
        for d in self.domains.values():
            d.prepare()

    # ------------------------------------------------------------------ prompts

    def use_tokenizer(self, tokenizer: Any, model: str | None = None) -> str:
        """Each task resolves its own prompt style; "chat" when any task is chat (for the stop strings)."""
        styles = {d.use_tokenizer(tokenizer, model) for d in self.domains.values()}
        self.tokenizer = tokenizer
        self.prompt_style = "chat" if "chat" in styles else "completion"
        return self.prompt_style

    def stop_strings(self, configured: list[str] | None = None) -> list[str]:
        if self.prompt_style != "chat":
            return super().stop_strings(configured)
        # One stop list for all tasks: the closing fence when any chat task pre-fills an opened block. A whole-turn
        # answer cut there keeps its code (an unclosed block is read to its end).
        return sorted({s for d in self.domains.values() if d.prompt_style == "chat" for s in d.stop_strings(configured)})

    def prompt_stops(self, tasks: list[dict]) -> list[list[str]] | None:
        """tasks.task_stops: each training prompt's stop strings are its own task's (the trainer's hook)."""
        if not self.options.task_stops:
            return None
        from densecode.rl.settings import SamplingParams

        configured = list(SamplingParams.from_config(self.generation).stop)
        own = {name: d.stop_strings(configured) for name, d in self.domains.items()}
        return [own[t["_domain"]] for t in tasks]

    def style_tasks(self, tasks: list[dict]) -> list[dict]:
        return tasks  # styled by each task's own domain (tasks(), train_batch)

    # ------------------------------------------------------------------ tasks

    def tasks(self, split: str, n: int, seed: int) -> list[dict]:
        """n tasks spread evenly over the tasks (for `densecode eval` and checks), each tagged with its task."""
        K = len(self.domains)
        out = []
        for k, (name, d) in enumerate(self.domains.items()):
            m = n // K + (k < n % K)
            out += [{**t, "_domain": name} for t in d.style_tasks(d.tasks(split, m, seed))]
        return out

    def _pool_item(self, task: str, slot: int) -> tuple[str, dict]:
        key = (task, slot)
        if key not in self._items:
            prompts, tasks = self.domains[task].train_batch(1, self.scheduler.slot_seed(task, slot))
            self._items[key] = (prompts[0], tasks[0])
        return self._items[key]

    def train_batch(self, n: int, seed: int) -> tuple[list[str], list[dict]]:
        t0 = time.perf_counter()
        rng = np.random.default_rng(seed)
        counts = self.scheduler.allocate(n)
        picks = [(t, s) for t in self.scheduler.tasks for s in self.scheduler.pick(t, counts[t], rng)]
        self._pick_s = time.perf_counter() - t0
        prompts, tasks = [], []
        for task, slot in picks:
            prompt, item = self._pool_item(task, slot)
            prompts.append(prompt)
            tasks.append({**item, "_domain": task, "_prompt_slot": slot})
        return prompts, tasks

    # ------------------------------------------------------------------ rewards

    def build_reward_fn(self, cfg: Any, *, components: dict | None = None, sandbox: Any = None):
        from densecode.domains.multi.reward import MultiTaskReward
        from densecode.rewards import build_assembler

        if self.options.schedule == "curriculum" and self.scheduler.curriculum_steps <= 0:
            steps = int(getattr(getattr(cfg, "train", None), "steps", 0) or 0)
            self.scheduler.curriculum_steps = max(1, steps // len(self.domains))
        # GRPO has no KL in the reward (MicroCoder): tasks.kl_beta is then the weight of its k3 loss term, which
        # reaches each sample through the trainer's kl_loss_coefs hook.
        self.kl_in_loss = getattr(getattr(cfg, "algo", None), "name", "ppo") == "grpo"
        assemblers, betas = {}, {}
        for task, d in self.domains.items():
            weights = {k: float(v) for k, v in d.default_weights.items()}
            weights.update({k: float(v) for k, v in (cfg.reward.weights or {}).items()})
            weights.update({k: float(v) for k, v in (self.options.reward_weights.get(task) or {}).items()})
            if task in self.options.kl_beta and not self.kl_in_loss:
                weights["kl"] = float(self.options.kl_beta[task])
            betas[task] = weights.get("kl", 0.0)
            reward_cfg = dataclasses.replace(cfg.reward, weights=weights)
            simulator = d.simulator() if weights.get("sim", 0.0) > 0 else None
            assemblers[task] = build_assembler(reward_cfg, d, simulator=simulator, sandbox=sandbox,
                                               components=components)
        self.reward = MultiTaskReward(assemblers, self.options.task_weights, betas)
        self.reward.set_task_betas(self.scheduler.betas(betas))
        return self.reward

    # ------------------------------------------------------------------ the scheduler's step

    def on_step_end(self, view, batch, stats: dict) -> dict[str, float]:
        t0 = time.perf_counter()
        sched = self.scheduler
        signal = self._utility_signal(batch)
        per: dict[str, dict[int, list[float]]] = {t: {} for t in sched.tasks}
        rows: dict[str, list[int]] = {t: [] for t in sched.tasks}
        for i, task in enumerate(batch.tasks):
            rows[task["_domain"]].append(i)
            if signal[i] is not None:
                per[task["_domain"]].setdefault(int(task["_prompt_slot"]), []).append(float(signal[i]))
        sched.observe(per, view.samples_per_prompt)
        out: dict[str, float] = {}
        every = sched.opts.synergy_every
        if sched.schedule == "astor" and every > 0 and view.step % every == 0:
            t1 = time.perf_counter()
            sched.set_synergy(self._probe_synergy(view, rows))
            out["time/synergy_probe_s"] = time.perf_counter() - t1
        sched.refresh_pools()
        if self.reward is not None:
            self.reward.set_task_betas(sched.betas(self.reward.base_betas))
        quotas = sched.quotas()
        for task, parts in sched.utilities().items():
            out[f"multi/{task}/quota"] = quotas[task]
            out[f"multi/{task}/n_prompts"] = float(len(per[task]))
            for k, v in parts.items():
                out[f"multi/{task}/{k}"] = v
            if self.kl_in_loss and self._kl_loss_base is not None:
                out[f"multi/{task}/beta"] = self.loss_betas(self._kl_loss_base)[task]
            elif self.reward is not None:
                out[f"multi/{task}/beta"] = self.reward.task_betas[task] * self.reward.kl_scale
        out["time/scheduler_s"] = self._pick_s + time.perf_counter() - t0
        return out

    def _utility_signal(self, batch) -> list[float | None]:
        """Each sample's value for the utilities (astor.potential_signal): its verifiable outcome in [0, 1], the
        components' typed verdict as GRPO's `sequence_reward: outcome` reads it, or its sequence reward. None: a
        sample left out of the statistics (no outcome, e.g. a simulator that failed on every run of it)."""
        rewards = batch.sequence_rewards.detach().float().cpu().tolist()
        if self.scheduler.opts.potential_signal == "reward":
            return rewards
        from densecode.rl.grpo import outcome_of, sample_outputs

        values = [outcome_of(outs) for outs in sample_outputs(batch.reward_outputs, len(batch.tasks))]
        judged = {t["_domain"] for t, v in zip(batch.tasks, values) if v is not None}
        never = sorted({t["_domain"] for t in batch.tasks} - judged)
        if never and self.scheduler.schedule != "astor":
            return rewards  # joint / curriculum only log the utilities: no reason to stop the run
        if never:  # not one sample of the task has an outcome: its reward has no component that judges it
            raise DensecodeError(
                f"tasks.astor.potential_signal=outcome: task(s) {', '.join(never)} report no verifiable outcome "
                "(no reward component gives an outcome: ComponentOutput.outcome, e.g. the tests' pass rate); "
                "enable that task's tests/sim component or set tasks.astor.potential_signal=reward")
        return values

    # ------------------------------------------------------------------ per-sample KL in the loss (GRPO)

    def loss_betas(self, base: float) -> dict[str, float]:
        """beta_k of the KL loss term: the scheduler's betas over beta_base,k = tasks.kl_beta.<task> (default:
        the algorithm's own coefficient `base`, algo.grpo.beta)."""
        return self.scheduler.betas(self._loss_bases(base))

    def _loss_bases(self, base: float) -> dict[str, float]:
        # tasks.kl_beta feeds the loss only when it does not already feed the reward (kl_in_loss).
        kl_beta = self.options.kl_beta if self.kl_in_loss else {}
        return {t: float(kl_beta.get(t, base)) for t in self.domains}

    def uses_kl_loss(self, base: float) -> bool:
        """The trainer's hook: can a sample's KL loss weight be > 0 (then it loads the reference model)?"""
        return any(b > 0 for b in self._loss_bases(base).values())

    def kl_loss_coefs(self, tasks: list[dict], base: float) -> list[float]:
        """The trainer's hook: each sample's weight of the algorithm's KL loss term, its own task's beta_k."""
        self._kl_loss_base = float(base)
        betas = self.loss_betas(base)
        return [betas[t["_domain"]] for t in tasks]

    def _probe_synergy(self, view, rows: dict[str, list[int]]) -> dict[str, float]:
        """S_k = cos(g_k, mean of the other tasks' g_j) over the trainable policy parameters, g on up to
        astor.probe_rows rows of each task in this step's batch. Tasks absent from the batch keep their value."""
        m = max(1, self.scheduler.opts.probe_rows)
        present = {t: r for t, r in rows.items() if r}
        if len(present) < 2:
            return {t: 0.0 for t in present}  # no other task to compare with: no gradient needed
        grads = {t: view.policy_gradient(r[:m]) for t, r in present.items()}
        out = {}
        for t, g in grads.items():
            others = torch.stack([h for u, h in grads.items() if u != t]).mean(0)
            denom = float(g.norm() * others.norm())
            out[t] = float(torch.dot(g, others)) / denom if denom > 0 else 0.0
        return out

    def write_report(self, run_dir) -> None:
        from densecode.domains.multi.curves import write_multitask_report

        write_multitask_report(run_dir, list(self.domains), {t: d.headline_metric for t, d in self.domains.items()})

    def state_dict(self) -> dict:
        return {"scheduler": self.scheduler.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.scheduler.load_state_dict((state or {}).get("scheduler") or {})
        if self.reward is not None:
            self.reward.set_task_betas(self.scheduler.betas(self.reward.base_betas))

    # ------------------------------------------------------------------ eval

    def canonical_response(self, task: dict) -> str | None:
        sub = self.domains.get(task.get("_domain"))
        return sub.canonical_response(task) if sub is not None else None

    def score(self, tasks: list[dict], responses: list[str]) -> list[dict]:
        records: list[dict | None] = [None] * len(tasks)
        groups: dict[str, list[int]] = {}
        for i, t in enumerate(tasks):
            groups.setdefault(t.get("_domain"), []).append(i)
        for name, idx in groups.items():
            if name not in self.domains:
                raise DensecodeError(f"multi: task {idx[0]} has _domain={name!r}; tasks are {', '.join(self.domains)}")
            recs = self.domains[name].score([tasks[i] for i in idx], [responses[i] for i in idx])
            for i, r in zip(idx, recs):
                records[i] = {**r, "_domain": name}
        return records  # type: ignore[return-value]

    def metrics(self, records: list[dict]) -> dict[str, float]:
        out: dict[str, float] = {}
        heads = []
        for name, d in self.domains.items():
            mine = [r for r in records if r.get("_domain") == name]
            if not mine:
                continue
            m = d.metrics(mine)
            out.update({f"{name}/{k}": v for k, v in m.items()})
            heads.append(_headline(d, m))
        out["average/score"] = float(np.mean(heads)) if heads else 0.0
        out["n_tasks"] = float(len(records))
        return out

    def evaluate(self, model, tokenizer, *, n: int, seed: int) -> dict[str, float]:
        """Each task's own held-out eval (n tasks each), as eval/<task>/..., and the mean headline metric.

        The per-task outcomes of each task's passes go to `last_eval_rows` as passes "<task>/<pass>" (the trainer
        writes them to eval_tasks.jsonl), so a task's change is paired over its own held-out tasks."""
        out: dict[str, float] = {}
        heads = []
        rows: list[dict] = []
        for name, d in self.domains.items():
            m = d.evaluate(model, tokenizer, n=n, seed=seed)
            out.update({f"{name}/{k}": float(v) for k, v in m.items()})
            heads.append(_headline(d, m))
            rows += [{**r, "pass": f"{name}/{r['pass']}", "task": name} for r in (d.last_eval_rows or [])]
        out["average/score"] = float(np.mean(heads))
        self.last_eval_rows = rows or None
        return out

    sampled_metric_names: ClassVar[tuple[str, ...]] = ()
