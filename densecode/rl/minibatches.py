"""Which rows of an update minibatch run forward and backward (algo.skip_zero_advantage_rows)."""

from __future__ import annotations

import torch

from densecode.errors import DensecodeError
from densecode.rl.protocols import Algorithm
from densecode.rl.rollout import RolloutBatch


def update_parts(batch: RolloutBatch, micro_parts: list, algo: Algorithm, settings) -> list[tuple[RolloutBatch, float]]:
    """The micro-batches of one minibatch to run, each with its loss factor.

    Without settings.skip_zero_advantage_rows: every micro-batch whole, factor 1. With it, each micro-batch keeps
    only the rows `algo.signal_rows` names, its loss scaled by the factor that makes the gradient the whole
    micro-batch's; a micro-batch with none is dropped, so a minibatch without a signal row gives [] (its gradient
    is exactly 0: the trainer sets it so, and Adam still steps unless settings.skip_zero_gradient is on).
    """
    def whole() -> list[tuple[RolloutBatch, float]]:
        return [(batch.select(m).trimmed(), 1.0) for m in micro_parts]

    if not settings.skip_zero_advantage_rows:
        return whole()
    parts = []
    for m in micro_parts:
        mb = batch.select(m)
        picked = algo.signal_rows(mb)
        if picked is None:
            parts.append((mb.trimmed(), 1.0))
            continue
        rows, scale = picked
        if bool(rows.any()):
            parts.append((mb.select(rows.nonzero().flatten()).trimmed(), scale))
    return parts


class UpdateRows:
    """The trainer's side of algo.skip_zero_advantage_rows: each minibatch's micro-batches to run (`parts`), the
    share of rows they hold (`stats`, per step)."""

    def __init__(self, settings, num_processes: int):
        if settings.skip_zero_advantage_rows and num_processes > 1:
            # Processes would run different numbers of backward passes: DDP's all-reduce needs the same.
            raise DensecodeError("algo.skip_zero_advantage_rows runs on one process only; set it to false for a "
                                 f"{num_processes}-process run")
        self.settings = settings
        self.total = self.run = 0

    def parts(self, batch: RolloutBatch, mb_idx, algo: Algorithm) -> tuple[list[tuple[RolloutBatch, float]], int]:
        """(update_parts of minibatch `mb_idx` split into grad_accum_steps micro-batches, how many micro-batches)."""
        n_micro = max(1, self.settings.grad_accum_steps)
        micro = [m for m in torch.tensor_split(mb_idx, min(n_micro, len(mb_idx))) if len(m)]
        parts = update_parts(batch, micro, algo, self.settings)
        self.total += len(mb_idx)
        self.run += sum(mb.size for mb, _ in parts)
        return parts, len(micro)

    def stats(self) -> dict[str, float]:
        out = {"train/update_rows_frac": self.run / max(self.total, 1)} if self.settings.skip_zero_advantage_rows else {}
        self.total = self.run = 0
        return out


def zero_gradients(params) -> None:
    """A zero gradient on every parameter: what a minibatch whose every advantage is 0 backpropagates."""
    for p in params:
        p.grad = torch.zeros_like(p)
