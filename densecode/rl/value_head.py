"""Policy + value model as ONE `nn.Module` (so accelerate/DDP syncs both), and the reference policy.

Value model options (`model.value_model`):
- "shared" (default, memory-light): a scalar head on the policy's last hidden state.
- "separate": a critic backbone of its own (a second copy of the initial weights,
  with its own LoRA adapter when LoRA is on) + the scalar head — the reference
  implementation's layout.

Reference policy: with LoRA the base model with the adapter disabled
(`peft_model.disable_adapter()`), so there is no second copy of the weights;
without LoRA a frozen deep copy of the initial policy.
"""

from __future__ import annotations

import contextlib
import copy
from dataclasses import dataclass

import torch
from torch import nn

from densecode.rl.ppo import entropy_from_logp, logprobs_from_logits


class ValueHead(nn.Module):
    """Linear(hidden → 1). Zero-initialised: V ≡ 0 at start, so the first advantages are the raw returns."""

    def __init__(self, hidden_size: int):
        super().__init__()
        self.summary = nn.Linear(hidden_size, 1)
        nn.init.zeros_(self.summary.weight)
        nn.init.zeros_(self.summary.bias)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.summary(hidden.to(self.summary.weight.dtype)).squeeze(-1)


def hidden_size_of(model: nn.Module) -> int:
    config = model.config
    for name in ("hidden_size", "n_embd", "d_model"):
        if getattr(config, name, None):
            return int(getattr(config, name))
    raise ValueError(f"cannot find the hidden size in {type(config).__name__}")


def disable_dropout(model: nn.Module) -> None:
    """Dropout off everywhere (as TRL's PPOTrainer does): ratio = 1 exactly on the first minibatch."""
    for module in model.modules():
        if isinstance(module, nn.Dropout):
            module.p = 0.0


@dataclass
class PolicyOutput:
    logprobs: torch.Tensor  # [B, R] log π(response token) under the sampling temperature
    entropy: torch.Tensor  # [B, R]
    values: torch.Tensor | None  # [B, R] V(state before emitting the token)
    logits: torch.Tensor | None = None  # [B, R, V] only when asked for


class PolicyWithValue(nn.Module):
    def __init__(self, policy: nn.Module, value_model: str = "shared", critic: nn.Module | None = None,
                 with_value_head: bool = True):
        super().__init__()
        if value_model not in ("shared", "separate"):
            raise ValueError(f"value_model must be 'shared' or 'separate', got {value_model!r}")
        if value_model == "separate" and critic is None and with_value_head:
            raise ValueError("value_model='separate' needs a critic model")
        self.policy = policy
        self.value_model = value_model
        self.critic = critic if with_value_head and value_model == "separate" else None
        self.value_head = ValueHead(hidden_size_of(policy)) if with_value_head else None

    def forward(self, input_ids, attention_mask, position_ids, response_ids, temperature: float = 1.0,
                with_values: bool = True, keep_logits: bool = False) -> PolicyOutput:
        """Score `response_ids` (the last R positions of `input_ids`) with one forward pass."""
        R = response_ids.shape[1]
        want_values = with_values and self.value_head is not None
        out = self.policy(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            output_hidden_states=want_values and self.critic is None,
            use_cache=False,
        )
        # Position t predicts token t+1: response token j is scored by the logits at (L − R − 1 + j).
        logits = out.logits[:, -R - 1 : -1, :]
        # One log_softmax over the vocabulary serves both the sampled tokens' log-probs and the entropy.
        logp = torch.log_softmax(logits.float() / temperature, dim=-1)
        logprobs = torch.gather(logp, -1, response_ids.unsqueeze(-1)).squeeze(-1)
        entropy = entropy_from_logp(logp)
        values = None
        if want_values:
            if self.critic is None:
                hidden = out.hidden_states[-1]
            else:
                hidden = self.critic(
                    input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                    output_hidden_states=True, use_cache=False,
                ).hidden_states[-1]
            values = self.value_head(hidden[:, -R - 1 : -1, :]).float()
        return PolicyOutput(logprobs, entropy, values, logits if keep_logits else None)


def is_peft_model(model: nn.Module) -> bool:
    return hasattr(model, "disable_adapter") and hasattr(model, "peft_config")


class ReferencePolicy:
    """log π_ref: the LoRA base with the adapter disabled, or a frozen copy of the initial weights."""

    def __init__(self, policy: nn.Module):
        self._frozen: nn.Module | None = None
        if not is_peft_model(policy):
            self._frozen = copy.deepcopy(policy).eval()
            for p in self._frozen.parameters():
                p.requires_grad_(False)

    @property
    def shares_weights(self) -> bool:
        return self._frozen is None

    def scoring_model(self, policy: nn.Module):
        """(the model that computes log pi_ref, a factory of the context to run it in)."""
        if self._frozen is not None:
            return self._frozen, None
        return policy, policy.disable_adapter

    @torch.no_grad()
    def logprobs(self, policy: nn.Module, input_ids, attention_mask, position_ids, response_ids,
                 temperature: float = 1.0) -> torch.Tensor:
        R = response_ids.shape[1]
        if self._frozen is not None:
            model, ctx = self._frozen, contextlib.nullcontext()
        else:
            model, ctx = policy, policy.disable_adapter()
        with ctx:
            logits = model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                           use_cache=False).logits[:, -R - 1 : -1, :]
        return logprobs_from_logits(logits, response_ids, temperature)

    def to(self, device) -> ReferencePolicy:
        if self._frozen is not None:
            self._frozen.to(device)
        return self
