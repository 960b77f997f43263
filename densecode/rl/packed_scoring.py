"""Score a finished rollout once, without padding: log pi_ref, V (critic) and, when needed, log pi_old.

The rollout batch is laid out [left-padded prompt | right-padded response] so that "the last R
positions are the response" holds for every row; a forward pass over that layout computes every
padding position too (on the default robotics run about 40% of the positions: prompts of 19-53
tokens, responses of 1-129). Here each row is laid out again as its real tokens only, prompt then
response, without the last token (it predicts nothing); rows are sorted by length and cut into
chunks (`plan_chunks`) whose right padding is small. Right padding needs no attention mask under
causal attention (a real token never attends to a later position), so every model runs its plain
causal path.

Only what is used is computed: the body's last hidden state at the positions that predict a
response token; the LM head on those positions alone (not on the prompt, not on padding) for
log-probs, the value head on them for V. The head is applied as `model.get_output_embeddings()`
on `hidden_states[-1]`, which each chunk checks against the model's own logits at one position
(`logits_to_keep=1`), so a model that does something else between them (a logit scale, a soft
cap) is scored through its full logits instead.

The result equals a forward pass over the padded layout within float noise
(tests/rl/test_score_once.py); the reference and the critic run one after the other on each chunk.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass

import torch

from densecode.rl.ppo import logprobs_from_logits

logger = logging.getLogger(__name__)

# A chunk's fixed cost (one forward call per model) in token positions, measured on densecode-tiny
# (4 x 192, 1 thread, a robotics batch): ~4 ms per call against ~0.08 ms per position (45 chunks cost
# 0.3 s more CPU than 10; 32 to 128 here all give 5-10 chunks and the same time within noise).
CHUNK_OVERHEAD_POSITIONS = 64


@dataclass
class Chunk:
    """Some rows of the batch, right-padded, and where their response tokens are scored."""

    input_ids: torch.Tensor  # [b, L] prompt + response (without its last token), right-padded
    at_row: torch.Tensor  # [n] chunk row of each scored response token
    at_pos: torch.Tensor  # [n] the position that predicts it
    to_row: torch.Tensor  # [n] its batch row
    to_col: torch.Tensor  # [n] its response column
    tokens: torch.Tensor  # [n] the token

    @property
    def positions(self) -> int:
        return self.input_ids.numel()


def plan_chunks(lengths: list[int], max_rows: int, overhead: int = CHUNK_OVERHEAD_POSITIONS) -> list[list[int]]:
    """Rows (indices into `lengths`) grouped into chunks of at most `max_rows`, least total cost.

    Cost of a chunk: its rows x its longest length (the positions computed, padding included) plus
    `overhead`. Rows sorted by length, longest first; the best split of a sorted list into runs is
    found by dynamic programming over the split points (n x max_rows steps)."""
    order = sorted((i for i in range(len(lengths)) if lengths[i] > 0), key=lambda i: -lengths[i])
    n = len(order)
    if n == 0:
        return []
    max_rows = max(1, int(max_rows))
    best = [0.0] + [float("inf")] * n  # best[j]: least cost of chunking order[:j]
    cut = [0] * (n + 1)
    for j in range(1, n + 1):
        for i in range(max(0, j - max_rows), j):
            cost = best[i] + (j - i) * lengths[order[i]] + overhead
            if cost < best[j]:
                best[j], cut[j] = cost, i
    chunks, j = [], n
    while j > 0:
        chunks.append(order[cut[j]:j])
        j = cut[j]
    return chunks[::-1]


def pack(batch, max_rows: int, pad_id: int = 0) -> list[Chunk]:
    """The batch's rows as right-padded chunks (see the module docstring); rows without a response are left out."""
    R = batch.response_ids.shape[1]
    Lq = batch.input_ids.shape[1] - R
    prompt_lens = batch.attention_mask[:, :Lq].sum(-1).tolist()
    response_lens = batch.response_mask.sum(-1).long().tolist()
    ids = batch.input_ids.cpu()
    if any(q == 0 and r > 0 for q, r in zip(prompt_lens, response_lens)):
        # Nothing would predict the first response token (a sampler needs a prompt token to start from).
        raise ValueError("a rollout row has a response but an empty prompt: nothing scores its first token")
    # Positions computed per row: the prompt and all response tokens but the last.
    lengths = [q + r - 1 if r > 0 else 0 for q, r in zip(prompt_lens, response_lens)]
    chunks = []
    for rows in plan_chunks(lengths, max_rows):
        L = max(lengths[i] for i in rows)
        input_ids = torch.full((len(rows), L), pad_id, dtype=torch.long)
        at_row, at_pos, to_row, to_col = [], [], [], []
        for k, i in enumerate(rows):
            q, r = prompt_lens[i], response_lens[i]
            input_ids[k, :lengths[i]] = ids[i, Lq - q: Lq + r - 1]
            at_row += [k] * r
            at_pos += range(q - 1, q - 1 + r)  # position q - 1 + j predicts response token j
            to_row += [i] * r
            to_col += range(r)
        to_row_t, to_col_t = torch.tensor(to_row), torch.tensor(to_col)
        chunks.append(Chunk(input_ids, torch.tensor(at_row), torch.tensor(at_pos), to_row_t, to_col_t,
                            ids[to_row_t, Lq + to_col_t]))
    return chunks


