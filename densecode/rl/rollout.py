"""Rollouts: sample responses, then score every response token once.

A rollout batch records, per response token: its id, the policy log-prob under the
temperature the token was sampled with (the number the PPO ratio divides by; taken
from the sampling pass, or recomputed by a forward pass with `algo.score_pass`), the
reference log-prob, the value, and the SynCode grammar verdict (check mode). Tensors are laid out as

    input_ids = [ left-padded prompt | right-padded response ]      shape [B, Lq + R]

so "the last R positions are the response" holds for every row, and response
tensors are [B, R] with `response_mask` marking real tokens.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch


@dataclass
class Response:
    """One sampled response, whatever sampler produced it."""

    prompt_index: int
    token_ids: list[int]
    finish_reason: str  # "eos" | "stop" | "length"
    completion: str = ""
    grammar_verdicts: list[bool | None] | None = None
    stop_token_id: int | None = None  # the end token sampled (finish_reason "eos"); the trainer appends it
    # From the sampling pass (densecode.generation), when the sampler provides them:
    # log softmax(logits / T) of each token (+ the EOS decision's when it ended on EOS),
    # and the last hidden state each token was sampled from (a shared value head's input).
    policy_logprobs: list[float] | None = None
    hidden: Any = None  # torch.Tensor [len(policy_logprobs), H]
    # finish_reason "stop": the tokens that completed the stop string (cut from token_ids by the sampler);
    # end_tokens: how many trailing token_ids are end-of-response actions appended for the update (their text is
    # not the response's: rewards are computed without them).
    stop_ids: list[int] = field(default_factory=list)
    end_tokens: int = 0


@dataclass
class RolloutBatch:
    prompts: list[str]
    tasks: list[dict]
    responses: list[Response]
    input_ids: torch.Tensor  # [B, L]
    attention_mask: torch.Tensor  # [B, L]
    position_ids: torch.Tensor  # [B, L]
    response_ids: torch.Tensor  # [B, R]
    response_mask: torch.Tensor  # [B, R] float
    prompt_index: torch.Tensor  # [B] which prompt (GRPO groups)
    temperature: float
    logprobs: torch.Tensor | None = None  # [B, R] old policy, under `temperature`
    step: int = 0  # the training step that sampled it
    ref_logprobs: torch.Tensor | None = None  # [B, R]
    values: torch.Tensor | None = None  # [B, R]
    grammar_verdicts: torch.Tensor | None = None  # [B, R] +1 accepted, −1 rejected, 0 unknown
    # Filled by the reward step:
    samples: list[Any] = field(default_factory=list)
    rewards: torch.Tensor | None = None  # [B, R] total per token (the assembler's, KL included)
    components: dict[str, torch.Tensor] = field(default_factory=dict)  # name -> [B, R] unweighted values
    sequence_rewards: torch.Tensor | None = None  # [B] sum of `rewards` over the response
    reward_outputs: Any = None  # the assembler's RewardBatch (for explain/logging)
    # Filled by the algorithm:
    advantages: torch.Tensor | None = None  # [B, R]
    returns: torch.Tensor | None = None  # [B, R]
    # Filled by the trainer from a task source's `kl_loss_coefs` hook (None = the algorithm's own coefficient):
    kl_coefs: torch.Tensor | None = None  # [B] each row's weight of the algorithm's KL loss term (GRPO's k3)

    @property
    def size(self) -> int:
        return self.input_ids.shape[0]

    @property
    def truncated(self) -> list[bool]:
        return [r.finish_reason == "length" for r in self.responses]

    def select(self, idx) -> RolloutBatch:
        """The rows `idx` (a minibatch); tensors and per-row lists are indexed, the rest shared."""
        idx_list = [int(i) for i in (idx.tolist() if torch.is_tensor(idx) else idx)]
        index = torch.tensor(idx_list, dtype=torch.long)
        B = self.size
        kwargs = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if torch.is_tensor(v) and v.dim() > 0 and v.shape[0] == B:
                v = v.index_select(0, index.to(v.device))
            elif isinstance(v, list) and len(v) == B:
                v = [v[i] for i in idx_list]
            elif isinstance(v, dict) and f.name == "components":
                v = {k: t.index_select(0, index.to(t.device)) for k, t in v.items()}
            kwargs[f.name] = v
        return RolloutBatch(**kwargs)

    SEQUENCE_FIELDS = ("input_ids", "attention_mask", "position_ids")  # [B, L]: left-padded prompt + response

    def trimmed(self) -> RolloutBatch:
        """The same rows without the columns that are padding in every one of them: columns left of the
        longest prompt, response columns right of the longest response. A minibatch of short rows then
        costs its own length, not the whole batch's; every loss is a masked mean, so nothing else changes."""
        keep_from = int((self.attention_mask.sum(0) == 0).long().cumprod(0).sum())
        R = self.response_ids.shape[1]
        keep_to = int(self.response_mask.sum(0).nonzero().max()) + 1 if bool(self.response_mask.any()) else 1
        if keep_from == 0 and keep_to == R:
            return self
        kwargs = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if f.name in self.SEQUENCE_FIELDS:  # the prompt and the response: trimmed at both ends
                v = v[:, keep_from:v.shape[1] - (R - keep_to)]
            elif torch.is_tensor(v) and v.dim() >= 2 and v.shape[1] == R:
                v = v[:, :keep_to]
            elif f.name == "components":
                v = {k: t[:, :keep_to] if t.dim() >= 2 and t.shape[1] == R else t for k, t in v.items()}
            kwargs[f.name] = v
        return RolloutBatch(**kwargs)

    def to(self, device) -> RolloutBatch:
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if torch.is_tensor(v):
                setattr(self, f.name, v.to(device))
        return self


