"""The multi-task reward: each sample is scored by its own task's assembler; the RewardBatches are merged.

Routing is by `sample.task["_domain"]` (set by the multi domain's train_batch). Each task's assembler carries its
own KL weight, so the `kl` component applies each sample's own beta_k; `set_task_betas` changes them (ASTOR's
adaptive KL), `set_weight("kl", v)` (the trainer's KL controller) scales them all by v / the initial reference.
"""

from __future__ import annotations

import numpy as np

from densecode.errors import DensecodeError
from densecode.rewards.assembler import RewardBatch, component_metrics
from densecode.rewards.base import ComponentOutput

# Info put on a sample's output of a component its task does not have (the trainer's stats skip these rows).
_ABSENT_INFO = {"absent": 1.0, "kl_missing": 1.0, "has_tests": 0.0}


class MultiTaskReward:
    def __init__(self, assemblers: dict, task_weights: dict[str, float], base_betas: dict[str, float]):
        self.assemblers = dict(assemblers)
        self.task_weights = {t: float(task_weights.get(t, 1.0)) for t in assemblers}
        self.base_betas = {t: float(b) for t, b in base_betas.items()}
        self.task_betas = dict(self.base_betas)
        # What the trainer reads as "the" KL weight (reference model on/off, controller start value).
        self.kl_reference = max(self.base_betas.values(), default=0.0)
        self.kl_scale = 1.0

    @property
    def weights(self) -> dict[str, float]:
        return {"kl": self.kl_reference * self.kl_scale}

    def set_weight(self, name: str, weight: float) -> None:
        if name != "kl":
            raise DensecodeError(f"the multi-task reward sets only 'kl' globally; set tasks.reward_weights.<task>.{name}")
        self.kl_scale = float(weight) / self.kl_reference if self.kl_reference > 0 else 1.0
        self._apply_betas()

    def set_task_betas(self, betas: dict[str, float]) -> None:
        self.task_betas.update({t: float(b) for t, b in betas.items()})
        self._apply_betas()

    def _apply_betas(self) -> None:
        for task, asm in self.assemblers.items():
            if "kl" in asm.components and self.base_betas.get(task, 0.0) > 0:
                asm.set_weight("kl", max(0.0, self.task_betas[task] * self.kl_scale))

    def __call__(self, samples) -> RewardBatch:
        groups: dict[str, list[int]] = {}
        for i, s in enumerate(samples):
            task = (s.task or {}).get("_domain")
            if task not in self.assemblers:
                raise DensecodeError(f"multi-task reward: sample {i} has task {task!r}; this run's tasks are "
                                     f"{', '.join(self.assemblers)} (task['_domain'] routes a sample)")
            groups.setdefault(task, []).append(i)
        n = len(samples)
        total: list = [None] * n
        components: dict[str, list] = {}
        raw: dict[str, list] = {}
        outputs: dict[str, list] = {}
        stats: dict[str, float] = {}
        for task, rows in groups.items():
            sub = self.assemblers[task]([samples[i] for i in rows])
            scale = self.task_weights[task]
            for j, i in enumerate(rows):
                total[i] = (sub.total[j] * np.float32(scale)).astype(np.float32)
            for name in sub.components:
                components.setdefault(name, [None] * n)
                raw.setdefault(name, [None] * n)
                outputs.setdefault(name, [None] * n)
                for j, i in enumerate(rows):
                    components[name][i] = sub.components[name][j] * np.float32(scale)
                    raw[name][i] = sub.raw[name][j]
                    outputs[name][i] = sub.outputs[name][j]
            for k, v in sub.stats.items():
                key = f"reward/{task}/{k[len('reward/'):]}" if k.startswith("reward/") else f"{k}/{task}"
                stats[key] = float(v)
            stats[f"reward/{task}/sequence_mean"] = float(np.mean([total[i].sum() for i in rows]))
            stats[f"reward/{task}/n_samples"] = float(len(rows))
        for name, per_sample in components.items():
            for i, s in enumerate(samples):
                if per_sample[i] is None:
                    zero = np.zeros(s.n_tokens, dtype=np.float32)
                    per_sample[i], raw[name][i] = zero, zero.copy()
                    outputs[name][i] = ComponentOutput(zero.copy(), [], dict(_ABSENT_INFO))
        n_tok = sum(s.n_tokens for s in samples)
        stats["reward/total/sum_mean"] = float(np.mean([t.sum() for t in total])) if total else 0.0
        stats["reward/total/token_mean"] = float(sum(t.sum() for t in total) / max(n_tok, 1))
        weights = {f"{t}/{k}": w for t, a in self.assemblers.items() for k, w in a.weights.items()}
        # Each component's metrics over the whole batch (a sample of a task without it: an empty output).
        judges = {name: c for a in reversed(list(self.assemblers.values())) for name, c in a.components.items()}
        return RewardBatch(total, components, raw, outputs, stats, weights, "dense",
                           component_metrics(judges, outputs))