def _logits_to_keep_arg(model) -> str | None:
    """The forward argument that limits the LM head to the last positions, if the model has one."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    try:
        params = inspect.signature(base.forward).parameters
    except (TypeError, ValueError):
        return None
    for name in ("logits_to_keep", "num_logits_to_keep"):
        if name in params:
            return name
    return None


_warned_heads: set[str] = set()


def _hidden_and_logits(model, input_ids: torch.Tensor, at_row, at_pos, want_logits: bool):
    """(last hidden state at the scored positions [n, H], logits there [n, V] or None)."""
    keep = _logits_to_keep_arg(model)
    kwargs = {keep: 1} if keep else {}
    # All ones: under causal attention the right padding is never attended to by a real token, and
    # an all-ones mask keeps the model on its plain causal path (no per-position mask).
    ones = torch.ones_like(input_ids)
    out = model(input_ids=input_ids, attention_mask=ones, output_hidden_states=True, use_cache=False, **kwargs)
    hidden = out.hidden_states[-1]
    picked = hidden[at_row, at_pos]
    if not want_logits:
        return picked, None
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if keep and head is not None:
        mine, theirs = head(hidden[:, -1, :]).float(), out.logits[:, -1, :].float()
        if torch.allclose(mine, theirs, rtol=1e-4, atol=1e-4 * max(1.0, float(theirs.abs().max()))):
            return picked, head(picked)
        name = type(model).__name__
        if name not in _warned_heads:
            _warned_heads.add(name)
            logger.warning("%s: the output embedding on the last hidden state is not the model's logits; "
                           "scoring rollouts through the full logits (slower)", name)
    if keep:
        out = model(input_ids=input_ids, attention_mask=ones, use_cache=False)
    return picked, out.logits[at_row, at_pos]


@contextlib.contextmanager
def fused_activations(*models):
    """GPT-2's tanh-approximated GELU as one fused kernel while scoring.

    transformers' NewGELUActivation ("gelu_new") writes 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
    as seven elementwise ops, about a fifth of a densecode-tiny forward on a CPU; torch's
    gelu(approximate="tanh") is the same function in one (transformers' own "gelu_pytorch_tanh",
    equal within float rounding). Swapped for the `with` block only, so training is untouched."""
    try:
        from transformers.activations import NewGELUActivation, PytorchGELUTanh
    except ImportError:  # pragma: no cover - other transformers versions: nothing to swap
        yield
        return
    swapped = []
    for model in models:
        if model is None:
            continue
        for parent in model.modules():
            for name, child in parent.named_children():
                if type(child) is NewGELUActivation:
                    swapped.append((parent, name, child))
    fused = PytorchGELUTanh()
    try:
        for parent, name, _ in swapped:
            setattr(parent, name, fused)
        yield
    finally:
        for parent, name, child in swapped:
            setattr(parent, name, child)


def score_packed(batch, *, max_rows: int, pad_id: int = 0, policy=None, value_head=None, critic=None,
                 reference=None, reference_context: Callable[[], AbstractContextManager] | None = None,
                 ) -> dict[str, torch.Tensor]:
    """[B, R] tensors (zero where there is no response token) for what is asked:

    - "logprobs" (and "values" from `value_head` on the policy's hidden state when there is no
      critic) with `policy`;
    - "values" from `critic`'s hidden state through `value_head`;
    - "ref_logprobs" from `reference` (a model), run inside `reference_context()` (e.g. a LoRA
      model's disable_adapter) when given.
    All under `batch.temperature`, no grad. Also "positions": how many each model computed."""
    B, R = batch.response_ids.shape
    device = batch.response_ids.device
    wanted = {"logprobs": policy is not None, "ref_logprobs": reference is not None,
              "values": value_head is not None and (critic is not None or policy is not None)}
    result = {k: torch.zeros((B, R), dtype=torch.float32) for k, on in wanted.items() if on}
    if not result:
        return {}
    T = batch.temperature  # as PolicyWithValue.forward and ReferencePolicy.logprobs
    chunks = pack(batch, max_rows, pad_id)
    # Positions each model computes here, and in the padded layout (the score pass's and the update's).
    result["positions"] = torch.tensor(float(sum(c.positions for c in chunks)))
    with torch.inference_mode(), fused_activations(policy, critic, reference):
        for chunk in chunks:
            where = (chunk.to_row, chunk.to_col)
            ids = chunk.input_ids.to(device)
            at = (chunk.at_row.to(device), chunk.at_pos.to(device))
            tokens = chunk.tokens.to(device)
            if policy is not None:
                hidden, logits = _hidden_and_logits(policy, ids, *at, want_logits=True)
                result["logprobs"][where] = logprobs_from_logits(logits, tokens, T).float().cpu()
                if critic is None and value_head is not None:
                    result["values"][where] = value_head(hidden).float().cpu()
            if critic is not None and value_head is not None:
                hidden, _ = _hidden_and_logits(critic, ids, *at, want_logits=False)
                result["values"][where] = value_head(hidden).float().cpu()
            if reference is not None:
                with reference_context() if reference_context is not None else contextlib.nullcontext():
                    _, logits = _hidden_and_logits(reference, ids, *at, want_logits=True)
                result["ref_logprobs"][where] = logprobs_from_logits(logits, tokens, T).float().cpu()
    # Plain tensors (not inference tensors): the update uses them next to tensors that need grad.
    return {k: v.to(device) for k, v in result.items()}
