"""A domain whose tasks come from a seeded generator, or from a real-data file whose rows carry their split.

Subclasses name their generator `f(split, n, seed, levels) -> list[dict]` and their loader
`f(path, limit=) -> (accepted task dicts, rejected)` as "module:function" (`task_generator`, `task_loader`; each
accepted task has a `split` fixed by a hash of its content); their options have `path`, `limit` and `levels`. Training draws tasks with
replacement; a held-out split gives its first `n` tasks (all with n <= 0), so every eval sees the same ones.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any, ClassVar

from densecode.domains.base import Domain, draw_tasks
from densecode.errors import DensecodeError

SPLITS = ("train", "validation", "test")


def _function(path: str):
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


class GeneratedOrFileDomain(Domain):
    task_generator: ClassVar[str] = ""  # "module:function", imported on first use
    task_loader: ClassVar[str] = ""
    # What fixes a real task's split, for the message when a split is empty.
    split_key_text = "a hash of each task"

    def __init__(self, options: Any = None, **kwargs):
        super().__init__(options, **kwargs)
        levels = tuple(int(x) for x in self.options.levels)
        if not levels or any(x not in (1, 2, 3) for x in levels):
            raise DensecodeError(f"tasks.levels must list levels 1-3; got {list(self.options.levels)}")
        self._levels = levels
        self._loaded: dict[str, list[dict]] | None = None

    def generate_tasks(self, split: str, n: int, seed: int, levels: tuple[int, ...]) -> list[dict]:
        return _function(self.task_generator)(split, n, seed, levels)

    def load(self, path: Path, limit: int) -> list[dict]:
        accepted, _rejected = _function(self.task_loader)(path, limit=limit)
        return accepted

    def prepare(self) -> None:
        if self.options.path:
            self._real()

    def _real(self) -> dict[str, list[dict]]:
        if self._loaded is None:
            path = Path(self.options.path)
            if not path.is_absolute() and self.base_dir is not None and not path.exists():
                path = self.base_dir / path
            by_split: dict[str, list[dict]] = {s: [] for s in SPLITS}
            for t in self.load(path, int(self.options.limit)):
                by_split[t["split"]].append(t)
            self._loaded = by_split
        return self._loaded

    def tasks(self, split: str, n: int, seed: int) -> list[dict]:
        if split not in SPLITS:
            raise DensecodeError(f"{self.name} split must be train, validation or test; got {split!r}")
        if not self.options.path:
            return self.generate_tasks(split, n, seed, self._levels)
        pool = self._real()[split]
        if not pool:
            raise DensecodeError(f"{self.options.path}: no {split} tasks (splits are fixed by {self.split_key_text})")
        return draw_tasks(pool, split, n, seed)
