"""ASTOR's data scheduler: task utilities -> task quotas -> prompts within a task; the adaptive per-task KL.

Pure bookkeeping on numbers (no model, no domain): the multi domain feeds it each step's per-sample signal
(`astor.potential_signal`: verifiable outcomes, or sequence rewards) per (task, prompt) and, every `synergy_every`
steps, the synergy values its gradient probe measured. All state is JSON-able (`state_dict`) so a resumed run
schedules exactly as an uninterrupted one.

Equations (docs/multitask.md):
    P_k   <- ema * P_k + (1 - ema) * V_k                                        (learning potential)
             V_k = mean within-group variance (G > 1) | variance of the task's last W rewards (PPO)
    S_k   =  cos(g_k, mean_{j != k} g_j)                                        (synergy, last probe)
    U_k   =  w_p * P_k / max_j P_j + w_s * S_k
    q_k   =  floor + (1 - K * floor) * softmax(U / temperature)_k                (task quota)
    u_i   =  Var_i + max(progress_i, 0);  unseen: max(unseen_prior, max_seen u)  (prompt utility)
    beta_k = beta_base,k * max(0, 1 + lambda * U_k)                             (adaptive KL)
             shared_beta: mean_k beta_base,k * max(0, 1 + lambda * mean_k U_k) for every task
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from densecode.domains.multi.options import POTENTIAL_SIGNALS, AstorOptions
from densecode.errors import DensecodeError

EPS = 1e-6


def _mix(*parts: int) -> int:
    """A deterministic 31-bit seed from integers (the trainer's scheme)."""
    h = 0x9E3779B9
    for p in parts:
        h = (h * 1_000_003 + int(p) + 0x7F4A7C15) & 0x7FFFFFFF
    return h


@dataclass
class PromptStats:
    visits: int = 0
    mean: float = 0.0  # mean sequence reward of the last visit
    var: float = 0.0  # within-visit variance (several samples) or the variance across visits (one sample each)
    progress: float = 0.0  # EMA of the change of the visit mean
    sum_means: float = 0.0  # across-visit moments (one sample per prompt under PPO)
    sum_sq_means: float = 0.0

    def utility(self) -> float:
        return self.var + max(self.progress, 0.0)


class TaskScheduler:
    def __init__(self, tasks: list[str], schedule: str, opts: AstorOptions, seed: int = 0,
                 curriculum_steps: int = 0):
        if opts.floor < 0 or opts.floor * len(tasks) > 1 + 1e-9:
            raise DensecodeError(f"tasks.astor.floor={opts.floor:g}: each of the {len(tasks)} tasks' minimum share; "
                                 f"it must be in [0, 1/{len(tasks)}]")
        if opts.temperature <= 0:
            raise DensecodeError(f"tasks.astor.temperature must be > 0; got {opts.temperature:g}")
        if opts.potential_signal not in POTENTIAL_SIGNALS:
            raise DensecodeError(f"tasks.astor.potential_signal={opts.potential_signal!r}: use one of "
                                 f"{', '.join(POTENTIAL_SIGNALS)}")
        if opts.pool_size < 1:
            raise DensecodeError(f"tasks.astor.pool_size must be >= 1; got {opts.pool_size}")
        self.tasks = list(tasks)
        self.schedule = schedule
        self.opts = opts
        self.seed = int(seed)
        self.curriculum_steps = int(curriculum_steps)
        self.step = 0  # steps observed
        self.potential: dict[str, float | None] = {t: None for t in tasks}
        self.synergy: dict[str, float] = {t: 0.0 for t in tasks}
        self.next_slot: dict[str, int] = {t: opts.pool_size for t in tasks}
        self.pools: dict[str, list[int]] = {t: list(range(opts.pool_size)) for t in tasks}
        self.stats: dict[str, dict[int, PromptStats]] = {t: {} for t in tasks}
        self.recent: dict[str, list[float]] = {t: [] for t in tasks}  # PPO: the task's last rewards

    # ------------------------------------------------------------------ utilities and quotas

    def slot_seed(self, task: str, slot: int) -> int:
        """The generator seed of pool slot `slot` of `task` (slots are never reused: a refresh takes new ones)."""
        return _mix(self.seed, self.tasks.index(task), slot)

    def utilities(self) -> dict[str, dict[str, float]]:
        """Per task: potential (raw), potential_norm, synergy, utility."""
        raw = {t: (p if p is not None else 0.0) for t, p in self.potential.items()}
        top = max(raw.values()) if raw else 0.0
        out = {}
        for t in self.tasks:
            norm = raw[t] / top if top > EPS else 0.0
            u = self.opts.potential_weight * norm + self.opts.synergy_weight * self.synergy[t]
            out[t] = {"potential": raw[t], "potential_norm": norm, "synergy": self.synergy[t], "utility": u}
        return out

    def curriculum_task(self, step: int) -> str:
        per = max(1, self.curriculum_steps)
        return self.tasks[min(step // per, len(self.tasks) - 1)]

    def quotas(self, step: int | None = None) -> dict[str, float]:
        step = self.step if step is None else step
        K = len(self.tasks)
        if self.schedule == "curriculum":
            cur = self.curriculum_task(step)
            return {t: float(t == cur) for t in self.tasks}
        if self.schedule == "joint" or not self.opts.task_quotas:
            return {t: 1.0 / K for t in self.tasks}
        u = np.array([self.utilities()[t]["utility"] for t in self.tasks]) / self.opts.temperature
        soft = np.exp(u - u.max())
        soft /= soft.sum()
        q = self.opts.floor + (1.0 - K * self.opts.floor) * soft
        return {t: float(v) for t, v in zip(self.tasks, q)}

    def allocate(self, n: int, step: int | None = None) -> dict[str, int]:
        """Integer prompts per task summing to n (largest remainder; every task with a quota gets >= 1 if n >= K)."""
        q = self.quotas(step)
        raw = {t: q[t] * n for t in self.tasks}
        counts = {t: math.floor(raw[t]) for t in self.tasks}
        order = sorted(self.tasks, key=lambda t: (-(raw[t] - counts[t]), self.tasks.index(t)))
        for t in order[: n - sum(counts.values())]:
            counts[t] += 1
        live = [t for t in self.tasks if q[t] > 0]
        if n >= len(live):
            for t in live:
                if counts[t] == 0:
                    donor = max(live, key=lambda d: (counts[d], -self.tasks.index(d)))
                    counts[donor] -= 1
                    counts[t] += 1
        return counts

    def betas(self, base: dict[str, float]) -> dict[str, float]:
        """beta_k = beta_base,k * max(0, 1 + lambda * U_k) (astor with adaptive_kl), else beta_base,k.
        shared_beta: every task gets the mean base (times max(0, 1 + lambda * mean_k U_k) when adaptive)."""
        base = {t: float(base[t]) for t in self.tasks}
        adaptive = self.schedule == "astor" and self.opts.adaptive_kl
        util = {t: u["utility"] for t, u in self.utilities().items()} if adaptive else {t: 0.0 for t in self.tasks}
        if self.opts.shared_beta:
            mean_base, mean_u = float(np.mean(list(base.values()))), float(np.mean(list(util.values())))
            base = {t: mean_base for t in self.tasks}
            util = {t: mean_u for t in self.tasks}
        return {t: base[t] * max(0.0, 1.0 + self.opts.kl_lambda * util[t]) if adaptive else base[t]
                for t in self.tasks}

    # ------------------------------------------------------------------ prompts

    def prompt_utility(self, task: str, slot: int) -> float | None:
        st = self.stats[task].get(slot)
        return None if st is None or st.visits == 0 else st.utility()

    def pick(self, task: str, k: int, rng: np.random.Generator) -> list[int]:
        """k pool slots of `task`: weighted by prompt utility (astor) or uniform; without replacement while the
        pool lasts."""
        pool = self.pools[task]
        if k <= 0:
            return []
        if self.schedule == "astor" and self.opts.prompt_priority:
            seen = [u for s in pool if (u := self.prompt_utility(task, s)) is not None]
            prior = max([self.opts.unseen_prior, *seen])
            w = np.array([(u if (u := self.prompt_utility(task, s)) is not None else prior) + EPS for s in pool])
        else:
            w = np.ones(len(pool))
        p = w / w.sum()
        picks: list[int] = []
        while len(picks) < k:
            m = min(k - len(picks), len(pool))
            picks += [pool[i] for i in rng.choice(len(pool), size=m, replace=False, p=p)]
        return picks

    # ------------------------------------------------------------------ feedback

    def observe(self, rewards: dict[str, dict[int, list[float]]], samples_per_prompt: int) -> None:
        """One step's per-sample signal (outcomes or sequence rewards): task -> slot -> its samples' values."""
        o = self.opts
        for task, per_slot in rewards.items():
            if not per_slot:
                continue
            if samples_per_prompt > 1:
                # Several samples of one prompt: the mean within-group variance (outcome spread for one input).
                pot = float(np.mean([np.var(v) for v in per_slot.values()]))
            else:
                # One sample per prompt (PPO): the spread of the task's last `potential_window` rewards (this step's
                # and earlier ones), so a task that gets one prompt a step still has an estimate.
                window = self.recent[task] + [x for v in per_slot.values() for x in v]
                self.recent[task] = window[-max(2, o.potential_window):]
                pot = float(np.var(self.recent[task])) if len(self.recent[task]) > 1 else None
            if pot is not None:
                prev = self.potential[task]
                self.potential[task] = pot if prev is None else o.utility_ema * prev + (1 - o.utility_ema) * pot
            for slot, vals in per_slot.items():
                st = self.stats[task].setdefault(slot, PromptStats())
                mean = float(np.mean(vals))
                if st.visits:
                    st.progress = o.progress_ema * st.progress + (1 - o.progress_ema) * (mean - st.mean)
                st.visits += 1
                st.sum_means += mean
                st.sum_sq_means += mean * mean
                if len(vals) > 1:
                    st.var = float(np.var(vals))
                elif st.visits > 1:
                    m = st.sum_means / st.visits
                    st.var = max(0.0, st.sum_sq_means / st.visits - m * m)
                st.mean = mean
        self.step += 1

    def set_synergy(self, synergy: dict[str, float]) -> None:
        self.synergy.update({t: float(v) for t, v in synergy.items()})

    def refresh_pools(self) -> None:
        """Replace the pool_refresh most-visited prompts of each task by fresh generator draws."""
        for task in self.tasks:
            n = min(self.opts.pool_refresh, len(self.pools[task]))
            if n <= 0:
                continue
            visits = {s: (self.stats[task][s].visits if s in self.stats[task] else 0) for s in self.pools[task]}
            stale = sorted(self.pools[task], key=lambda s: (-visits[s], s))[:n]
            stale = [s for s in stale if visits[s] > 0]
            for s in stale:
                self.pools[task].remove(s)
                self.stats[task].pop(s, None)
                self.pools[task].append(self.next_slot[task])
                self.next_slot[task] += 1

    # ------------------------------------------------------------------ state

    def state_dict(self) -> dict:
        return {"step": self.step, "potential": dict(self.potential), "synergy": dict(self.synergy),
                "next_slot": dict(self.next_slot), "recent": {t: list(v) for t, v in self.recent.items()}, "pools": {t: list(p) for t, p in self.pools.items()},
                "stats": {t: {str(s): asdict(st) for s, st in d.items()} for t, d in self.stats.items()}}

    def load_state_dict(self, state: dict) -> None:
        if not state:
            return
        if sorted(state.get("pools", {})) != sorted(self.tasks):
            raise DensecodeError(f"the checkpoint's multi-task scheduler has tasks {sorted(state.get('pools', {}))}; "
                                 f"this run has {sorted(self.tasks)} (resume with the run's own tasks.tasks)")
        self.step = int(state["step"])
        self.potential = {t: (None if v is None else float(v)) for t, v in state["potential"].items()}
        self.synergy = {t: float(v) for t, v in state["synergy"].items()}
        self.next_slot = {t: int(v) for t, v in state["next_slot"].items()}
        self.pools = {t: [int(s) for s in p] for t, p in state["pools"].items()}
        self.recent = {t: [float(x) for x in v] for t, v in state.get("recent", {}).items()} or {t: [] for t in self.tasks}
        self.stats = {t: {int(s): PromptStats(**st) for s, st in d.items()} for t, d in state["stats"].items()}
