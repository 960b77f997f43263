"""Sampling for every evaluation: `sample(spec, ...)` draws `spec.n` answers per prompt with the spec's decoding.

One function for `densecode eval` (MBPP, MBPP+, the robotics suite, a domain's held-out split) and the trainer's
held-out evals (densecode/eval/held_out.py builds their EvalSpecs), so an evaluation means the same decoding
wherever it runs.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

log = logging.getLogger("densecode.eval")

# A prompt must leave at least this many tokens of the model's context for the answer;
# one that does not is not generated for and scores as a failure ("prompt_too_long").
MIN_NEW_TOKENS = 16
PROMPT_TOO_LONG = "prompt_too_long"


@dataclass
class Sample:
    completion: str
    finish_reason: str  # eos | stop | length | prompt_too_long
    n_tokens: int = 0


def sample(spec, model, tokenizer, prompts: list[str], stop: list[str], *,
           progress: bool = True) -> tuple[list[list[Sample]], dict]:
    """spec.n samples per prompt (list per prompt), and the generation timing.

    Decoding: spec.temperature (0 = greedy, where top_p does not apply), spec.top_p, spec.max_new_tokens,
    spec.grammar (+ grammar_code_prefix), spec.batch_size and spec.seed (the sampler's, fixed per call)."""
    from densecode.generation import _context_limit, generate

    limit = _context_limit(model)
    fits = list(range(len(prompts)))
    if limit is not None:
        lengths = [len(ids) for ids in tokenizer(prompts, add_special_tokens=False)["input_ids"]]
        fits = [i for i, n in enumerate(lengths) if n + MIN_NEW_TOKENS <= limit]
        if len(fits) < len(prompts):
            log.warning("%d of %d prompts leave fewer than %d tokens of the model's %d-token context: "
                        "they are scored as failures (%s)", len(prompts) - len(fits), len(prompts),
                        MIN_NEW_TOKENS, limit, PROMPT_TOO_LONG)
    out = [[Sample("", PROMPT_TOO_LONG) for _ in range(spec.n)] for _ in prompts]
    start = time.perf_counter()
    gens = []
    if fits:
        gens = generate(model, tokenizer, [prompts[i] for i in fits], n=spec.n, max_new_tokens=spec.max_new_tokens,
                        temperature=spec.temperature, top_p=spec.top_p if spec.temperature > 0 else 1.0, top_k=0,
                        grammar=spec.grammar, stop=stop, batch_size=spec.batch_size, seed=spec.seed,
                        progress=progress, grammar_options={"code_prefix": spec.grammar_code_prefix or "auto"})
    seconds = time.perf_counter() - start
    for k, i in enumerate(fits):
        out[i] = [Sample(g.completion, g.finish_reason, len(g.token_ids)) for g in gens[k * spec.n:(k + 1) * spec.n]]
    tokens = sum(len(g.token_ids) for g in gens)
    return out, {"generate_s": round(seconds, 2), "generated_tokens": tokens,
                 "tokens_per_s": round(tokens / seconds, 1) if seconds > 0 else 0.0,
                 "prompts_too_long": len(prompts) - len(fits)}
