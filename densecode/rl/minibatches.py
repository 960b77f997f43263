"""Which rows of an update minibatch run forward and backward (algo.skip_zero_advantage_rows)."""

from __future__ import annotations

from densecode.rl.protocols import Algorithm
from densecode.rl.rollout import RolloutBatch


def update_parts(batch: RolloutBatch, micro_parts: list, algo: Algorithm, settings) -> list[tuple[RolloutBatch, float]]:
    """The micro-batches of one minibatch to run, each with its loss factor.

    Without settings.skip_zero_advantage_rows: every micro-batch whole, factor 1. With it, each micro-batch keeps
    only the rows `algo.signal_rows` names, its loss scaled by the factor that makes the gradient the whole
    micro-batch's; a micro-batch with none is dropped. When every row of the minibatch is dropped it still runs
    whole unless settings.skip_zero_gradient is on, because Adam's step on a zero gradient moves the weights too
    (its moments): the update stays the one the flag being off would take.
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
    return parts if parts or settings.skip_zero_gradient else whole()
