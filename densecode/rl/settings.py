"""The trainer's settings and the rollout's sampling parameters: one typed object each, built once from the config.

The loop reads `TrainerSettings` and passes `SamplingParams` to the sampler as they are, so every rollout of a
run samples with the same top_p / top_k / stop strings (no second place with its own defaults).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SamplingParams:
    """How rollouts are sampled (generation.*); the temperature is the algorithm's, per step."""

    max_new_tokens: int
    top_p: float
    top_k: int
    grammar: str  # off | check | constrain
    grammar_code_prefix: str
    stop: tuple[str, ...]
    train_stop_tokens: bool  # append the tokens that completed a stop string to the trained response
    batch_size: int  # rows per generate() call (memory vs speed; results do not depend on it)

    @classmethod
    def from_config(cls, gen=None) -> SamplingParams:
        """From `generation:` (None: its defaults, e.g. a domain built without a config: no second set of defaults)."""
        if gen is None:
            from densecode.config import GenerationConfig

            gen = GenerationConfig()
        return cls(max_new_tokens=int(gen.max_new_tokens), top_p=float(gen.top_p), top_k=int(gen.top_k),
                   grammar=str(gen.grammar), grammar_code_prefix=str(gen.grammar_code_prefix),
                   stop=tuple(gen.stop), train_stop_tokens=bool(gen.train_stop_tokens),
                   batch_size=int(gen.batch_size))

    def sampler_kwargs(self, temperature: float, prompt_stops: list[list[str]] | None = None) -> dict:
        """The keyword arguments of densecode.rl.rollout.sample_responses (and of any drop-in sampler);
        prompt_stops (each prompt's own stop strings, from a multi-task source) only when given."""
        kwargs = {"max_new_tokens": self.max_new_tokens, "temperature": temperature, "top_p": self.top_p,
                  "top_k": self.top_k, "grammar": self.grammar, "stop": list(self.stop), "batch_size": self.batch_size,
                  "grammar_options": {"code_prefix": self.grammar_code_prefix}}
        return {**kwargs, "prompt_stops": prompt_stops} if prompt_stops is not None else kwargs


@dataclass(frozen=True)
class TrainerSettings:
    """What the loop itself reads (train.*, and the update's algo.* knobs shared by every optimiser)."""

    steps: int
    batch_size: int  # prompts (PPO) / groups (GRPO) per step, per process
    seed: int
    lr: float
    vf_lr: float  # the value model's lr (algo.ppo.vf_lr, else train.lr)
    weight_decay: float
    log_every: int
    rollouts_every: int
    eval_every: int
    save_every: int
    eval_tasks: int
    log_reference_kl: bool
    num_minibatches: int
    grad_accum_steps: int
    max_grad_norm: float
    early_stop_kl: float  # CleanRL's target_kl; 0 = off
    skip_zero_gradient: bool  # no optimizer step on a minibatch whose gradient is exactly 0
    skip_zero_advantage_rows: bool  # forward/backward only on the rows algo.signal_rows names
    score_pass: bool
    code_regions: str

    @classmethod
    def from_config(cls, cfg) -> TrainerSettings:
        t, a = cfg.train, cfg.algo
        return cls(steps=int(t.steps), batch_size=int(t.batch_size), seed=int(t.seed), lr=float(t.lr),
                   vf_lr=float(a.ppo.vf_lr or t.lr), weight_decay=float(t.weight_decay), log_every=int(t.log_every),
                   rollouts_every=int(t.rollouts_every), eval_every=int(t.eval_every), save_every=int(t.save_every),
                   eval_tasks=int(t.eval_tasks), log_reference_kl=bool(t.log_reference_kl),
                   num_minibatches=int(a.num_minibatches), grad_accum_steps=int(a.grad_accum_steps),
                   max_grad_norm=float(a.max_grad_norm), early_stop_kl=float(a.early_stop_kl),
                   skip_zero_gradient=bool(a.skip_zero_gradient),
                   skip_zero_advantage_rows=bool(a.skip_zero_advantage_rows),
                   score_pass=bool(a.score_pass), code_regions=cfg.reward.code_regions)


def seed_for(*parts: int) -> int:
    """A deterministic 31-bit seed from integers (step, process, ...): resume needs no RNG replay."""
    h = 0x9E3779B9
    for p in parts:
        h = (h * 1_000_003 + int(p) + 0x7F4A7C15) & 0x7FFFFFFF
    return h


def due(every: int, step: int, total: int) -> bool:
    """A periodic action (log, rollouts, eval) is due after `step`: every `every` steps and at the last (0 = never)."""
    return every > 0 and (step % every == 0 or step == total)