# ---------------------------------------------------------------- sampling


def sample_responses(model, tokenizer, prompts: list[str], *, n: int, max_new_tokens: int, temperature: float,
                     top_p: float, top_k: int, grammar: str, stop: list[str], batch_size: int, seed: int,
                     progress: bool = False, grammar_options: dict | None = None,
                     collect_hidden: bool = True, prompt_stops: list[list[str]] | None = None) -> list[Response]:
    """n samples per prompt through densecode.generation (KV cache, stop strings, SynCode).

    Each response carries the sampling pass's own policy log-probs and hidden states,
    so `score_batch(score_pass=False)` need not run the policy again.
    """
    from densecode.generation import generate

    gens = generate(model, tokenizer, prompts, n=n, max_new_tokens=max_new_tokens, temperature=temperature,
                    top_p=top_p, top_k=top_k, grammar=grammar, stop=stop, batch_size=batch_size, seed=seed,
                    progress=progress, grammar_options=grammar_options, collect_hidden=collect_hidden,
                    prompt_stops=prompt_stops)
    responses = []
    for g in gens:
        policy = list(g.policy_logprobs)
        if g.finish_reason == "eos" and g.eos_policy_logprob is not None:
            policy.append(float(g.eos_policy_logprob))  # the trainer appends the EOS token itself
        stop_ids = [int(t) for t in g.stop_ids]
        if stop_ids:
            policy.extend(float(x) for x in g.stop_policy_logprobs)  # used only if the trainer appends them
        responses.append(Response(
            prompt_index=int(g.prompt_index),
            token_ids=[int(t) for t in g.token_ids],
            finish_reason=str(g.finish_reason),
            completion=g.completion,
            grammar_verdicts=list(g.grammar_verdicts) if g.grammar_verdicts is not None else None,
            policy_logprobs=policy if temperature > 0 else None,
            hidden=g.hidden,
            stop_token_id=g.stop_token_id,
            stop_ids=stop_ids,
        ))
    return responses


# ---------------------------------------------------------------- tensors


def encode_prompts(tokenizer, prompts: list[str]) -> list[list[int]]:
    # Same encoding as densecode.generation (tokenizer defaults, e.g. a BOS for Llama).
    return [tokenizer(p)["input_ids"] for p in prompts]


