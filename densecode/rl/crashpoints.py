"""Deterministic self-SIGKILL at a chosen point of training: how the crash-safety test hits each phase.

    DENSECODE_CRASH_AT=PHASE:STEP[:K] densecode train ...

STEP is the 1-based step number (as in metrics.jsonl: step N is the N-th step; its checkpoint is step-N).
The trainer process SIGKILLs itself (no handler, no cleanup, no flush: what the OOM killer or a lost node
does) at:

    sample:N:K      the K-th forward pass of the policy while step N samples its responses
    reward:N:K      after the K-th program of step N's reward batch finished in the sandbox (others are
                    still queued or running)
    update:N:K      after the K-th optimizer step of step N's update (weights half-updated in memory)
    checkpoint:N:K  inside the write of checkpoint step-N, at stage K:
                    1 model weights written to .tmp-step-N   2 optimizer + RNG written
                    3 trainer_state.json written (before the rename)   4 renamed, `latest` not yet updated
                    5 the new `latest` written to its temp file, not yet renamed over `latest`

Unset (the normal case) nothing is installed and nothing is checked beyond one getattr.
A point that is never reached (K larger than the phase's count) kills nothing.
"""

from __future__ import annotations

import os
import signal
import sys
from dataclasses import dataclass

from densecode.errors import DensecodeError

ENV = "DENSECODE_CRASH_AT"
PHASES = ("sample", "reward", "update", "checkpoint")


@dataclass(frozen=True)
class CrashPoint:
    phase: str
    step: int  # 1-based
    k: int = 1

    @classmethod
    def parse(cls, text: str) -> CrashPoint:
        parts = text.strip().split(":")
        try:
            if parts[0] not in PHASES or len(parts) not in (2, 3):
                raise ValueError
            point = cls(parts[0], int(parts[1]), int(parts[2]) if len(parts) == 3 else 1)
        except ValueError:
            raise DensecodeError(f"{ENV}={text!r}: expected PHASE:STEP[:K] with PHASE one of "
                                 f"{', '.join(PHASES)} (e.g. update:3:2)") from None
        return point


def die() -> None:
    """SIGKILL this process now (stdout/stderr flushed first so the test can see how far it got)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - a closed stream must not stop the kill
            pass
    os.kill(os.getpid(), signal.SIGKILL)


class CrashHooks:
    """Counts events of the armed phase during the armed step and kills at the K-th."""

    def __init__(self, trainer, point: CrashPoint):
        self.trainer = trainer
        self.point = point
        self.count = 0
        self.sampling = False

    def _running_step(self) -> int:
        return self.trainer.state.step + 1  # state.step = completed steps

    def event(self, phase: str, step: int | None = None) -> None:
        if phase != self.point.phase:
            return
        if (step if step is not None else self._running_step()) != self.point.step:
            return
        self.count += 1
        if self.count == self.point.k:
            die()

    def at(self, phase: str, step: int, k: int) -> None:
        """A numbered point inside a phase (checkpoint stages 1-5): die when it is the armed one."""
        if (phase, step, k) == (self.point.phase, self.point.step, self.point.k):
            die()

    def install(self) -> None:
        tr = self.trainer
        if self.point.phase == "sample":
            inner = tr.sampler

            def sampler(*args, **kwargs):
                self.sampling = True
                try:
                    return inner(*args, **kwargs)
                finally:
                    self.sampling = False

            tr.sampler = sampler
            tr.unwrapped.policy.register_forward_pre_hook(lambda *_: self.event("sample") if self.sampling else None)
        elif self.point.phase == "update":
            opt = getattr(tr.optimizer, "optimizer", tr.optimizer)  # accelerate wraps the torch optimizer
            opt.register_step_post_hook(lambda *_: self.event("update"))
        elif self.point.phase == "reward":
            pool_mod = sys.modules.get("densecode.sandbox.pool")
            if pool_mod is None:
                import importlib

                pool_mod = importlib.import_module("densecode.sandbox.pool")
            pump = pool_mod.SandboxPool._pump

            def counting_pump(pool, w):
                finished = pump(pool, w)
                if finished:
                    self.event("reward")
                return finished

            pool_mod.SandboxPool._pump = counting_pump


def install_from_env(trainer) -> CrashHooks | None:
    text = os.environ.get(ENV)
    if not text:
        return None
    hooks = CrashHooks(trainer, CrashPoint.parse(text))
    hooks.install()
    return hooks
