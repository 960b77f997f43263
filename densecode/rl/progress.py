"""The loop's terminal side: the step progress bar and Ctrl-C (finish the step, save, stop)."""

from __future__ import annotations

import signal
from contextlib import contextmanager


class StepProgress:
    """A tqdm bar over the steps with the latest reward, KL and eval score; a no-op when disabled."""

    def __init__(self, enabled: bool, *, total: int, initial: int, desc: str):
        self.bar = None
        if enabled:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, initial=initial, desc=desc, unit="step", dynamic_ncols=True)

    def update(self, stats: dict, last_stats: dict) -> None:
        if self.bar is None:
            return
        self.bar.update(1)
        post = {"reward": f"{stats.get('reward/sequence_mean', float('nan')):.3f}",
                "kl": f"{stats.get('objective/kl', 0.0):.3f}"}
        for k in ("eval/success_rate", "eval/pass_rate"):
            if k in last_stats:
                post[k.split("/")[1]] = f"{last_stats[k]:.3f}"
        self.bar.set_postfix(post)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


@contextmanager
def sigint_handler(handler):
    """`handler` for SIGINT inside the block, the handler found restored after (off the main thread: untouched)."""
    try:
        old = signal.signal(signal.SIGINT, handler)
    except ValueError:  # not the main thread
        old = None
    try:
        yield
    finally:
        if old is not None:
            signal.signal(signal.SIGINT, old)


@contextmanager
def closing(*things):
    """close() each of `things` when the block ends, however it ends (bar, TensorBoard writer)."""
    try:
        yield
    finally:
        for thing in things:
            thing.close()
