"""The update's optimiser side: parameter groups, AdamW, per-group gradient clipping, a gradient probe."""

from __future__ import annotations

import torch

from densecode.rl.tensors import masked_mean


def split_parameters(policy_value) -> tuple[list, list]:
    """(policy parameters, value-model parameters) that train: the value head / critic get their own lr and clip."""
    value_ids = {id(p) for m in (policy_value.value_head, policy_value.critic) if m is not None for p in m.parameters()}
    trainable = [p for p in policy_value.parameters() if p.requires_grad]
    return [p for p in trainable if id(p) not in value_ids], [p for p in trainable if id(p) in value_ids]


def make_optimizer(policy_params: list, value_params: list, settings) -> torch.optim.Optimizer:
    groups = [{"params": policy_params, "lr": settings.lr}, {"params": value_params, "lr": settings.vf_lr}]
    # eps=1e-5 as CleanRL: tiny second moments early in RL otherwise blow the first steps up.
    return torch.optim.AdamW([g for g in groups if g["params"]], weight_decay=settings.weight_decay, eps=1e-5)


def clip_gradients(accelerator, policy_value, policy_params: list, value_params: list,
                   max_norm: float) -> tuple[float, float]:
    """Clip the policy's and the value model's gradients separately (norms before clipping).

    One joint norm would let the value loss — returns of magnitude ~10 early on — shrink
    the policy's share of every clipped update to almost nothing.
    """
    from accelerate.utils import DistributedType

    if accelerator.distributed_type in (DistributedType.DEEPSPEED, DistributedType.FSDP):
        norm = accelerator.clip_grad_norm_(policy_value.parameters(), max_norm)
        norm = float(norm) if norm is not None else float("nan")
        return norm, 0.0 if not value_params else norm
    accelerator.unscale_gradients()
    norm = float(torch.nn.utils.clip_grad_norm_(policy_params, max_norm))
    vf_norm = float(torch.nn.utils.clip_grad_norm_(value_params, max_norm)) if value_params else 0.0
    return norm, vf_norm


def policy_gradient(policy_value, policy_params: list, batch, rows: list[int]) -> torch.Tensor:
    """Flat gradient of -mean_t(A_t * log pi(a_t)) on `rows` of `batch` over the trainable policy parameters
    (autograd.grad: the optimizer's .grad buffers are untouched). At ratio 1 this is PPO's and GRPO's
    surrogate gradient without clipping, so it is algorithm-independent."""
    mb = batch.select(torch.as_tensor(list(rows), dtype=torch.long))
    out = policy_value(mb.input_ids, mb.attention_mask, mb.position_ids, mb.response_ids,
                       temperature=batch.temperature, with_values=False)
    loss = -masked_mean(out.logprobs * mb.advantages.to(out.logprobs.dtype), mb.response_mask)
    params = list(policy_params)
    grads = torch.autograd.grad(loss, params, allow_unused=True)
    return torch.cat([(g if g is not None else torch.zeros_like(p)).detach().reshape(-1).float()
                      for g, p in zip(grads, params)])