def build_batch(tokenizer, prompts: list[str], tasks: list[dict], responses: list[Response],
                temperature: float, device=None, prompt_ids: list[list[int]] | None = None) -> RolloutBatch:
    """Pad prompts left and responses right into one [B, Lq + R] tensor."""
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    prompt_ids = prompt_ids if prompt_ids is not None else encode_prompts(tokenizer, prompts)
    rows_q = [prompt_ids[r.prompt_index] for r in responses]
    Lq = max(len(q) for q in rows_q)
    # A response of 0 tokens still needs one slot (masked out) so every row has a last position.
    R = max(1, max(len(r.token_ids) for r in responses))
    B = len(responses)
    input_ids = torch.full((B, Lq + R), pad, dtype=torch.long)
    attention_mask = torch.zeros((B, Lq + R), dtype=torch.long)
    response_mask = torch.zeros((B, R), dtype=torch.float32)
    verdicts = torch.zeros((B, R), dtype=torch.float32)
    has_verdicts = False
    for i, (q, r) in enumerate(zip(rows_q, responses)):
        input_ids[i, Lq - len(q) : Lq] = torch.tensor(q, dtype=torch.long)
        attention_mask[i, Lq - len(q) : Lq] = 1
        n = len(r.token_ids)
        if n:
            input_ids[i, Lq : Lq + n] = torch.tensor(r.token_ids, dtype=torch.long)
            attention_mask[i, Lq : Lq + n] = 1
            response_mask[i, :n] = 1
        if r.grammar_verdicts:
            has_verdicts = True
            for j, v in enumerate(r.grammar_verdicts[:n]):
                verdicts[i, j] = 0.0 if v is None else (1.0 if v else -1.0)
    # Positions count real tokens only, so left padding does not shift the prompt.
    position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)
    batch = RolloutBatch(
        prompts=[prompts[r.prompt_index] for r in responses],
        tasks=[tasks[r.prompt_index] for r in responses],
        responses=responses,
        input_ids=input_ids,
        attention_mask=attention_mask,
        position_ids=position_ids,
        response_ids=input_ids[:, Lq:].clone(),
        response_mask=response_mask,
        prompt_index=torch.tensor([r.prompt_index for r in responses], dtype=torch.long),
        temperature=float(temperature),
        grammar_verdicts=verdicts if has_verdicts else None,
    )
    return batch.to(device) if device is not None else batch


def _from_sampling(responses: list[Response], R: int) -> bool:
    return all(r.policy_logprobs is not None and len(r.policy_logprobs) >= len(r.token_ids) for r in responses)


def score_batch(policy_value, reference, batch: RolloutBatch, chunk_size: int = 16, with_values: bool = True,
                score_pass: bool = False) -> dict[str, float]:
    """Fill batch.logprobs, .values and .ref_logprobs (no grad).

    score_pass=True: log pi_old and V from a forward pass of the policy over the
    finished batch (in chunks), SynCode-free and the same computation as the update's;
    the reference runs over the same chunks.
    score_pass=False: log pi_old from the sampling pass (`Response.policy_logprobs`:
    same weights, same temperature; differs from a forward pass by float noise of the
    KV-cached computation) and V from the value head on the sampling pass's hidden
    states (shared value head). What is left to compute — the reference's log-probs, a
    separate critic's values, and the policy's when the sampler did not provide them —
    runs in one pass over the batch's real tokens (densecode.rl.packed_scoring: no
    padding, the LM head on response positions only, chunks of at most `chunk_size` rows).
    Returns which sources were used.
    """
    from densecode.rl.value_head import PolicyWithValue

    module: PolicyWithValue = policy_value
    if score_pass:
        return _score_with_forward_pass(module, reference, batch, chunk_size, with_values)
    from densecode.rl.packed_scoring import score_packed

    R = batch.response_ids.shape[1]
    mask = batch.response_mask
    reuse = _from_sampling(batch.responses, R)
    want_values = with_values and module.value_head is not None
    values_from_hidden = (reuse and want_values and module.critic is None
                          and all(r.hidden is not None and len(r.hidden) >= len(r.token_ids) for r in batch.responses))
    need_policy_pass = not reuse or (want_values and not values_from_hidden and module.critic is None)
    critic_pass = want_values and module.critic is not None
    ref_model, ref_context = reference.scoring_model(module.policy) if reference is not None else (None, None)
    scored = score_packed(batch, max_rows=chunk_size, policy=module.policy if need_policy_pass else None,
                          value_head=module.value_head if want_values and not values_from_hidden else None,
                          critic=module.critic if critic_pass else None, reference=ref_model,
                          reference_context=ref_context)
    if reuse:
        batch.logprobs = to_padded([np.asarray(r.policy_logprobs[:len(r.token_ids)], dtype=np.float32)
                                    for r in batch.responses], R, mask.device) * mask
    else:
        batch.logprobs = scored["logprobs"] * mask
    if values_from_hidden:
        batch.values = _values_from_hidden(module.value_head, batch) * mask
    else:
        batch.values = scored["values"] * mask if "values" in scored else None
    batch.ref_logprobs = scored["ref_logprobs"] * mask if "ref_logprobs" in scored else None
    sources = {"score/policy_pass": float(need_policy_pass), "score/logprobs_from_sampling": float(reuse),
               "score/values_from_sampling": float(values_from_hidden), "score/critic_pass": float(critic_pass)}
    if "positions" in scored:  # per model run; a padded pass would compute batch.input_ids.numel()
        sources["score/positions_per_model"] = float(scored["positions"])
        sources["score/padded_positions"] = float(batch.input_ids.numel())
    return sources


