"""Batched sampling with a KV cache, optional SynCode grammar check/constraint.

An own decoding loop rather than `model.generate`: the grammar verdict must be
for the token actually emitted, and the recorded log-probabilities must be those
of the distribution the token was sampled from. Per step:

    logits -> top-k / top-p -> / temperature -> sample (argmax at temperature 0)
           -> grammar (constrain: parser check, resample on rejection) -> verdict

Constrained sampling draws from q restricted to the tokens the grammar accepts,
q = the top-k/top-p-truncated, temperature-scaled distribution ("truncate, then
constrain"); when no token of q's support is accepted, from the untruncated
distribution restricted to the accepted tokens. Two ways to get there:
`constrain_by="check_first"` (default) draws x ~ q and keeps it when the parser
accepts it; only on a rejection it computes SynCode's mask M and draws from
q restricted to M (re-drawing, with the rejected token removed, while the parser
rejects). Drawing first and falling back to the masked draw samples exactly from
q(x)/q(A) (A = accepted tokens): P(x) = q(x) + q(not A) q(x)/q(A) for x in A,
provided M contains A within q's support (SynCode's mask over-approximates the
parser; see docs/grammar.md for where it did not). `constrain_by="mask"` masks
every step and samples from the masked q, SynCode's own way (the reference the
check-first path is tested against).

`Generation.logprobs[i]` is the emitted token's log-probability under the
distribution its kept draw came from (truncation and temperature included; in
constrain mode the masked one when the token was redrawn after a rejection; at
temperature 0 the unscaled logits). `Generation.policy_logprobs[i]` is the
policy's own log-probability, log softmax(logits / T) without truncation or
grammar: what a PPO score pass would recompute (densecode.rl uses it as
log pi_old when `algo.score_pass` is off).

Rows that finish (EOS, stop string, or length) drop out of the batch, and their
KV-cache rows with them, so a batch costs what its longest live row costs. The
samples of one prompt share one prompt pass (its KV cache is copied to each row),
and the prompt pass computes the LM head at the last position only.
"""

from __future__ import annotations

import inspect
import logging
import time
from dataclasses import asdict, dataclass, field
from typing import get_args

import torch

from densecode.config import GrammarMode
from densecode.errors import DensecodeError

logger = logging.getLogger(__name__)

GRAMMAR_MODES = get_args(GrammarMode)  # generation.grammar


@dataclass
class Generation:
    prompt: str
    prompt_index: int
    completion: str
    token_ids: list[int]
    logprobs: list[float]
    # Per emitted token: accepted by the grammar? None where not checked (grammar off,
    # after a parser fallback, or outside the code the grammar can see).
    grammar_verdicts: list[bool | None] | None
    finish_reason: str  # eos | stop | length
    grammar_fallbacks: int = 0
    sample_index: int = 0
    # log softmax(logits / T) of each emitted token (no truncation, no grammar); the
    # EOS decision's own entry is `eos_policy_logprob` (EOS is not in token_ids).
    policy_logprobs: list[float] = field(default_factory=list)
    eos_policy_logprob: float | None = None
    # With collect_hidden: the last layer's hidden state each token was sampled from
    # ([len(token_ids) (+1 with EOS), H], policy dtype): a value head's input, V(s_t).
    hidden: torch.Tensor | None = None
    stop_token_id: int | None = None  # the end token sampled when finish_reason == "eos" (models may have several)
    # finish_reason "stop": the sampled tokens cut off with the stop string (the tokens that completed it) and
    # their policy log-probs, so a trainer can credit the stop decision as it credits EOS; `hidden` covers them.
    stop_ids: list[int] = field(default_factory=list)
    stop_policy_logprobs: list[float] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class _Row:
    prompt_index: int
    sample_index: int
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    policy_logprobs: list[float] = field(default_factory=list)
    eos_policy_logprob: float | None = None
    hidden: list[torch.Tensor] = field(default_factory=list)
    verdicts: list[bool | None] = field(default_factory=list)
    finish_reason: str = "length"
    stop_at: int | None = None  # character offset of the first stop string
    scanned_chars: int = 0
    fallbacks: int = 0  # grammar parser failures (the row then decodes unconstrained)
    stop_token_id: int | None = None


