"""The assembler: weighted per-token sum of the reward components.

    total_t = sum_c weight_c * values_c[t]        (weights >= 0; kl returns -KL)

Reference weights (the dense-reward paper's; docs/rewards.md) come from `default_weights(domain)`; the config's
`reward.weights` is merged over them (set a weight to 0 to switch a component off).
Only components with a non-zero weight are computed.

`sparse` mode (the dense-vs-sparse ablation): every component except those in
`reward.sparse_keep_dense` (default: kl, which PPO keeps per token in both modes)
is summed over the response and put on the last token, so a sample's sparse total
sums to exactly its dense total. Placement is per component: `sparse_keep_dense`
listing every component but one moves only that one (the credit ablations of
benchmarks/experiments/dense_vs_sparse.py --ablation).

`RewardBatch.components` holds WEIGHTED per-token values (what went into the total);
`RewardBatch.raw` holds the components' own values; `RewardBatch.outputs` their
ComponentOutputs (diagnostics, info, the typed verdict); `RewardBatch.component_metrics`
what each component's `metrics` logs.
"""

from __future__ import annotations

import inspect
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from densecode.errors import DensecodeError
from densecode.rewards.base import (
    REGISTRY,
    ComponentOutput,
    RewardComponent,
    load_class,
)
from densecode.rewards.sample import Sample

# The reference recipes (the dense-reward paper's reference weights; docs/rewards.md), by name; a Domain object carries its own recipe instead.
_DEFAULT_WEIGHTS = {
    "code": {"lint": 0.1, "syntax": 0.1, "dfg": 0.1, "tests": 0.7, "kl": 0.1},
    "robotics": {"lint": 0.1, "syntax": 0.1, "sim": 0.8, "kl": 0.9},
}

# Robot API names: builtins for the lint component in the robotics recipe (no F821 on go_to).
ROBOT_API = ["get_current_location", "get_all_rooms", "is_in_room", "go_to", "ask", "say", "pick", "place"]


def default_weights(domain: Any) -> dict[str, float]:
    """A recipe's weights: a Domain's `default_weights`, or a reference recipe by name ("code", "robotics";
    any other name gets the robotics one)."""
    if not isinstance(domain, str):
        return {k: float(v) for k, v in domain.default_weights.items()}
    return dict(_DEFAULT_WEIGHTS.get(domain, _DEFAULT_WEIGHTS["robotics"]))


def effective_weights(reward_cfg: Any, domain: Any) -> dict[str, float]:
    """The weights an assembler built from this config uses: `reward.weights` over the recipe's defaults."""
    weights = default_weights(domain)
    weights.update({k: float(v) for k, v in (getattr(reward_cfg, "weights", None) or {}).items()})
    return weights


def default_component_options(domain: Any) -> dict[str, dict]:
    if not isinstance(domain, str):
        return domain.component_options()
    if domain == "code":
        return {}
    return {"lint": {"builtins": list(ROBOT_API)}}


def _domain_components(domain: Any) -> dict[str, str]:
    return {} if isinstance(domain, str) else dict(getattr(domain, "components", {}) or {})


@dataclass
class RewardBatch:
    total: list[np.ndarray]  # per sample, one float32 per response token
    components: dict[str, list[np.ndarray]]  # WEIGHTED values per component
    raw: dict[str, list[np.ndarray]]  # unweighted values per component
    outputs: dict[str, list[ComponentOutput]]
    stats: dict[str, float]  # the reward's scalars: reward/<name>/<info key>, totals, timings
    weights: dict[str, float] = field(default_factory=dict)
    mode: str = "dense"
    component_metrics: dict[str, float] = field(default_factory=dict)  # each component's own `metrics`


def component_metrics(components: dict[str, Any], outputs: dict[str, list[ComponentOutput]]) -> dict[str, float]:
    """Every component's `metrics` over its outputs (a component that is no RewardComponent has none)."""
    out: dict[str, float] = {}
    for name, outs in outputs.items():
        comp = components.get(name)
        if isinstance(comp, RewardComponent) and outs:
            out.update(comp.metrics(outs))
    return out


