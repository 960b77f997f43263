"""Domains as plug-ins: a config's `domain:` names one registered `Domain` (tasks, prompt format, reward recipe,
simulator, eval). The trainer receives a domain only as a task source and a reward function.

    from densecode.domains import build_domain, build_reward_fn
    domain = build_domain(cfg)                 # RoboticsDomain, CodeDomain, a plug-in simulator, a third party's
    reward_fn = build_reward_fn(cfg, domain)   # the assembler, with the weights computed once (reward_fn.weights)

Built-ins: `robotics`, `code`, and `plugin` (any gymnasium simulator named under `tasks.simulator`). A third-party
domain: subclass `Domain`, and either register an entry point in the `densecode.domains` group or name it in the
config as `domain: "package.module:Class"`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from densecode.config import TaskLayers
from densecode.domains.base import Domain, DomainOptions, options_from_mapping
from densecode.domains.registry import (
    ENTRY_POINT_GROUP,
    get_domain_class,
    known_domains,
    register_domain,
    task_options,
)


def resolve_tasks(cfg: Any) -> Any:
    """`cfg.tasks` typed by the domain's Options class (the config layer reads `tasks:` raw: densecode.config's
    TaskLayers); set in place and returned. Unknown keys and wrong types are ConfigErrors naming their source."""
    if isinstance(cfg.tasks, TaskLayers):
        cfg.tasks = task_options(cfg.domain, cfg.tasks.layers, cfg.tasks.current, getattr(cfg, "source_dir", None))
    return cfg.tasks


def load_config(path: str | Path | None = None, overrides: list[str] | None = None, base: Any = None) -> Any:
    """densecode.config.load_config with `tasks:` typed by the config's domain (what `densecode config` prints)."""
    from densecode.config import load_config as read_config

    cfg = read_config(path, overrides, base)
    resolve_tasks(cfg)
    return cfg


def build_domain(cfg: Any, base_dir: str | Path | None = None) -> Domain:
    """The config's domain object, with its typed options (`cfg.tasks`, typed here if still raw)."""
    base_dir = base_dir if base_dir is not None else getattr(cfg, "source_dir", None)
    resolve_tasks(cfg)
    raw = cfg.tasks if isinstance(cfg.tasks, dict) else (vars(cfg.tasks) if cfg.tasks is not None else {})
    cls = get_domain_class(cfg.domain, raw, base_dir)
    return cls(cfg.tasks, generation=cfg.generation, base_dir=base_dir, name=cfg.domain)


def reward_weights(cfg: Any, domain: Domain) -> dict[str, float]:
    """The weights the reward really uses: `reward.weights` over the domain's defaults (computed once, carried)."""
    weights = {k: float(v) for k, v in domain.default_weights.items()}
    weights.update({k: float(v) for k, v in (cfg.reward.weights or {}).items()})
    return weights


def build_reward_fn(cfg: Any, domain: Domain, *, components: dict | None = None, sandbox: Any = None):
    """The reward assembler for this config and domain (every per-token term, the missing-EOS penalty included)."""
    from densecode.rewards import build_assembler

    own = getattr(domain, "build_reward_fn", None)
    if own is not None:
        # A domain that composes other domains (multi) builds its own reward function (same call contract).
        return own(cfg, components=components, sandbox=sandbox)
    weights = reward_weights(cfg, domain)
    simulator = domain.simulator() if weights.get("sim", 0.0) > 0 else None
    return build_assembler(cfg.reward, domain, simulator=simulator, sandbox=sandbox, components=components)


__all__ = [
    "ENTRY_POINT_GROUP", "Domain", "DomainOptions", "build_domain", "build_reward_fn", "get_domain_class",
    "known_domains", "load_config", "options_from_mapping", "register_domain", "resolve_tasks", "reward_weights",
]