def eos_token_ids(model, tokenizer) -> set[int]:
    """EOS ids from the tokenizer and the model's generation config (Qwen has two)."""
    ids: set[int] = set()
    for source in (tokenizer.eos_token_id, getattr(getattr(model, "generation_config", None), "eos_token_id", None)):
        if source is None:
            continue
        ids.update(source if isinstance(source, (list, tuple)) else [source])
    return ids


def _context_limit(model) -> int | None:
    cfg = model.config
    for name in ("max_position_embeddings", "n_positions", "n_ctx", "seq_length"):
        value = getattr(cfg, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def filter_logits(logits: torch.Tensor, top_k: int, top_p: float) -> torch.Tensor:
    """Top-k then nucleus filtering on a [B, V] tensor (rejected entries -> -inf)."""
    if top_k and top_k > 0 and top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p < 1.0:
        logits = logits.masked_fill(_nucleus_drop(logits, top_p), float("-inf"))
    return logits


NUCLEUS_CANDIDATES = 256  # top tokens searched first for the nucleus; a full sort only when they hold < top_p


def _nucleus_drop(logits: torch.Tensor, top_p: float) -> torch.Tensor:
    """[B, V] bool: the tokens outside the nucleus (drop a token when the mass before it already reaches top_p;
    the first is always kept). The nucleus of a peaked distribution is a few tokens of a 49k vocabulary, so it
    is searched among the top NUCLEUS_CANDIDATES (a partial sort, ~10x cheaper than sorting the vocabulary);
    rows whose candidates hold less than top_p of the mass are sorted whole. Same set either way."""
    k = min(NUCLEUS_CANDIDATES, logits.shape[-1])
    top_logits, top_index = torch.topk(logits, k, dim=-1)  # sorted, descending
    probs = torch.exp(top_logits - torch.logsumexp(logits, dim=-1, keepdim=True))
    cumulative = probs.cumsum(-1)
    drop_top = (cumulative - probs) >= top_p
    drop = torch.ones_like(logits, dtype=torch.bool).scatter(-1, top_index, drop_top)
    short = (cumulative[:, -1] < top_p).nonzero().squeeze(-1)
    if len(short):
        sorted_logits, order = torch.sort(logits[short], dim=-1, descending=True)
        sorted_probs = torch.softmax(sorted_logits, dim=-1)
        drop_sorted = (sorted_probs.cumsum(-1) - sorted_probs) >= top_p
        drop[short] = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
    return drop


def cut_at_stop(tokenizer, token_ids: list[int], stop_at: int) -> list[int]:
    """Keep the tokens that start before character `stop_at` of the decoded completion.

    A token straddling the stop boundary is kept whole (e.g. Qwen's `)\\n` before `#`
    for stop "\\n#": dropping it would lose the `)`), so a completion may end with the
    first characters of a stop string but never contains a whole one.
    """
    keep = 0
    for k in range(len(token_ids)):
        start = len(tokenizer.decode(token_ids[:k], skip_special_tokens=True))
        if start >= stop_at:
            break
        keep = k + 1
    return token_ids[:keep]


def _find_stop(text: str, stop: list[str], start: int) -> int | None:
    hits = [i for s in stop if (i := text.find(s, start)) != -1]
    return min(hits) if hits else None


def _draw(logits: torch.Tensor, temperature: float, generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Draw from already truncated logits: (tokens [B], their log-probs under softmax(logits / T) [B])."""
    if temperature <= 0:
        logp = torch.log_softmax(logits, dim=-1)
        tokens = torch.argmax(logits, dim=-1)
    else:
        logp = torch.log_softmax(logits / temperature, dim=-1)
        tokens = torch.multinomial(logp.exp(), 1, generator=generator).squeeze(-1)
    return tokens, logp.gather(-1, tokens[:, None]).squeeze(-1)


def _truncate(logits: torch.Tensor, temperature: float, top_k: int, top_p: float) -> torch.Tensor:
    return logits if temperature <= 0 else filter_logits(logits, top_k, top_p)


def _sample(logits: torch.Tensor, temperature: float, top_k: int, top_p: float, generator) -> tuple[torch.Tensor, torch.Tensor]:
    """(tokens [B], their log-probs under the sampling distribution [B])."""
    return _draw(_truncate(logits, temperature, top_k, top_p), temperature, generator)


def _restrict(truncated: torch.Tensor, raw: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """Truncated logits restricted to `allowed`; the untruncated ones where that leaves nothing."""
    allowed = allowed.to(truncated.device)
    out = truncated.masked_fill(~allowed, float("-inf"))
    if not bool(torch.isfinite(out).any()):
        out = raw.masked_fill(~allowed, float("-inf"))
    return out


PROBE_BEFORE_MASK = 4  # candidates checked one by one before SynCode's mask is computed


def _first_accepted(grammar, row: int, logits: torch.Tensor, temperature: float, generator,
                    mask_fn=None) -> int | None:
    """An exact draw from softmax(logits / T) restricted to the tokens the parser accepts.

    Gumbel-max order: sorting logits / T + Gumbel noise gives the order in which
    repeated draws without replacement would come up, so the first token in that order
    the parser accepts is distributed as the restricted distribution. Candidates are
    checked in that order; after PROBE_BEFORE_MASK rejections `mask_fn()` (SynCode's
    mask, a superset of the accepted tokens) skips candidates it rules out, which leaves
    the first accepted token, hence the distribution, unchanged. At temperature 0 the
    order is by logit (greedy).
    """
    finite = torch.isfinite(logits).nonzero().squeeze(-1)
    if len(finite) == 0:
        return None
    keys = logits[finite]
    if temperature > 0:
        u = torch.rand(keys.shape, generator=generator, device=keys.device).clamp_(min=1e-20)
        keys = keys / temperature - torch.log(-torch.log(u))
    order = finite[torch.argsort(keys, descending=True)].tolist()
    probe = order[:PROBE_BEFORE_MASK]
    for tok, ok in zip(probe, grammar.accepted(row, probe)):
        if ok:
            return tok
    rest = order[PROBE_BEFORE_MASK:]
    if mask_fn is not None and rest:
        mask = mask_fn()
        if mask is not None:
            allowed = mask.tolist()
            rest = [t for t in rest if t < len(allowed) and allowed[t]]
    for start in range(0, len(rest), 16):
        candidates = rest[start:start + 16]
        for tok, ok in zip(candidates, grammar.accepted(row, candidates)):
            if ok:
                return tok
    return None


def _resample_rejected(grammar, alive, truncated, raw, tokens, logps, temperature, generator, mask_fn=None):
    """constrain: redraw the rows whose token the parser rejects, exactly from q restricted to A.

    q = softmax(truncated / T) (truncation, and in "mask" mode SynCode's mask, already
    applied); when no token of q's support is accepted, the untruncated `raw` logits.
    The recorded log-prob is under the logits the token came from, without the tokens
    the parser rejected this step.
    """
    for b in grammar.reject(alive, tokens.tolist()):
        row = alive[b]
        masker = (lambda b=b: mask_fn(b)) if mask_fn is not None else None
        source = truncated[b].clone()
        source[tokens[b]] = float("-inf")
        tok = _first_accepted(grammar, row, source, temperature, generator, masker)
        if tok is None:
            source = raw[b].clone()
            if mask_fn is not None and mask_fn(b) is not None:
                source = source.masked_fill(~mask_fn(b).to(source.device), float("-inf"))
            source[tokens[b]] = float("-inf")
            tok = _first_accepted(grammar, row, source, temperature, generator, masker)
        if tok is None:
            continue  # nothing acceptable: the row keeps its token, verdict False
        rejected = [t for t, v in grammar.rows[row].checked.items() if v is False]
        if rejected:
            source[rejected] = float("-inf")
        scaled = source / temperature if temperature > 0 else source
        tokens[b] = tok
        logps[b] = torch.log_softmax(scaled, -1)[tok]
    return tokens, logps


def _constrain_check_first(grammar, alive, raw, truncated, tokens, logps, temperature, generator):
    """Keep draws the parser accepts; redraw only the rejected rows (mask computed only if needed)."""
    vocab = raw.shape[-1]

    def mask_fn(b):
        return grammar.masks(alive, [b], vocab)[0]

    return _resample_rejected(grammar, alive, truncated, raw, tokens, logps, temperature, generator, mask_fn)


def _accepts(model, argument: str) -> bool:
    try:
        return argument in inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return False


def _empty_cache():
    try:
        from transformers import DynamicCache

        return DynamicCache()
    except ImportError:  # pragma: no cover - very old transformers
        return None


def _select_cache(past, index: torch.Tensor):
    """Keep batch rows `index` of a KV cache (DynamicCache or legacy tuples)."""
    if hasattr(past, "batch_select_indices"):
        past.batch_select_indices(index)
        return past
    return tuple(tuple(t.index_select(0, index) for t in layer) for layer in past)


@torch.inference_mode()
def _generate_batch(model, tokenizer, prompts: list[str], rows: list[_Row], *, max_new_tokens: int, temperature: float,
                    top_p: float, top_k: int, stops: list[list[str]], eos_ids: set[int], grammar, generator,
                    on_token=None, collect_hidden: bool = False) -> int:
    """Fill `rows` (one per prompt in `prompts`; stops[i]: row i's stop strings) in place; return the batch's grammar
    fallbacks."""
    device = next(model.parameters()).device
    # Samples of one prompt share its prompt pass: the prompt is run once and its KV cache copied to each of
    # its rows (RL draws n samples per prompt; the prompt pass is most of a long chat prompt's cost).
    distinct = list(dict.fromkeys(prompts))
    expand = None
    if len(distinct) < len(prompts):
        position = {p: i for i, p in enumerate(distinct)}
        expand = torch.tensor([position[p] for p in prompts], device=device)
    enc = tokenizer(distinct, return_tensors="pt", padding=True)
    input_ids = enc["input_ids"].to(device)
    attention_mask = enc["attention_mask"].to(device)
    limit = _context_limit(model)
    budget = max_new_tokens
    if limit is not None:
        budget = min(budget, limit - input_ids.shape[1])
        if budget <= 0:
            raise DensecodeError(
                f"prompt of {input_ids.shape[1]} tokens leaves no room in the model's {limit}-token context "
                "(shorten the prompt or use a model with a longer context)"
            )
    use_positions = _accepts(model, "position_ids")
    # Only the last position's logits are sampled from: at the prompt pass the LM head over every prompt
    # position would cost B x L x V (SmolLM2, 16 x 200 x 49k: 2 s of a 20 s batch).
    last_logits_only = _accepts(model, "logits_to_keep")
    position_ids = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)
    alive = list(range(len(rows)))  # batch position -> row index
    if grammar is not None:
        grammar.begin(prompts)
    past = _empty_cache()
    step_ids, step_mask, step_pos = input_ids, attention_mask, position_ids
    for step in range(budget):
        kwargs = {"input_ids": step_ids, "attention_mask": step_mask, "past_key_values": past, "use_cache": True}
        if use_positions:
            kwargs["position_ids"] = step_pos
        if last_logits_only:
            kwargs["logits_to_keep"] = 1
        if collect_hidden:
            kwargs["output_hidden_states"] = True
        out = model(**kwargs)
        hidden = out.hidden_states[-1][:, -1, :] if collect_hidden else None
        past = out.past_key_values
        raw = out.logits[:, -1, :].float()
        if step == 0 and expand is not None:  # prompt pass done once per distinct prompt: one row per sample
            past = _select_cache(past, expand)
            raw = raw.index_select(0, expand)
            hidden = hidden.index_select(0, expand) if hidden is not None else None
            step_mask, step_pos = step_mask.index_select(0, expand), step_pos.index_select(0, expand)
        policy_logp = torch.log_softmax(raw / temperature if temperature > 0 else raw, dim=-1)
        truncated = _truncate(raw, temperature, top_k, top_p)
        grammar_start = time.process_time()
        if grammar is not None and grammar.masks_every_step:
            truncated = grammar.process(alive, truncated.clone())
            for b, r in enumerate(alive):  # nothing left after truncation: the untruncated masked logits
                mask = grammar.rows[r].mask
                if mask is not None and not bool(torch.isfinite(truncated[b]).any()):
                    truncated[b] = raw[b].masked_fill(~mask.to(raw.device), float("-inf"))
        draw_start = time.process_time()
        tokens, logps = _draw(truncated, temperature, generator)
        grammar_start += time.process_time() - draw_start  # the plain draw is not grammar work
        if grammar is not None and grammar.mode == "constrain":
            if grammar.masks_every_step:
                tokens, logps = _resample_rejected(grammar, alive, truncated, raw, tokens, logps, temperature,
                                                   generator, lambda b, alive=alive: grammar.rows[alive[b]].mask)
            else:
                tokens, logps = _constrain_check_first(grammar, alive, raw, truncated, tokens, logps, temperature,
                                                       generator)
        verdicts = grammar.observe(alive, tokens.tolist()) if grammar is not None else None
        if grammar is not None and grammar.stats is not None:  # the grammar's CPU time, the plain draw excluded
            grammar.stats["cpu_s"] = grammar.stats.get("cpu_s", 0.0) + time.process_time() - grammar_start
        policy_token_logp = policy_logp.gather(-1, tokens[:, None]).squeeze(-1).tolist()
        finished = []
        for b, r in enumerate(alive):
            row = rows[r]
            tok = int(tokens[b])
            if hidden is not None:
                row.hidden.append(hidden[b])
            if tok in eos_ids:
                row.finish_reason, row.stop_token_id = "eos", tok
                row.eos_policy_logprob = policy_token_logp[b]
                finished.append(b)
                continue
            row.token_ids.append(tok)
            row.logprobs.append(float(logps[b]))
            row.policy_logprobs.append(policy_token_logp[b])
            if verdicts is not None:
                row.verdicts.append(verdicts[b])
            stop = stops[r]
            if stop:
                text = tokenizer.decode(row.token_ids, skip_special_tokens=True)
                hit = _find_stop(text, stop, max(0, row.scanned_chars - max(map(len, stop)) + 1))
                row.scanned_chars = len(text)
                if hit is not None:
                    row.finish_reason, row.stop_at = "stop", hit
                    finished.append(b)
        if on_token is not None:
            on_token(len(alive))
        if len(finished) == len(alive) or step == budget - 1:
            break
        keep = [b for b in range(len(alive)) if b not in set(finished)]
        next_tokens = tokens.clone()
        step_mask = torch.cat([step_mask, torch.ones_like(step_mask[:, :1])], dim=-1)
        step_pos = step_pos[:, -1:] + 1
        if finished:
            index = torch.tensor(keep, device=device)
            past = _select_cache(past, index)
            next_tokens = next_tokens.index_select(0, index)
            step_mask = step_mask.index_select(0, index)
            step_pos = step_pos.index_select(0, index)
            alive = [alive[b] for b in keep]
        step_ids = next_tokens[:, None]
    if grammar is not None:
        for row, fallbacks in zip(rows, grammar.end()):
            row.fallbacks = fallbacks
    return sum(row.fallbacks for row in rows)


def generate(model, tokenizer, prompts: list[str], *, n: int = 1, max_new_tokens: int = 128, temperature: float = 1.0,
             top_p: float = 1.0, top_k: int = 0, grammar: str = "off", stop: list[str] | None = None,
             batch_size: int = 16, seed: int | None = None, progress: bool = True, grammar_options: dict | None = None,
             collect_hidden: bool = False, prompt_stops: list[list[str]] | None = None) -> list[Generation]:
    """`n` completions per prompt, prompt-major: result[i * n + j] is sample j of prompt i.

    grammar: off | check (record per-token verdicts, logits untouched) | constrain
    (only tokens the grammar accepts). `grammar_options` go to
    `densecode.grammar.GrammarProcessor` (e.g. `code_prefix`, `constrain_by`).
    collect_hidden: keep each sampled token's last hidden state (`Generation.hidden`).
    prompt_stops: each prompt's own stop strings, instead of `stop` (a multi-task batch whose tasks end their
    responses differently, e.g. at a newline and at a new `def`).
    """
    if grammar not in GRAMMAR_MODES:
        raise DensecodeError(f"grammar must be one of {', '.join(GRAMMAR_MODES)}; got {grammar!r}")
    if n < 1 or max_new_tokens < 1 or batch_size < 1:
        raise DensecodeError(f"n, max_new_tokens and batch_size must be >= 1 (got {n}, {max_new_tokens}, {batch_size})")
    if temperature < 0 or not 0 < top_p <= 1 or top_k < 0:
        raise DensecodeError(f"need temperature >= 0, 0 < top_p <= 1, top_k >= 0 (got {temperature}, {top_p}, {top_k})")
    stop = [s for s in (stop or []) if s]
    if prompt_stops is not None and len(prompt_stops) != len(prompts):
        raise DensecodeError(f"prompt_stops has {len(prompt_stops)} lists for {len(prompts)} prompts")
    per_prompt = [[s for s in p if s] for p in prompt_stops] if prompt_stops is not None else None
    if tokenizer.pad_token_id is None:
        from densecode.models import prepare_tokenizer

        prepare_tokenizer(tokenizer)
    if tokenizer.padding_side != "left":
        tokenizer.padding_side = "left"
    device = next(model.parameters()).device
    generator = None
    if seed is not None:
        generator = torch.Generator(device=device).manual_seed(seed)
    processor = None
    eos_ids = eos_token_ids(model, tokenizer)
    if grammar != "off":
        from densecode.grammar import GrammarProcessor

        processor = GrammarProcessor(tokenizer, mode=grammar, eos_ids=eos_ids, **(grammar_options or {}))
    rows = [_Row(p, j) for p in range(len(prompts)) for j in range(n)]
    was_training = model.training
    model.eval()
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(rows), desc=f"generate (grammar {grammar})", unit="seq", dynamic_ncols=True)
    tokens_done = 0
    started = time.perf_counter()

    def count(k: int) -> None:
        nonlocal tokens_done
        tokens_done += k

    try:
        for start in range(0, len(rows), batch_size):
            batch = rows[start:start + batch_size]
            fallbacks = _generate_batch(
                model, tokenizer, [prompts[r.prompt_index] for r in batch], batch,
                max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p, top_k=top_k,
                stops=[per_prompt[r.prompt_index] if per_prompt is not None else stop for r in batch],
                eos_ids=eos_ids, grammar=processor, generator=generator, on_token=count,
                collect_hidden=collect_hidden,
            )
            if fallbacks:
                logger.warning("batch %d: the grammar parser failed on %d row(s); those rows fell back to "
                               "unconstrained decoding (verdicts None from there on)", start // batch_size, fallbacks)
            if bar is not None:
                bar.update(len(batch))
                bar.set_postfix(tok_s=f"{tokens_done / max(time.perf_counter() - started, 1e-9):.0f}")
    finally:
        if bar is not None:
            bar.close()
        if was_training:
            model.train()

    results = []
    for row in rows:
        ids, logprobs, verdicts, policy = row.token_ids, row.logprobs, row.verdicts, row.policy_logprobs
        stop_ids, stop_policy = [], []
        if row.stop_at is not None:
            ids = cut_at_stop(tokenizer, ids, row.stop_at)
            stop_ids, stop_policy = row.token_ids[len(ids):], policy[len(ids):]
            logprobs, verdicts, policy = logprobs[:len(ids)], verdicts[:len(ids)], policy[:len(ids)]
        results.append(Generation(
            prompt=prompts[row.prompt_index],
            prompt_index=row.prompt_index,
            completion=tokenizer.decode(ids, skip_special_tokens=True),
            token_ids=list(ids),
            logprobs=logprobs,
            grammar_verdicts=verdicts if processor is not None else None,
            finish_reason=row.finish_reason,
            grammar_fallbacks=row.fallbacks,
            sample_index=row.sample_index,
            stop_token_id=row.stop_token_id,
            policy_logprobs=list(policy),
            eos_policy_logprob=row.eos_policy_logprob,
            hidden=(_stack_hidden(row.hidden, len(ids) + len(stop_ids) + (row.finish_reason == "eos"))
                    if row.hidden else None),
            stop_ids=list(stop_ids),
            stop_policy_logprobs=list(stop_policy),
        ))
    return results


def _stack_hidden(states: list[torch.Tensor], n: int) -> torch.Tensor:
    """[n, H]: the first n per-token states. n = 0 when a stop string matched at the response's first characters
    (every sampled token was cut): an empty [0, H], as for any other response length."""
    return torch.stack(states[:n]) if n else states[0].new_empty((0, *states[0].shape))
