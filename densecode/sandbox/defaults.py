"""The process-wide default pool and pools built from the `sandbox:` config section."""

from __future__ import annotations

import atexit
import os
import threading

from densecode.sandbox.jobs import Limits
from densecode.sandbox.pool import SandboxPool

_DEFAULT_POOL: SandboxPool | None = None
_DEFAULT_LOCK = threading.Lock()
_DEFAULT_CONFIG = None  # the `sandbox:` config section set by configure_default_pool


def get_default_pool() -> SandboxPool:
    """Process-wide shared pool (created on first use, closed at interpreter exit)."""
    global _DEFAULT_POOL
    with _DEFAULT_LOCK:
        if _DEFAULT_POOL is None or _DEFAULT_POOL._closed or _DEFAULT_POOL._owner_pid != os.getpid():
            _DEFAULT_POOL = pool_from_config(_DEFAULT_CONFIG) if _DEFAULT_CONFIG is not None else SandboxPool()
            atexit.register(_DEFAULT_POOL.close)
        return _DEFAULT_POOL


def _limits_from_config(cfg) -> Limits:
    from densecode.errors import DensecodeError

    if cfg.isolation not in SandboxPool.ISOLATION_MODES:
        raise DensecodeError(f"sandbox.isolation={cfg.isolation!r} is not one of {', '.join(SandboxPool.ISOLATION_MODES)}")
    for key in ("timeout_s", "cpu_s", "memory_mb", "max_procs", "file_size_mb", "output_bytes"):
        if getattr(cfg, key) <= 0:
            raise DensecodeError(f"sandbox.{key} must be > 0 (got {getattr(cfg, key)!r})")
    if cfg.workers < 0:
        raise DensecodeError(f"sandbox.workers must be >= 0 (0 = CPU count; got {cfg.workers})")
    return Limits(timeout_s=cfg.timeout_s, cpu_s=cfg.cpu_s, memory_mb=cfg.memory_mb, max_procs=cfg.max_procs,
                  file_size_mb=cfg.file_size_mb, output_bytes=cfg.output_bytes)


def pool_from_config(cfg) -> SandboxPool:
    """A pool from a `SandboxConfig` (the `sandbox:` section of a densecode config)."""
    return SandboxPool(max_workers=cfg.workers or None, limits=_limits_from_config(cfg), isolation=cfg.isolation)


def configure_default_pool(cfg) -> None:
    """Make `get_default_pool()` use these settings (closes an existing default pool)."""
    global _DEFAULT_POOL, _DEFAULT_CONFIG
    _limits_from_config(cfg)  # fail fast on a bad config
    with _DEFAULT_LOCK:
        _DEFAULT_CONFIG = cfg
        if _DEFAULT_POOL is not None:
            _DEFAULT_POOL.close()
            _DEFAULT_POOL = None