class RewardAssembler:
    def __init__(self, components: dict[str, RewardComponent], weights: dict[str, float], mode: str = "dense",
                 sparse_keep_dense: tuple[str, ...] = ("kl",)) -> None:
        if mode not in ("dense", "sparse"):
            raise DensecodeError(f"reward.mode must be 'dense' or 'sparse'; got {mode!r}")
        self.components = dict(components)
        self.weights: dict[str, float] = {}
        for name, w in weights.items():
            self.set_weight(name, w)
        self.mode = mode
        self.sparse_keep_dense = tuple(sparse_keep_dense)

    def set_weight(self, name: str, weight: float) -> None:
        if name not in self.components:
            raise DensecodeError(f"no reward component {name!r} in this assembler (have: {', '.join(self.components)})")
        if weight < 0:
            raise DensecodeError(f"reward weight for {name!r} must be >= 0 (components return rewards; kl returns -KL); got {weight}")
        self.weights[name] = float(weight)

    def active(self) -> list[str]:
        return [n for n in self.components if self.weights.get(n, 0.0) > 0]

    def __call__(self, samples: list[Sample]) -> RewardBatch:
        outputs: dict[str, list[ComponentOutput]] = {}
        timings: dict[str, float] = {}
        for name in self.active():
            t0 = time.perf_counter()
            outs = self.components[name](samples)
            timings[name] = time.perf_counter() - t0
            if len(outs) != len(samples):
                raise DensecodeError(f"reward component {name!r} returned {len(outs)} outputs for {len(samples)} samples")
            for s, o in zip(samples, outs):
                if len(o.values) != s.n_tokens:
                    raise DensecodeError(f"reward component {name!r} returned {len(o.values)} values for a {s.n_tokens}-token sample")
                o.values = np.asarray(o.values, dtype=np.float32)
            outputs[name] = outs
        raw = {n: [o.values for o in outs] for n, outs in outputs.items()}
        weighted = {n: [self.weights[n] * v for v in vals] for n, vals in raw.items()}
        total = []
        for i, s in enumerate(samples):
            t = np.zeros(s.n_tokens, dtype=np.float32)
            moved = 0.0
            for n, vals in weighted.items():
                if self.mode == "sparse" and n not in self.sparse_keep_dense:
                    moved += float(vals[i].sum(dtype=np.float64))
                else:
                    t += vals[i]
            if s.n_tokens and moved:
                t[-1] += np.float32(moved)
            total.append(t)
        stats = self._stats(samples, outputs, weighted, total, timings)
        return RewardBatch(total, weighted, raw, outputs, stats, dict(self.weights), self.mode,
                           component_metrics(self.components, outputs))

    def _stats(self, samples, outputs, weighted, total, timings) -> dict[str, float]:
        stats: dict[str, float] = {}
        n_tok = sum(s.n_tokens for s in samples)
        for name, outs in outputs.items():
            stats[f"reward/{name}/token_mean"] = float(sum(o.values.sum() for o in outs) / max(n_tok, 1))
            stats[f"reward/{name}/weighted_sum_mean"] = float(np.mean([v.sum() for v in weighted[name]])) if outs else 0.0
            keys = sorted({k for o in outs for k, v in o.info.items() if isinstance(v, (int, float))})
            for k in keys:
                vals = [float(o.info[k]) for o in outs if isinstance(o.info.get(k), (int, float))]
                stats[f"reward/{name}/{k}"] = float(np.mean(vals)) if vals else 0.0
            stats[f"time/reward_{name}_s"] = timings.get(name, 0.0)
        stats["reward/total/sum_mean"] = float(np.mean([t.sum() for t in total])) if total else 0.0
        stats["reward/total/token_mean"] = float(sum(t.sum() for t in total) / max(n_tok, 1))
        return stats


def _construct(name: str, cls: type, options: dict[str, Any], extras: dict[str, Any]) -> RewardComponent:
    params = inspect.signature(cls.__init__).parameters
    accepts_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    for key in options:
        if key not in params and not accepts_any:
            known = ", ".join(p for p in params if p != "self" and p not in extras)
            raise DensecodeError(f"reward.components.{name}: unknown option {key!r} (options: {known})")
    kwargs = dict(options)
    for key, value in extras.items():
        if key in params and key not in kwargs:
            kwargs[key] = value
    try:
        comp = cls(**kwargs)
    except TypeError as exc:
        raise DensecodeError(f"reward.components.{name}: {exc}") from None
    comp.name = name
    return comp


def build_assembler(reward_cfg: Any, domain: Any, *, simulator: Any = None, sandbox: Any = None,
                    components: dict[str, RewardComponent] | None = None,
                    kl_estimator: str | None = None) -> RewardAssembler:
    """Components and weights from the config (`reward_cfg` is a `RewardConfig`) over `domain`'s recipe
    (a densecode.domains.Domain, or a reference recipe's name).

    `components` lets callers inject ready-made component objects (tests, custom code);
    `kl_estimator` (k1 | k3) applies unless
    `reward.components.kl.estimator` is set.
    """
    weights = effective_weights(reward_cfg, domain)
    options = default_component_options(domain)
    for name, opts in (getattr(reward_cfg, "components", None) or {}).items():
        if not isinstance(opts, dict):
            raise DensecodeError(f"reward.components.{name} must be a mapping of options, got {opts!r}")
        options[name] = {**options.get(name, {}), **opts}
    if kl_estimator is not None:
        options["kl"] = {"estimator": kl_estimator, **options.get("kl", {})}
    built: dict[str, RewardComponent] = dict(components or {})
    extras = {"simulator": simulator, "sandbox": sandbox}
    for name in list(weights) + [n for n, o in options.items() if o.get("class")]:
        if name in built:
            continue
        opts = dict(options.get(name, {}))
        path = opts.pop("class", None) or _domain_components(domain).get(name) or REGISTRY.get(name)
        opts.pop("enabled", None)
        if path is None:
            raise DensecodeError(
                f"reward weight names unknown component {name!r}; known: {', '.join(REGISTRY)} "
                f"(or give reward.components.{name}.class: 'package.module:Class')"
            )
        if weights.get(name, 0.0) == 0.0 and name == "sim" and simulator is None:
            continue  # a switched-off simulator component needs no backend
        built[name] = _construct(name, load_class(path), opts, extras)
        weights.setdefault(name, 0.0)
    mode = getattr(reward_cfg, "mode", "dense")
    keep = tuple(getattr(reward_cfg, "sparse_keep_dense", ("kl",)))
    # A misspelt name would silently move that component to the last token too.
    known = set(built) | set(REGISTRY) | set(_domain_components(domain)) | set(weights)
    unknown = [n for n in keep if n not in known]
    if unknown:
        raise DensecodeError(f"reward.sparse_keep_dense names unknown component(s) {unknown}; this reward has "
                             f"{', '.join(sorted(built))} (list the components that stay per token in sparse mode)")
    return RewardAssembler(built, {n: weights.get(n, 0.0) for n in built}, mode=mode, sparse_keep_dense=keep)
