"""Domain registry: a config's `domain:` name -> its `Domain` class.

Lookup order for `domain: NAME`:
1. a domain registered in this process (`@register_domain`, e.g. densecode's built-ins, or a test's toy domain);
2. densecode's built-in domains (imported on first use so that a domain's dependencies load only when used);
3. an installed package's entry point in the `densecode.domains` group (`NAME = "package.module:Class"`);
4. NAME itself as "package.module:Class" (the module is importable from the config's folder too);
5. any other name whose `tasks:` section names a `simulator`: the plug-in domain (a gymnasium env driven by programs).
"""

from __future__ import annotations

import copy
import dataclasses
import importlib
import sys
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from densecode.errors import DensecodeError

ENTRY_POINT_GROUP = "densecode.domains"

_REGISTRY: dict[str, type] = {}

# Built-in domains: name -> "module:Class", imported lazily.
BUILTIN: dict[str, str] = {
    "robotics": "densecode.domains.robotics:RoboticsDomain",
    "code": "densecode.domains.code:CodeDomain",
    "codegen": "densecode.domains.codegen:CodegenDomain",
    "codeio": "densecode.domains.codeio:CodeioDomain",
    "testgen": "densecode.domains.testgen:TestgenDomain",
    "commitmsg": "densecode.domains.commitmsg:CommitmsgDomain",
    "multi": "densecode.domains.multi:MultiDomain",
}
PLUGIN_DOMAIN = "densecode.domains.plugin:PluginDomain"


def register_domain(cls: type) -> type:
    """Class decorator: make `cls` (a Domain subclass with a `name`) available as `domain: <name>`."""
    from densecode.domains.base import Domain

    if not (isinstance(cls, type) and issubclass(cls, Domain)):
        raise TypeError(f"register_domain expects a Domain subclass, got {cls!r}")
    if not cls.name:
        raise TypeError(f"{cls.__name__} must set a class attribute `name` to be registered")
    _REGISTRY[cls.name] = cls
    return cls


def _load(path: str, what: str, base_dir: Path | None = None) -> type:
    from densecode.domains.base import Domain

    module_name, _, attr = path.partition(":")
    if not module_name or not attr:
        raise DensecodeError(f"{what} {path!r} must look like 'package.module:ClassName'")
    added = None
    if base_dir is not None and str(base_dir) not in sys.path:
        # A user's domain module next to their config imports without setting PYTHONPATH.
        added = str(base_dir)
        sys.path.insert(0, added)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        where = f" (searched the import path and {base_dir})" if base_dir is not None else ""
        raise DensecodeError(f"{what} {path!r}: cannot import {module_name!r}{where}: {exc}") from None
    finally:
        if added is not None and added in sys.path and module_name not in sys.modules:
            sys.path.remove(added)
    cls = getattr(module, attr, None)
    if not (isinstance(cls, type) and issubclass(cls, Domain)):
        raise DensecodeError(f"{what} {path!r}: {attr!r} is not a densecode.domains.Domain subclass")
    return cls


def _entry_point(name: str) -> str | None:
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == name:
            return ep.value
    return None


def known_domains() -> list[str]:
    names = set(_REGISTRY) | set(BUILTIN)
    names |= {ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)}
    return sorted(names)


def get_domain_class(name: str, tasks: dict | None = None, base_dir: str | Path | None = None) -> type:
    """The Domain class for a config's `domain` (and its raw `tasks:` mapping, to recognise plug-ins)."""
    base = Path(base_dir) if base_dir is not None else None
    if name in _REGISTRY:
        return _REGISTRY[name]
    if name in BUILTIN:
        cls = _load(BUILTIN[name], f"domain {name!r}")
        _REGISTRY.setdefault(name, cls)
        return cls
    ep = _entry_point(name)
    if ep is not None:
        return _load(ep, f"domain {name!r} (entry point {ENTRY_POINT_GROUP})")
    if ":" in name:
        return _load(name, "domain", base)
    if (tasks or {}).get("simulator"):
        return _load(PLUGIN_DOMAIN, "the plug-in domain")
    raise DensecodeError(f"unknown domain {name!r}: choose one of {', '.join(known_domains())} (--domain), give "
                         "'package.module:Class' of a Domain subclass, or name a gymnasium simulator under "
                         "tasks.simulator (see configs/warehouse.yaml)")


def task_options(domain: str, layers: list[tuple[dict, str]], current: Any = None,
                 source_dir: Path | None = None) -> Any:
    """The domain's Options dataclass from the raw `tasks:` layers (densecode.config.TaskLayers), base first.

    A key set to null goes back to its default (or, if this domain has no such key, is dropped: a plug-in
    config whose base is robotics.yaml writes `sim: null` to unset RoboSim's options).
    """
    from densecode.config import apply_mapping

    merged: dict = {}
    for data, _source in layers:
        merged.update(data)
    if dataclasses.is_dataclass(current) and not isinstance(current, type):
        merged = {**dataclasses.asdict(current), **merged}
    cls = get_domain_class(domain, merged, source_dir).Options
    opts = current if isinstance(current, cls) else cls()
    defaults = cls()
    names = {f.name for f in dataclasses.fields(cls)}
    # Keys this domain lacks that a layer unsets with null are dropped from every layer.
    dropped = {k for data, _ in layers for k, v in data.items() if v is None and k not in names}
    for data, source in layers:
        for key, value in data.items():
            if key in dropped:
                continue
            if value is None and key in names:
                setattr(opts, key, copy.deepcopy(getattr(defaults, key)))
            else:
                apply_mapping(opts, {key: value}, source, prefix="tasks.")
    return opts
