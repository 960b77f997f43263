"""Rejection-sampling fine-tuning (RFT, expert iteration): the baseline every RL recipe must beat.

Same rollout → rewards path as PPO and GRPO (densecode/rl/trainer.py); only the update differs:

    sample k responses per prompt (algo.rft.samples_per_prompt)
    keep_i  = 1 if outcome_i >= min_outcome else 0       outcome: the task's verifiable outcome in [0, 1]
    loss    = − Σ_i Σ_t keep_i · log π(a_t | s_t) / Σ_i Σ_t keep_i     (token-mean NLL of the kept responses)

No value model, no reference, no ratio: a supervised step on the policy's own successes (STaR /
ReST-EM style). The NLL is taken under the sampling temperature's distribution (the trainer scores every
optimiser's log-probs at the rollout's temperature), so at generation.temperature 1.0 it is the plain NLL.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from densecode.config import RFTConfig
from densecode.rl.protocols import Algorithm
from densecode.rl.tensors import masked_mean


def keep_mask(outcomes: torch.Tensor, min_outcome: float) -> torch.Tensor:
    """1.0 for responses whose outcome reaches `min_outcome`, else 0.0."""
    return (outcomes.float() >= float(min_outcome) - 1e-9).float()


def rft_loss(logprobs: torch.Tensor, keep: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Token-mean negative log-likelihood of the kept rows; 0 (no gradient) when none is kept."""
    weights = keep[:, None].to(logprobs.dtype) * mask
    return -(logprobs * weights).sum() / weights.sum().clamp(min=1.0)


@dataclass
class RFTAlgorithm(Algorithm):
    """The trainer's `Algorithm` for RFT: advantages hold the keep mask (1 on a kept response's tokens). Its
    settings are `algo.rft` as they are (`cfg`, densecode.config.RFTConfig)."""

    cfg: RFTConfig = field(default_factory=RFTConfig)
    temperature: float = 1.0  # generation.temperature

    name = "rft"
    needs_value_head = False

    @property
    def samples_per_prompt(self) -> int:
        return self.cfg.samples_per_prompt

    @property
    def epochs(self) -> int:
        return self.cfg.epochs

    @classmethod
    def from_config(cls, algo_cfg, gen_cfg) -> RFTAlgorithm:
        r = algo_cfg.rft
        if r.samples_per_prompt < 1 or r.epochs < 1:
            from densecode.errors import DensecodeError

            raise DensecodeError("algo.rft.samples_per_prompt and algo.rft.epochs must be >= 1")
        return cls(r, temperature=gen_cfg.temperature)

    def sampling_temperature(self, step: int) -> float:
        return self.temperature

    @torch.no_grad()
    def compute_advantages(self, batch) -> dict[str, float]:
        from densecode.rl.credit import no_signal_share
        from densecode.rl.grpo import sequence_rewards

        mask = batch.response_mask
        outcomes = sequence_rewards(batch, "outcome")
        keep = keep_mask(outcomes, self.cfg.min_outcome)
        batch.advantages = keep.to(mask.device)[:, None] * mask
        batch.returns = None
        all_pass, all_fail = no_signal_share(outcomes, batch.prompt_index.cpu())
        return {
            "rft/outcome_mean": float(outcomes.mean()),
            "rft/kept_frac": float(keep.mean()),
            "rft/kept_tokens": float((batch.advantages * mask).sum()),
            "rft/all_pass_prompts": all_pass,
            "rft/all_fail_prompts": all_fail,
        }

    def loss(self, mb, out) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        keep = (mb.advantages * mb.response_mask).amax(dim=1)
        loss = rft_loss(out.logprobs, keep, mb.response_mask)
        # approx_kl to the rollout policy is the trainer's (train/approx_kl, the same for every optimiser).
        return loss, {"rft/nll": loss.detach(), "rft/entropy": masked_mean(out.entropy.detach(), mb.response_mask)}

    def signal_rows(self, mb) -> tuple[torch.Tensor, float] | None:
        # Only kept responses enter the NLL, whose mean is over their tokens alone: dropping the others is exact.
        return ((mb.advantages * mb.response_mask) != 0).any(dim=1), 1.0

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass
