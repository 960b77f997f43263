"""Data packing and the training loop for densecode-tiny.

Two kinds of rows of `ctx` tokens:
- pretraining rows: stdlib functions joined by EOS and cut into fixed windows, loss
  on every token;
- supervised rows: (prompt, response) pairs, prompt and response tokenized
  separately (exactly as at generation time, where the prompt is tokenized alone),
  packed whole into rows, loss on the response and its EOS only.
Each batch draws its rows from the two kinds with fixed probabilities.
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass, field

import torch

from densecode.embedded.corpus import Pair

IGNORE = -100


@dataclass
class ModelShape:
    n_layer: int = 4
    n_embd: int = 256
    n_head: int = 4
    n_inner: int = 1024
    n_positions: int = 384


@dataclass
class TrainSettings:
    steps: int = 2000  # length of the learning-rate schedule
    # Stop early at this step (None: run the whole schedule). Lets a build ship an
    # intermediate checkpoint of a fixed schedule, reproducibly, without running the rest.
    stop_at: int | None = None
    batch_size: int = 16
    ctx: int = 256
    lr: float = 2e-3
    min_lr_ratio: float = 0.1
    warmup: int = 50
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    pretrain_share: float = 0.15  # probability that a row is a stdlib pretraining row
    # Weight of the prompt tokens of supervised rows in the training loss (0: loss on the response only). Prompts
    # of the code tasks are code (a function to test, a diff, a call): predicting them is free extra signal per
    # forward pass, which matters most where the answer is a few tokens (codeio).
    prompt_loss_weight: float = 0.0
    seed: int = 0
    eval_every: int = 250
    checkpoint_steps: list[int] = field(default_factory=list)


def build_model(tokenizer, shape: ModelShape, seed: int):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    eos = tokenizer.eos_token_id
    config = GPT2Config(
        vocab_size=len(tokenizer), n_positions=shape.n_positions, n_embd=shape.n_embd, n_layer=shape.n_layer,
        n_head=shape.n_head, n_inner=shape.n_inner, bos_token_id=eos, eos_token_id=eos, pad_token_id=eos,
        tie_word_embeddings=True, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
    )
    return GPT2LMHeadModel(config)


def pretrain_rows(tokenizer, texts: list[str], ctx: int) -> list[tuple[list[int], list[int]]]:
    eos = tokenizer.eos_token_id
    stream: list[int] = []
    for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]:
        stream.extend(ids)
        stream.append(eos)
    rows = []
    for start in range(0, len(stream) - ctx + 1, ctx):
        ids = stream[start:start + ctx]
        rows.append((ids, list(ids)))
    return rows


def encode_pair(tokenizer, pair: Pair) -> tuple[list[int], list[int]]:
    p = tokenizer(pair.prompt, add_special_tokens=False)["input_ids"]
    r = tokenizer(pair.response, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    return p + r, [IGNORE] * len(p) + r


def supervised_rows(tokenizer, pairs: list[Pair], ctx: int, seed: int) -> list[tuple[list[int], list[int]]]:
    """Pack whole examples (in a seeded random order) into rows of at most `ctx` tokens."""
    encoded = [encode_pair(tokenizer, p) for p in pairs]
    encoded = [e for e in encoded if len(e[0]) <= ctx]
    random.Random(seed).shuffle(encoded)
    rows, ids, labels = [], [], []
    for e_ids, e_labels in encoded:
        if len(ids) + len(e_ids) > ctx:
            rows.append((ids, labels))
            ids, labels = [], []
        ids = ids + e_ids
        labels = labels + e_labels
    if ids:
        rows.append((ids, labels))
    return rows


def collate(rows, pad_id: int, ctx: int) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.full((len(rows), ctx), pad_id, dtype=torch.long)
    y = torch.full((len(rows), ctx), IGNORE, dtype=torch.long)
    for i, (ids, labels) in enumerate(rows):
        x[i, :len(ids)] = torch.tensor(ids)
        y[i, :len(labels)] = torch.tensor(labels)
    return x, y


class RowSampler:
    """Endless seeded draws of rows from several pools with fixed probabilities."""

    def __init__(self, pools: dict[str, list], probs: dict[str, float], seed: int):
        self.pools = {k: v for k, v in pools.items() if v and probs.get(k, 0) > 0}
        total = sum(probs[k] for k in self.pools)
        self.names = list(self.pools)
        self.weights = [probs[k] / total for k in self.names]
        self.rng = random.Random(seed)
        self.order = {k: [] for k in self.names}

    def _next(self, name):
        if not self.order[name]:
            idx = list(range(len(self.pools[name])))
            self.rng.shuffle(idx)
            self.order[name] = idx
        return self.pools[name][self.order[name].pop()]

    def batch(self, size: int):
        return [self._next(self.rng.choices(self.names, self.weights)[0]) for _ in range(size)]


def weighted_prompt_loss(model, x: torch.Tensor, y: torch.Tensor, pad_id: int, weight: float) -> torch.Tensor:
    """Next-token loss on the labelled (response) tokens plus `weight` x the loss on prompt tokens, normalised by the
    total weight. A prompt token is an unlabelled non-pad input token: prompts hold no EOS (the pad id), and every
    EOS inside a row is a labelled response end."""
    total, w = weighted_loss_terms(model, x, y, pad_id, weight)
    return total / w.clamp_min(1.0)


def weighted_loss_terms(model, x: torch.Tensor, y: torch.Tensor, pad_id: int,
                        weight: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(sum of the weighted token losses, sum of the weights) of `weighted_prompt_loss`: a data-parallel step divides
    each process's sum by the weights of the whole batch, so the gradient is the one-process gradient."""
    logits = model(input_ids=x).logits[:, :-1]
    flat = logits.reshape(-1, logits.size(-1))
    target = y[:, 1:]
    prompt = (target == IGNORE) & (x[:, 1:] != pad_id)
    both = torch.where(prompt, x[:, 1:], target)
    nll = torch.nn.functional.cross_entropy(flat, both.reshape(-1), ignore_index=IGNORE, reduction="none")
    w = torch.where(prompt, weight, 1.0).reshape(-1) * (both.reshape(-1) != IGNORE)
    return (nll * w).sum(), w.sum()


def _process_group() -> tuple[int, int]:
    """(rank, world size) of the live torch.distributed group; (0, 1) without one."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def _data_parallel_backward(model, x, y, pad_id: int, weight: float) -> tuple[float, int]:
    """One data-parallel backward over this process's share of the batch: the weighted loss sum over the weights of
    the whole batch, the gradients summed over processes (one all-reduce of one flat buffer, the loss sum riding
    along). Every process then holds the one-process gradient of the whole batch and steps identically.
    Returns (the batch's loss, the batch's non-pad tokens)."""
    import torch.distributed as dist

    total, w = weighted_loss_terms(model, x, y, pad_id, weight)
    totals = torch.tensor([float(w), float((x != pad_id).sum())])  # the whole batch's weight and tokens
    dist.all_reduce(totals)
    (total / totals[0].clamp_min(1.0)).backward()
    params = [p for p in model.parameters() if p.grad is not None]
    flat = torch.cat([p.grad.reshape(-1) for p in params] + [total.detach().reshape(1) / totals[0].clamp_min(1.0)])
    dist.all_reduce(flat)
    offset = 0
    for p in params:
        n = p.grad.numel()
        p.grad.copy_(flat[offset:offset + n].view_as(p.grad))
        offset += n
    return float(flat[-1]), int(totals[1])


def lr_at(step: int, s: TrainSettings) -> float:
    if step < s.warmup:
        return s.lr * (step + 1) / s.warmup
    progress = (step - s.warmup) / max(1, s.steps - s.warmup)
    return s.lr * (s.min_lr_ratio + (1 - s.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress)))


@torch.no_grad()
def evaluate_loss(model, rows, pad_id: int, ctx: int, batch_size: int = 32) -> float:
    model.eval()
    total, count = 0.0, 0
    for i in range(0, len(rows), batch_size):
        x, y = collate(rows[i:i + batch_size], pad_id, ctx)
        x, y = x.to(model.device), y.to(model.device)
        out = model(input_ids=x, labels=y)
        n = int((y[:, 1:] != IGNORE).sum())
        total += float(out.loss) * n
        count += n
    model.train()
    return total / max(1, count)


def train(model, tokenizer, pools: dict[str, list], probs: dict[str, float], settings: TrainSettings,
          val_pools: dict[str, list] | None = None, on_checkpoint=None, progress: bool = True) -> dict:
    """Train in place; return a log with per-step loss, eval losses and measured tokens/s."""
    from tqdm.auto import tqdm

    # Under torch.distributed (build_multitask's processes > 1) each process takes its share of every batch, rows
    # rank, rank + world, ...: all draw the same batches from the same seeded sampler.
    rank, world = _process_group()
    torch.manual_seed(settings.seed)
    sampler = RowSampler(pools, probs, settings.seed)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    optim = torch.optim.AdamW(
        [{"params": decay, "weight_decay": settings.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=settings.lr, betas=(0.9, 0.95), eps=1e-8,
    )
    pad = tokenizer.pad_token_id
    log: dict = {"loss": [], "eval": [], "tokens": 0, "processes": world}
    model.train()
    start = time.perf_counter()
    n_steps = settings.steps if settings.stop_at is None else min(settings.stop_at, settings.steps)
    bar = tqdm(range(n_steps), desc="train densecode-tiny", unit="step", disable=not progress or rank != 0,
               dynamic_ncols=True)
    ema = None
    for step in bar:
        for group in optim.param_groups:
            group["lr"] = lr_at(step, settings)
        rows = sampler.batch(settings.batch_size)
        x, y = collate(rows[rank::world], pad, settings.ctx)
        x, y = x.to(model.device), y.to(model.device)
        optim.zero_grad(set_to_none=True)
        if world > 1:
            value, tokens = _data_parallel_backward(model, x, y, pad, settings.prompt_loss_weight)
        else:
            if settings.prompt_loss_weight:
                loss = weighted_prompt_loss(model, x, y, pad, settings.prompt_loss_weight)
            else:
                loss = model(input_ids=x, labels=y).loss
            loss.backward()
            value, tokens = float(loss.detach()), int((x != pad).sum())
        torch.nn.utils.clip_grad_norm_(model.parameters(), settings.grad_clip)
        optim.step()
        log["loss"].append(round(value, 4))
        log["tokens"] += tokens
        ema = value if ema is None else 0.95 * ema + 0.05 * value
        elapsed = time.perf_counter() - start
        bar.set_postfix(loss=f"{ema:.3f}", tok_s=f"{log['tokens'] / elapsed:.0f}")
        done = step + 1
        # Validation losses and checkpoints are rank 0's; the others wait for it at the next all-reduce.
        if rank == 0 and val_pools and (done % settings.eval_every == 0 or done == n_steps):
            losses = {k: round(evaluate_loss(model, v, pad, settings.ctx), 4) for k, v in val_pools.items() if v}
            log["eval"].append({"step": done, **losses})
            bar.write(f"step {done}: eval {losses}")
        if rank == 0 and on_checkpoint and done in settings.checkpoint_steps:
            on_checkpoint(done, model)
    log["seconds"] = round(time.perf_counter() - start, 1)
    log["tokens_per_s"] = round(log["tokens"] / max(1e-9, log["seconds"]), 1)
    return log