@torch.no_grad()
def _values_from_hidden(head, batch: RolloutBatch) -> torch.Tensor:
    """The shared value head on the hidden states the sampling pass kept."""
    R = batch.response_ids.shape[1]
    device = batch.response_mask.device
    H = batch.responses[0].hidden.shape[-1]
    hidden = torch.zeros((batch.size, R, H), dtype=head.summary.weight.dtype, device=device)
    for i, r in enumerate(batch.responses):
        n = len(r.token_ids)
        if n:
            hidden[i, :n] = r.hidden[:n].to(device=device, dtype=hidden.dtype)
    return head(hidden).float()


@torch.no_grad()
def _score_with_forward_pass(module, reference, batch: RolloutBatch, chunk_size: int,
                             with_values: bool) -> dict[str, float]:
    """algo.score_pass: the policy (with values) and the reference over the padded batch, in chunks."""
    mask = batch.response_mask
    logps, vals, refs = [], [], []
    for start in range(0, batch.size, chunk_size):
        sl = slice(start, start + chunk_size)
        args = (batch.input_ids[sl], batch.attention_mask[sl], batch.position_ids[sl], batch.response_ids[sl])
        out = module(*args, temperature=batch.temperature, with_values=with_values)
        logps.append(out.logprobs)
        if out.values is not None:
            vals.append(out.values)
        if reference is not None:
            refs.append(reference.logprobs(module.policy, *args, temperature=batch.temperature))
    batch.logprobs = torch.cat(logps) * mask
    batch.values = torch.cat(vals) * mask if vals else None
    batch.ref_logprobs = torch.cat(refs) * mask if refs else None
    return {"score/policy_pass": 1.0, "score/logprobs_from_sampling": 0.0, "score/values_from_sampling": 0.0,
            "score/critic_pass": 0.0}


def to_padded(arrays: list[np.ndarray], R: int, device=None) -> torch.Tensor:
    out = torch.zeros((len(arrays), R), dtype=torch.float32)
    for i, a in enumerate(arrays):
        a = np.asarray(a, dtype=np.float32)[:R]
        out[i, : len(a)] = torch.from_numpy(a)
    return out.to(device) if device is not None else out


def sampled_stop_token(response, tokenizer) -> int | None:
    """The end token a response stopped on: the sampled one, else (a sampler that does not record it)
    the tokenizer's single EOS id; None when the response did not end on an end token."""
    if response.finish_reason != "eos":
        return None
    sampled = response.stop_token_id
    if sampled is not None:
        return int(sampled)
    eos = tokenizer.eos_token_id
    return int(eos) if eos is not None else None


def reward_samples(batch: RolloutBatch, sample_builder, tokenizer, code_regions: str) -> list:
    """The reward function's input: one Sample per response, with its logπ_old and logπ_ref (the KL component's)
    and the sampler's grammar verdicts."""
    samples = []
    for i, r in enumerate(batch.responses):
        n = len(r.token_ids) - r.end_tokens  # the response's own tokens; appended stop-string tokens get no reward
        s = sample_builder(batch.prompts[i], r.token_ids[:n], tokenizer, batch.tasks[i], code_regions=code_regions,
                           truncated=r.finish_reason == "length")
        s.logprobs = batch.logprobs[i, :n].detach().float().cpu().numpy()
        s.ref_logprobs = (batch.ref_logprobs[i, :n].detach().float().cpu().numpy()
                          if batch.ref_logprobs is not None else s.logprobs.copy())
        if r.grammar_verdicts is not None:
            s.grammar_verdicts = list(r.grammar_verdicts) + [None] * (n - len(r.grammar_verdicts))
        samples.append(s)
    return samples


def append_stop_tokens(responses: list[Response], tokenizer, stop_strings: bool = False) -> None:
    """Append to each response that ended on an end token that token (sampled_stop_token), in place; with
    stop_strings also, to a response cut at a stop string, the tokens that completed it (`end_tokens` counts
    them: they are trained as the stop decision but are not part of the text the rewards judge)."""
    for r in responses:
        stop_token = sampled_stop_token(r, tokenizer)
        if stop_token is not None:
            r.token_ids = list(r.token_ids) + [stop_token]
        elif stop_strings and r.finish_reason == "stop" and r.stop_ids and not r.end_tokens:
            r.token_ids = list(r.token_ids) + list(r.stop_ids)
            r.end_tokens = len(r.stop_ids)
