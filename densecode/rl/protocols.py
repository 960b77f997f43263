"""What an optimiser and a task source plug into the trainer (densecode.rl.trainer): one base class each.

Every optional hook has a no-op default here, so the trainer calls it unconditionally and a reader sees in
one place everything an algorithm or a domain may provide. PPO (densecode.rl.ppo), GRPO (densecode.rl.grpo)
and RFT (densecode.rl.rft) subclass `Algorithm`; every densecode.domains.Domain is a `TaskSource`. A plain
object with `train_batch` and `evaluate` is accepted as a task source too (`as_task_source` wraps it once),
with the defaults for every hook.

The reward function is any callable `reward_fn(samples) -> RewardBatch` (densecode.rewards assembler;
`.total` per-token arrays, `.components`, `.outputs`, `.stats`); with `weights` and `set_weight("kl", β)`
(the assembler's) the KL controller steers its KL weight.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:  # the protocols stay importable without torch (domains import this module)
    import torch

    from densecode.rl.rollout import RolloutBatch
    from densecode.rl.value_head import PolicyOutput


class Algorithm:
    """An optimiser: how advantages are computed from a scored, rewarded batch and what loss the update minimises.

    batch fields compute_advantages can read: batch.rewards [B, R] (per-token totals), batch.sequence_rewards [B],
    batch.components, batch.prompt_index (groups), batch.response_mask, batch.responses[i].finish_reason /
    batch.truncated, batch.reward_outputs (the assembler's RewardBatch: per-component diagnostics), batch.values.
    """

    name: str = ""                   # "ppo" | "grpo" | "rft" | ...
    needs_value_head: bool = False   # True → batch.values is filled and out.values computed
    samples_per_prompt: int = 1      # responses per prompt (GRPO: the group size G)
    epochs: int = 1                  # passes over each rollout batch (PPO epochs, GRPO iterations)
    needs_reference: bool = False    # batch.ref_logprobs is filled even when the reward has no KL weight
    allows_reward_kl: bool = True    # False → a KL weight in the reward is an error (GRPO: β = 0)
    # The weight of a KL loss term (GRPO's k3, algo.grpo.beta), or None for an algorithm without one; only then
    # is the task source's kl_loss_coefs consulted (per-sample weights in batch.kl_coefs).
    kl_coef: float | None = None

    def sampling_temperature(self, step: int) -> float:
        """The rollout's temperature; the trainer scores logπ_old and logπ_new under the SAME temperature."""
        raise NotImplementedError

    def compute_advantages(self, batch: RolloutBatch) -> dict[str, float]:
        """Set batch.advantages [B, R] (and batch.returns with a value loss); return scalars to log ("<algo>/")."""
        raise NotImplementedError

    def loss(self, mb: RolloutBatch, out: PolicyOutput) -> tuple[torch.Tensor, dict[str, Any]]:
        """mb: a row subset of the batch (mb.logprobs = old, mb.ref_logprobs, mb.advantages, ...); out: the fresh
        forward pass (out.logprobs, out.entropy, out.values or None). The trainer divides the loss by the number
        of accumulation micro-batches and calls backward."""
        raise NotImplementedError

    def signal_rows(self, mb: RolloutBatch) -> tuple[torch.Tensor, float] | None:
        """For algo.skip_zero_advantage_rows: a [B] bool mask of the rows of `mb` whose loss can have a gradient,
        and the factor that makes `loss` over those rows alone equal `loss` over `mb` (a token mean over mb's
        tokens: their share of them). None = every row counts (a value loss, an entropy bonus or a KL term gives
        each row a gradient), the default."""
        return None

    def on_step_end(self, batch: RolloutBatch, stats: dict) -> dict[str, float]:
        """After the update (e.g. a temperature controller reading diversity); returns extra stats."""
        return {}

    def state_dict(self) -> dict:
        """JSON-able controller state, checkpointed."""
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass


@dataclass
class StepView:
    """What a task source's `on_step_end` sees of the trainer: the step and a gradient probe (nothing to mutate)."""

    step: int
    samples_per_prompt: int
    # rows -> flat float32 gradient over the trainable policy parameters of -mean_t(A_t * log pi(a_t)) on
    # those rows of the step's batch (the policy gradient at the current weights; optimizer state untouched).
    policy_gradient: Callable[[list[int]], torch.Tensor]


class TaskSource:
    """Where prompts come from, and the held-out eval (a densecode.domains.Domain is one)."""

    # Per-task outcomes of the last `evaluate` (one row per pass), appended to eval_tasks.jsonl; None = none kept.
    last_eval_rows: list[dict] | None = None

    def train_batch(self, n: int, seed: int) -> tuple[list[str], list[dict]]:
        """n prompts and their task dicts (what the reward components read), deterministic in `seed`."""
        raise NotImplementedError

    def evaluate(self, model, tokenizer, *, n: int, seed: int) -> dict[str, float]:
        raise NotImplementedError

    def on_step_end(self, view: StepView, batch: RolloutBatch, stats: dict) -> dict[str, float]:
        """After the update and the algorithm's hook (a multi-task scheduler); returns extra stats."""
        return {}

    def state_dict(self) -> dict | None:
        """JSON-able task-source state, checkpointed (None: nothing to keep)."""
        return None

    def load_state_dict(self, state: dict) -> None:
        pass

    def write_report(self, run_dir) -> None:
        """Extra end-of-run pictures next to learning_curves.png."""

    def uses_kl_loss(self, base: float) -> bool:
        """Whether kl_loss_coefs can be > 0 (then the reference model is loaded)."""
        return False

    def kl_loss_coefs(self, tasks: list[dict], base: float) -> list[float] | None:
        """Per-sample weights [B] of the algorithm's KL loss term, given its own `base` (None = `base` for all)."""
        return None

    def prompt_stops(self, tasks: list[dict]) -> list[list[str]] | None:
        """Each training prompt's own stop strings (None: generation.stop for every prompt)."""
        return None


class _PlainTaskSource(TaskSource):
    """A task source that is not a TaskSource subclass: its train_batch and evaluate, every hook's default."""

    def __init__(self, inner):
        self.inner = inner

    def train_batch(self, n: int, seed: int) -> tuple[list[str], list[dict]]:
        return self.inner.train_batch(n, seed)

    def evaluate(self, model, tokenizer, *, n: int, seed: int) -> dict[str, float]:
        return self.inner.evaluate(model, tokenizer, n=n, seed=seed)


def as_task_source(obj) -> TaskSource:
    return obj if isinstance(obj, TaskSource) else _PlainTaskSource(obj)


@runtime_checkable
class KLWeightedReward(Protocol):
    """A reward function whose KL weight the trainer's KL controller steers (the densecode.rewards assembler)."""

    weights: dict[str, float]

    def set_weight(self, name: str, weight: float) -> None: ...


def kl_weighted(reward_fn) -> bool:
    return isinstance(reward_fn, KLWeightedReward)
