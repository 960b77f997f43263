"""A training run's held-out evaluation as EvalSpecs.

The trainer's evals (`Domain.evaluate`: greedy, and a sampled pass at a fixed seed when
`tasks.eval_sampled_temperature` is set) decode through the same `EvalSpec` -> `sampling.sample` call as
`densecode eval`; this module says which specs: the run's own generation settings (`generation.*`: top_p, stop,
grammar), `tasks.eval_max_new_tokens` (or `generation.max_new_tokens`) and a batch of at least 16 prompts.
`densecode eval --domain NAME --model RUN` uses the EvalSpec's own defaults instead (documented in
docs/evaluation.md), so pass the run's settings as flags to reproduce a run's number.
"""

from __future__ import annotations

from dataclasses import dataclass

from densecode.eval.sampling import sample
from densecode.eval.spec import EvalSpec


@dataclass(frozen=True)
class HeldOutPass:
    name: str  # "greedy" (the eval_temperature pass at 0), "eval" (at a nonzero one) or "sampled"
    spec: EvalSpec


def pass_spec(domain: str, generation, options, *, temperature: float, seed: int) -> EvalSpec:
    """One pass's decoding: one answer per task at `temperature`, the sampler seeded with `seed`."""
    from densecode.rl.settings import SamplingParams

    gen = SamplingParams.from_config(generation)  # the config's generation settings, typed, one set of defaults
    return EvalSpec(domain=domain, n=1, temperature=float(temperature), top_p=gen.top_p,
                    max_new_tokens=options.eval_max_new_tokens or gen.max_new_tokens, grammar=gen.grammar,
                    grammar_code_prefix=gen.grammar_code_prefix, batch_size=max(gen.batch_size, 16), seed=int(seed))


def held_out_passes(domain: str, generation, options, *, seed: int) -> list[HeldOutPass]:
    """The passes of one held-out eval: `eval_temperature` at the run's seed, then, when
    `eval_sampled_temperature` is set, a sampled pass at `eval_seed`: the same draws before and after training,
    so its change is the policy's."""
    t = float(options.eval_temperature)
    passes = [HeldOutPass("greedy" if t == 0 else "eval", pass_spec(domain, generation, options, temperature=t,
                                                                    seed=seed))]
    if options.eval_sampled_temperature:
        passes.append(HeldOutPass("sampled", pass_spec(domain, generation, options,
                                                       temperature=float(options.eval_sampled_temperature),
                                                       seed=int(options.eval_seed))))
    return passes


def complete(spec: EvalSpec, model, tokenizer, prompts: list[str], stop: list[str]) -> list[str]:
    """One answer per prompt (spec.n must be 1): the completions of `sampling.sample`, no progress bar."""
    if spec.n != 1:
        raise ValueError(f"complete() draws one answer per prompt; the spec asks for n={spec.n}")
    samples, _ = sample(spec, model, tokenizer, prompts, stop, progress=False)
    return [ss[0].completion for ss in samples]
