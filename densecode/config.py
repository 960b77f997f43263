"""Dataclass configuration, YAML files in `configs/`, and `--set key=value` overrides.

A config is a `DensecodeConfig` made of section dataclasses. YAML files mirror the
sections (`train: {lr: 1e-6}`); a file may start from another with `base: other.yaml`
(path relative to the file). Overrides use dotted keys: `--set train.lr=1e-6`,
values parsed as YAML scalars/lists. Unknown keys and wrong types raise
`ConfigError` naming the key and the file (or `--set`).

Sections are owned by the modules that use them; adding a field is adding it to
the dataclass here with a default and a comment saying why that default.
"""

from __future__ import annotations

import dataclasses
import importlib.resources
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from densecode.errors import ConfigError

# The default configs ship inside the package as data (in a checkout, densecode/configs is a link to the
# top-level configs/, the one copy), so `--config robotics` resolves in any install, from any folder.
CONFIG_DIR = Path(str(importlib.resources.files("densecode") / "configs"))


# Choice fields are Literal types: a value outside one is a ConfigError naming the key (exit 2), and the modules
# that use a choice read its values from here (typing.get_args) instead of keeping a list of their own.
GrammarMode = Literal["off", "check", "constrain"]
CodePrefix = Literal["auto", "prompt", "none"]
RewardMode = Literal["dense", "sparse"]
CodeRegions = Literal["auto", "completion", "fenced"]
AlgoName = Literal["ppo", "grpo", "rft"]
Credit = Literal["gae", "outcome", "outcome+dense", "outcome+local"]
GRPOCredit = Literal["outcome", "outcome+dense", "outcome+local"]  # GRPO has no critic: no gae
LossAggregation = Literal["token", "sequence"]
TruncationMasking = Literal["conditional", "all", "none"]
TruncationEvidence = Literal["cut_proof", "any_verdict"]
SequenceReward = Literal["outcome", "mean", "sum"]
RepetitionTest = Literal["paper", "any_period"]
DiversityMetric = Literal["distinct_4", "edit_distance"]
ValueModel = Literal["shared", "separate"]
MixedPrecision = Literal["no", "bf16", "fp16"]


@dataclass
class ModelConfig:
    # "densecode-tiny" is the embedded offline default; any local dir or hub id works.
    name_or_path: str = "densecode-tiny"
    dtype: str = "auto"  # auto | float32 | bfloat16 | float16 (auto: bf16 on GPUs that support it, else fp32)
    trust_remote_code: bool = False  # run a hub model's own modelling code (only for checkpoints you trust)
    gradient_checkpointing: bool = False  # recompute activations in backward: less memory, ~30% slower steps
    # Train with the token embeddings and the LM head frozen (the transformer blocks learn; with LoRA the
    # adapters already leave them alone).
    freeze_embeddings: bool = False
    # Value model: "shared" = scalar head on the policy's last hidden state; "separate" = own critic copy. The
    # default is what `densecode train` gives: every shipped config says separate, because through a shared backbone
    # the value loss flows back into the policy and destabilised the tiny one (configs/robotics.yaml).
    value_model: ValueModel = "separate"


@dataclass
class LoraConfig:
    enabled: bool = False  # train LoRA adapters instead of every weight (the reference does, for 1.5B+ models)
    r: int = 16  # adapter rank (reference)
    alpha: int = 32  # scaling alpha / r = 2 (reference)
    dropout: float = 0.05  # on the adapter input (reference)
    # Names follow Llama/Qwen; GPT-2 style models use c_attn/c_proj/c_fc.
    target_modules: list[str] = field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    )


@dataclass
class GenerationConfig:
    max_new_tokens: int = 128  # response length limit; a response cut here has finish_reason "length"
    temperature: float = 1.0  # rollout sampling temperature (PPO; GRPO's schedule is algo.grpo.temperature_schedule)
    top_p: float = 0.95  # nucleus sampling (reference 0.95); 1.0 = off
    top_k: int = 0  # 0 = off
    # The SynCode Python grammar (docs/grammar.md): check = record each token's verdict, constrain = sample only
    # the tokens it accepts.
    grammar: GrammarMode = "off"
    # Code the grammar sees before the completion: auto (the prompt if it parses as Python,
    # else after its last ``` fence, else nothing) | prompt | none.
    grammar_code_prefix: CodePrefix = "auto"
    # Strings that end a response (cut before them); empty = the domain's own stop strings at eval.
    stop: list[str] = field(default_factory=list)
    # Train the tokens that completed a stop string as the response's end action, as the EOS token is: without
    # them the update never credits stopping, so reinforcing answers raises every token but the stop, and
    # responses grow. Their text is not judged (the rewards see the response cut before the stop string).
    train_stop_tokens: bool = False
    batch_size: int = 16  # rows per generate() call (memory vs speed; results do not depend on it)


@dataclass
class RewardConfig:
    mode: RewardMode = "dense"  # sparse = the same components summed onto the last token
    # Where a response's code is (densecode/rewards/sample.py): completion = it continues the prompt's code; fenced =
    # its ``` blocks; auto = told from the prompt and the response.
    code_regions: CodeRegions = "auto"
    # Merged over the domain's default weights (the reference weights: code lint/syntax/dfg 0.1,
    # tests 0.7, kl 0.1; robotics lint/syntax 0.1, sim 0.8, kl 0.9); a weight of 0 switches a
    # component off. `missing_eos: W` puts -W on the last token of a response cut by the length limit.
    weights: dict[str, float] = field(default_factory=dict)
    # Per-component options, e.g. {"tests": {"fail_penalty": -0.3}, "syntax": {"source": "python"}}.
    components: dict[str, dict] = field(default_factory=dict)
    # In sparse mode these components stay per token (PPO keeps the KL penalty dense either way) and every other
    # one moves to the last token: listing all components but one moves only that one (per-component placement).
    sparse_keep_dense: list[str] = field(default_factory=lambda: ["kl"])


@dataclass
class PPOConfig:
    """PPO on per-token rewards with a value model (densecode/rl/ppo.py); names follow TRL's PPOConfig."""

    epochs: int = 4  # passes over each rollout batch (TRL num_ppo_epochs)
    gamma: float = 1.0  # discount of the per-token rewards (reference 1.0: the return is the sum to the end)
    lam: float = 0.95  # GAE lambda (reference 0.95)
    clip_eps: float = 0.2  # TRL cliprange
    clip_eps_high: float = 0.2  # upper ratio bound 1 + clip_eps_high; = clip_eps is PPO's symmetric clip
    value_clip: float = 0.3  # TRL cliprange_value
    vf_coef: float = 1.0  # weight of the value loss in the total loss (reference 1.0)
    ent_coef: float = 0.0  # entropy bonus weight (reference 0: none)
    whiten_advantages: bool = True  # normalise advantages over the batch (reference: yes; rewards are not)
    # Learning rate of the value head (and separate critic); 0 = train.lr. A zero-initialised
    # head at an RL-sized policy lr (1e-6..1e-5) takes hundreds of steps to fit the returns.
    vf_lr: float = 0.0
    # The reward's KL weight (reward.weights.kl) adapted towards target_kl (Ziegler et al.); the
    # controller measures the KL with the estimator the reward's kl component uses.
    adaptive_kl: bool = False
    target_kl: float = 6.0  # the adaptive controller's target sequence KL
    kl_horizon: int = 10000  # the controller's horizon in prompts (Ziegler et al.): larger = slower changes
    # How each token's advantage is made (densecode/rl/credit.py, docs/rewards.md): gae = the critic's GAE over
    # all token rewards; outcome = the task's verifiable outcome minus the mean of the prompt's other responses,
    # on every token, plus the KL penalty's return-to-go; no critic. outcome+dense adds, per component, the
    # return-to-go of its located findings minus their leave-one-out baseline (PRIME-style); outcome+local adds
    # each finding on its own tokens only (RLTF-style).
    credit: Credit = "gae"
    samples_per_prompt: int = 1  # responses per prompt (the outcome credit's leave-one-out baseline)
    lam_critic: float | None = None  # λ of the critic's return targets apart from the policy's (VC-PPO: 1.0)
    # outcome credit: the weight of the advantage of responses below their baseline (1 = plain; 0 = only the
    # responses above it are reinforced, RFT-like). Pushing failures down raised the entropy of densecode-tiny.
    negative_scale: float = 1.0
    dense_scale: float = 0.5  # β: weight of the outcome+dense / outcome+local token term (outcome advantage sd = 1)
    value_warmup_steps: int = 0  # credit gae: the first N steps train the critic alone (no policy update)


@dataclass
class TemperatureScheduleConfig:
    """MicroCoder's staged, diversity-driven sampling temperature (densecode/rl/temperature.py)."""

    stages: list[float] = field(default_factory=lambda: [0.6, 1.2])  # never ramps: always one of these
    # Step at which each later stage starts (one fewer than stages; ignored for one stage = a fixed temperature).
    switch_steps: list[int] = field(default_factory=lambda: [140])  # paper: ~step 140
    metric: DiversityMetric = "distinct_4"  # the diversity measure (densecode/rl/diversity.py)
    window: int = 8  # steps of diversity history behind level and trend
    floor: float = 0.25  # level below this (collapsed onto few outputs) -> next stage at once
    min_slope: float = 0.0  # "falling" = trend below -min_slope per step ...
    min_drop: float = 0.1  # ... and the level at least this far below the stage's first full window
    # Initial choice (off when empty): after the first full window, start at stage k = how many of these
    # levels lie above the measured level (non-increasing, one per later stage) ...
    initial_levels: list[float] = field(default_factory=list)
    # ... plus one stage when that window's trend is below -initial_falling_slope (null = trend not used).
    initial_falling_slope: float | None = None
    # Step down one stage when outputs turn chaotic (null = off): the diversity level above `ceiling`, or the
    # share of unparsable outputs (syntax component) rising by `unparsable_rise` over the stage's first window.
    ceiling: float | None = None
    unparsable_rise: float | None = None  # the rise of the unparsable share that steps down (null = off)


@dataclass
class GRPOConfig:
    """MicroCoder-GRPO (densecode/rl/grpo.py); names follow TRL's GRPOConfig where it has one."""

    group_size: int = 8  # G responses per prompt (TRL num_generations)
    num_iterations: int = 1  # passes over each rollout batch (TRL num_iterations; GRPO's mu)
    clip_eps: float = 0.2  # TRL epsilon
    clip_eps_high: float = 0.28  # DAPO clip-higher (TRL epsilon_high)
    beta: float = 0.0  # k3 KL loss term against the reference; MicroCoder/DAPO use none (TRL beta)
    loss_aggregation: LossAggregation = "token"  # token (DAPO) | sequence (GRPO)
    # r_i of the group advantage: outcome = the task's verifiable outcome (tests pass rate, sim success);
    # mean | sum = the per-token mean / sum of the weighted dense rewards.
    sequence_reward: SequenceReward = "outcome"
    truncation_masking: TruncationMasking = "conditional"  # conditional (MicroCoder) | all (DAPO overlong filtering) | none
    # "Judged incorrect" (keeps a truncated response's advantage) from: cut_proof = evidence the cut did not
    # cause (docs/grpo.md) | any_verdict = any verdict component's verdict (the rule before issue #22).
    truncation_evidence: TruncationEvidence = "cut_proof"
    # The components whose verdicts (ComponentOutput.incorrect / errors) can judge a response incorrect (see
    # truncation_evidence); null = every component that gives one, so a new component counts with no edit here.
    verdict_components: list[str] | None = None
    truncation_rho: float = 0.3  # share of eligible truncated responses masked (paper: 10% and 30% appear)
    repetition_test: RepetitionTest = "paper"  # paper: last `window` tokens == the `window` before | any_period: period 1..w
    # m of the repetition test. The paper's 128 is for long responses; the paper test needs 2m tokens, so
    # 64 fits generation.max_new_tokens 128 (a warning says when 2m > max_new_tokens: it can never fire).
    repetition_window: int = 64
    # Token credit next to the group advantage (densecode/rl/credit.py, as algo.ppo.credit): outcome = none;
    # outcome+dense = per component, its located findings' return-to-go minus their leave-one-out baseline;
    # outcome+local = each finding on its own tokens. Weighted by dense_scale.
    credit: GRPOCredit = "outcome"
    # Multiplies the group advantage of responses below their group's mean (1 = GRPO; 0 = only the responses
    # above it are reinforced, as algo.ppo.negative_scale: pushing failures down on a near-deterministic model
    # spreads their mass over the vocabulary and raised the entropy, docs/results.md).
    negative_scale: float = 1.0
    # densecode's first extension: a token-level group z-score of the attributable parts of these components.
    dense: bool = False
    dense_scale: float = 0.5  # weight of the token-level term (credit's or dense's) next to the group advantage
    # syntax/lint by their values, others (sim, tests) by their located diagnostics only (the line that raised).
    dense_components: list[str] = field(default_factory=lambda: ["syntax", "lint", "sim", "tests"])
    # MicroCoder uses beta = 0: a KL weight in the reward (reward.weights.kl, e.g. from a PPO config) is an
    # error for GRPO unless this is true.
    allow_reward_kl: bool = False
    temperature_schedule: TemperatureScheduleConfig = field(default_factory=TemperatureScheduleConfig)


@dataclass
class RFTConfig:
    """Rejection-sampling fine-tuning / expert iteration (densecode/rl/rft.py): the baseline RL must beat."""

    samples_per_prompt: int = 4  # k responses per prompt
    min_outcome: float = 1.0  # keep a response whose verifiable outcome is at least this (1.0 = it passes)
    epochs: int = 1  # supervised passes over each step's kept responses


@dataclass
class AlgoConfig:
    name: AlgoName = "ppo"  # which of the sections below is used
    # The update loop, shared: each epoch/iteration splits the batch into minibatches (one optimizer step each).
    num_minibatches: int = 1
    grad_accum_steps: int = 1  # micro-batches per minibatch (gradients accumulated: same result, less memory)
    max_grad_norm: float = 1.0  # gradient clipping by global norm; a non-finite norm skips the step
    # Stop a step's epochs early once approx_kl(π_old ‖ π) of a minibatch exceeds this (CleanRL's target_kl;
    # 0 = off): several epochs without letting one batch move the policy too far.
    early_stop_kl: float = 0.0
    # A minibatch whose gradient is exactly 0 (every advantage 0: outcome credit on groups that all agree) takes
    # no optimizer step: Adam's moments would otherwise keep moving the weights along the last signal's
    # direction on data that carries none. Off = torch's Adam, TRL and CleanRL (a step on every minibatch).
    skip_zero_gradient: bool = False
    # Run the update's forward/backward only on the rows whose loss can have a gradient (the algorithm's
    # `signal_rows`: PPO with outcome credit and no entropy or value term, RFT) and scale each micro-batch's loss
    # so its gradient is the whole micro-batch's: the same update, float rounding aside, for a fraction of the
    # cost when most advantages are 0 (negative_scale 0, groups that all agree). Logged per-token statistics
    # (entropy, clipfrac) then cover the updated rows only. One process only.
    skip_zero_advantage_rows: bool = False
    # Rollout scoring: false = log pi_old (and a shared head's V) from the sampling pass itself, only the
    # reference runs a forward pass; true = a separate no-grad forward pass for them (the earlier behaviour).
    score_pass: bool = False
    ppo: PPOConfig = field(default_factory=PPOConfig)
    grpo: GRPOConfig = field(default_factory=GRPOConfig)
    rft: RFTConfig = field(default_factory=RFTConfig)


# Keys of earlier configs: loading one is an error that names its replacement.
RENAMED_KEYS: dict[str, str] = {
    "algo.ppo_epochs": "algo.ppo.epochs (GRPO: algo.grpo.num_iterations)",
    "algo.gamma": "algo.ppo.gamma",
    "algo.lam": "algo.ppo.lam",
    "algo.clip_eps": "algo.ppo.clip_eps (GRPO: algo.grpo.clip_eps)",
    "algo.clip_eps_high": "algo.ppo.clip_eps_high (GRPO: algo.grpo.clip_eps_high)",
    "algo.value_clip": "algo.ppo.value_clip",
    "algo.vf_coef": "algo.ppo.vf_coef",
    "algo.ent_coef": "algo.ppo.ent_coef",
    "algo.whiten_advantages": "algo.ppo.whiten_advantages",
    "algo.vf_lr": "algo.ppo.vf_lr",
    "algo.kl_estimator": "reward.components.kl.estimator (the reward's kl component chooses k1/k3)",
    "algo.kl_coef": "reward.weights.kl (algo.kl_coef was never read; GRPO's KL loss term is algo.grpo.beta)",
    "algo.adaptive_kl": "algo.ppo.adaptive_kl",
    "algo.target_kl": "algo.ppo.target_kl",
    "algo.kl_horizon": "algo.ppo.kl_horizon",
    "algo.group_size": "algo.grpo.group_size",
    "algo.loss_aggregation": "algo.grpo.loss_aggregation",
    "algo.truncation_masking": "algo.grpo.truncation_masking",
    "algo.truncation_rho": "algo.grpo.truncation_rho",
    "algo.repetition_window": "algo.grpo.repetition_window",
    "algo.dense_in_grpo": "algo.grpo.dense",
    "algo.dense_in_grpo_scale": "algo.grpo.dense_scale",
    "algo.dense_in_grpo_components": "algo.grpo.dense_components",
    "algo.grpo_kl_coef": "algo.grpo.beta",
    "algo.grpo_clip_eps_high": "algo.grpo.clip_eps_high",
    "algo.grpo_sequence_reward": "algo.grpo.sequence_reward",
    "algo.temperature_schedule": "algo.grpo.temperature_schedule",
    "generation.missing_eos_penalty": "reward.weights.missing_eos (the penalty's size, >= 0; a reward component now)",
}


@dataclass
class TrainingConfig:
    steps: int = 100  # total optimiser steps (one rollout batch each)
    batch_size: int = 16  # prompts per step (PPO) / groups per step (GRPO)
    lr: float = 1e-5  # policy learning rate (AdamW); the value head's is algo.ppo.vf_lr
    weight_decay: float = 0.0  # AdamW weight decay
    seed: int = 0  # seeds sampling, minibatch order and task draws (a step's seeds derive from it: exact resume)
    output_dir: str = "runs/densecode"  # the run directory (config.yaml, metrics.jsonl, checkpoints/, ...)
    save_every: int = 50  # checkpoint every N steps (and always at the end); 0 = only at the end
    eval_every: int = 25  # held-out eval every N steps, at step 0 and at the end; 0 = never
    eval_tasks: int = 64  # held-out tasks per eval (the same tasks every time)
    log_every: int = 1  # a metrics.jsonl / TensorBoard row every N steps
    # Every N steps the batch's samples and per-token rewards go to rollouts.jsonl (`densecode explain`); 0 = never.
    rollouts_every: int = 10
    mixed_precision: MixedPrecision = "no"  # accelerate's
    num_threads: int = 0  # torch CPU threads; 0 = leave torch's default
    # Score the frozen reference every step to log KL(π ‖ π_ref) (objective/kl) even when no reward or loss term
    # uses it: drift is the first thing to look at when a run does not learn. One no-grad forward pass per step.
    log_reference_kl: bool = True


@dataclass
class SandboxConfig:
    """Limits and size of the process-wide sandbox pool (densecode.sandbox.configure_default_pool)."""

    workers: int = 0  # 0 = os.cpu_count()
    isolation: str = "auto"  # auto | jail | namespaces | userns | none (auto: strongest that works here)
    # CPU time decides "too slow" (independent of machine load); the wall clock catches sleepers.
    # MBPP reference solutions use < 0.01 s CPU except task 123 (2.5 s), which times out as upstream.
    timeout_s: float = 5.0
    cpu_s: float = 2.0  # CPU seconds per program; over it the program is killed and judged `timeout`
    memory_mb: int = 1024  # address space (RLIMIT_AS); numpy alone maps ~300 MB
    max_procs: int = 16  # processes per program (RLIMIT_NPROC under the pool's own uid): stops fork bombs
    file_size_mb: int = 16  # largest file a program may write in its private /tmp (RLIMIT_FSIZE)
    output_bytes: int = 1048576  # stdout+stderr kept per program; more kills it (output_limit)


@dataclass
class DensecodeConfig:
    domain: str = "robotics"  # robotics | code | <custom sim domain>
    model: ModelConfig = field(default_factory=ModelConfig)
    lora: LoraConfig = field(default_factory=LoraConfig)
    generation: GenerationConfig = field(default_factory=GenerationConfig)
    reward: RewardConfig = field(default_factory=RewardConfig)
    algo: AlgoConfig = field(default_factory=AlgoConfig)
    train: TrainingConfig = field(default_factory=TrainingConfig)
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)
    # The domain's options (its `Options` dataclass, e.g. densecode.domains.robotics.RoboticsOptions): read raw
    # (TaskLayers) and typed by the domain (build_domain, densecode.domains.load_config), so unknown keys and
    # wrong types are errors like everywhere else.
    tasks: Any = None


# ---------------------------------------------------------------- type checking


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def _coerce(value: Any, tp: Any, key: str, source: str) -> Any:
    """Return `value` as type `tp` or raise ConfigError naming key and source."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is Any:
        return value
    if origin is typing.Literal:
        if value in args:
            return value
        raise ConfigError(f"{source}: key '{key}' must be one of {', '.join(map(str, args))}; got {value!r}")
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _coerce(value, arg, key, source)
            except ConfigError:
                continue  # the next member of the union may take it; none did: the error below names them all
        raise ConfigError(f"{source}: key '{key}' expects {_type_name(tp)}, got {value!r}")
    if origin is list:
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{source}: key '{key}' expects a list, got {type(value).__name__} {value!r}")
        (item_tp,) = args or (Any,)
        return [_coerce(v, item_tp, f"{key}[{i}]", source) for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{source}: key '{key}' expects a mapping, got {type(value).__name__} {value!r}")
        k_tp, v_tp = args or (Any, Any)
        return {_coerce(k, k_tp, key, source): _coerce(v, v_tp, f"{key}.{k}", source) for k, v in value.items()}
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(f"{source}: key '{key}' expects true/false, got {value!r}")
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise ConfigError(f"{source}: key '{key}' expects an integer, got {value!r}")
    if tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):  # YAML 1.1 reads "1e-6" as a string
            try:
                return float(value)
            except ValueError:
                pass
        raise ConfigError(f"{source}: key '{key}' expects a number, got {value!r}")
    if tp is str:
        if isinstance(value, str):
            return value
        raise ConfigError(f"{source}: key '{key}' expects a string, got {value!r}")
    if isinstance(tp, type) and not isinstance(value, tp):
        raise ConfigError(f"{source}: key '{key}' expects {_type_name(tp)}, got {value!r}")
    return value


def _field_types(cls: type) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


def apply_mapping(obj: Any, data: dict, source: str, prefix: str = "") -> None:
    """Set the fields of dataclass `obj` from a mapping, type-checked; errors name `prefix+key` and `source`."""
    _apply(obj, data, source, prefix)


def _apply(obj: Any, data: dict, source: str, prefix: str = "") -> None:
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: section '{prefix.rstrip('.') or '<top>'}' must be a mapping, got {data!r}")
    types_ = _field_types(type(obj))
    for key, value in data.items():
        full = f"{prefix}{key}"
        if key not in types_:
            if full in RENAMED_KEYS:
                raise ConfigError(f"{source}: key '{full}' was renamed: use {RENAMED_KEYS[full]}")
            known = ", ".join(sorted(types_))
            raise ConfigError(f"{source}: unknown key '{full}' (known keys here: {known})")
        tp = types_[key]
        if dataclasses.is_dataclass(tp):
            _apply(getattr(obj, key), value, source, prefix=f"{full}.")
        else:
            value = _coerce(value, tp, full, source)
            current = getattr(obj, key)
            # Mappings merge (a later layer or `--set reward.weights.sim=0` changes one entry, not all).
            if isinstance(value, dict) and isinstance(current, dict):
                value = _merge(current, value)
            setattr(obj, key, value)


def _merge(base: dict, update: dict) -> dict:
    out = dict(base)
    for k, v in update.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def _read_yaml(path: Path, seen: tuple[Path, ...] = ()) -> list[tuple[dict, str]]:
    """The layers of a YAML config, base first: [(mapping, source-name), ...]."""
    if not path.is_file():
        raise ConfigError(f"config file not found: {path} (pass an existing YAML file, e.g. configs/robotics.yaml)")
    if path.resolve() in seen:
        raise ConfigError(f"{path}: 'base' chain loops back to itself")
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of sections, got {type(data).__name__}")
    layers: list[tuple[dict, str]] = []
    base = data.pop("base", None)
    if base is not None:
        layers += _read_yaml(_resolve_base(path, base), seen + (path.resolve(),))
    layers.append((data, str(path)))
    return layers


def _resolve_base(path: Path, base: Any) -> Path:
    """`base: NAME` of the config at `path`: beside the file first, else one of densecode's shipped configs."""
    if not isinstance(base, str) or not base.strip():
        raise ConfigError(f"{path}: 'base' must be a file name, e.g. base: robotics.yaml; got {base!r}")
    beside = path.parent / base
    if beside.is_file():
        return beside
    if not Path(base).is_absolute():  # never the working directory: a config means the same from anywhere
        for shipped in (CONFIG_DIR / base, CONFIG_DIR / f"{base}.yaml"):
            if shipped.is_file():
                return shipped
    raise ConfigError(f"{path}: base {base!r} not found: looked for {beside.resolve()} (beside the file) and "
                      f"{CONFIG_DIR / base} (densecode's configs: {', '.join(sorted(p.name for p in CONFIG_DIR.glob('*.yaml')))})")


def resolve_config_path(name: str | Path) -> Path:
    """A YAML file as given, else a default config shipped with the package by name ('robotics' or
    'robotics.yaml'); a name found nowhere comes back unchanged for the caller's "not found" error."""
    path = Path(name)
    if path.is_file():
        return path
    for candidate in (CONFIG_DIR / path, CONFIG_DIR / f"{path}.yaml"):
        if candidate.is_file():
            return candidate
    return path


def parse_override(text: str) -> tuple[str, Any]:
    if "=" not in text:
        raise ConfigError(f"--set {text!r}: expected KEY=VALUE, e.g. --set train.lr=1e-6")
    key, raw = text.split("=", 1)
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    return key.strip(), value


def _nest(key: str, value: Any) -> dict:
    out: Any = value
    for part in reversed(key.split(".")):
        out = {part: out}
    return out


@dataclass
class TaskLayers:
    """`tasks:` as read, kept raw: each layer's mapping and where it came from (a file, a `--set`), base first.

    The config layer knows no domain; the domain's Options class types these layers (densecode.domains.resolve_tasks,
    which build_domain calls), so an unknown key or a wrong type is still an error naming its file or `--set`.
    """

    layers: list[tuple[dict, str]] = field(default_factory=list)
    current: Any = None  # the options a `base` config already had (typed, or None)

    def merged(self) -> dict:
        """The layers as one mapping (later layers win; nested mappings merge, as `--set tasks.x.y=...` does)."""
        out = dataclasses.asdict(self.current) if dataclasses.is_dataclass(self.current) else {}
        for data, _source in self.layers:
            out = _merge(out, data)
        return out


def load_config(
    path: str | Path | None = None,
    overrides: list[str] | None = None,
    base: DensecodeConfig | None = None,
) -> DensecodeConfig:
    """Defaults ← YAML file (and its `base` chain) ← `--set` overrides.

    `tasks:` stays raw (`TaskLayers`) until the domain types it: densecode.domains.load_config is this function
    with `tasks:` typed, and build_domain types it in place."""
    cfg = base if base is not None else DensecodeConfig()
    # `tasks:` is typed by the domain's Options class, known only once every layer has set `domain`.
    tasks = cfg.tasks if isinstance(cfg.tasks, TaskLayers) else TaskLayers(current=cfg.tasks)
    source_dir = None
    if path is not None:
        resolved = resolve_config_path(path)
        source_dir = resolved.resolve().parent
        for data, source in _read_yaml(resolved):
            data = dict(data)
            if "tasks" in data:
                tasks.layers.append((_tasks_mapping(data.pop("tasks"), source), source))
            _apply(cfg, data, source)
    for text in overrides or []:
        key, value = parse_override(text)
        nested = _nest(key, value)
        if "tasks" in nested:
            tasks.layers.append((_tasks_mapping(nested.pop("tasks"), f"--set {text}"), f"--set {text}"))
        _apply(cfg, nested, f"--set {text}")
    cfg.tasks = tasks
    # Where relative paths and modules named by the config resolve from (not a config field).
    cfg.source_dir = source_dir
    validate(cfg)
    return cfg


def _tasks_mapping(data: Any, source: str) -> dict:
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: section 'tasks' must be a mapping, got {data!r}")
    return data


def check_choices(obj: Any, prefix: str = "") -> None:
    """Every Literal-typed field of dataclass `obj` (and of its sections) holds one of its choices: a config
    built or changed in Python is checked like one read from YAML (ConfigError naming the key)."""
    for name, tp in _field_types(type(obj)).items():
        value = getattr(obj, name)
        if dataclasses.is_dataclass(tp):
            check_choices(value, f"{prefix}{name}.")
        elif typing.get_origin(tp) is Literal and value not in typing.get_args(tp):
            raise ConfigError(f"key '{prefix}{name}' must be one of {', '.join(typing.get_args(tp))}; got {value!r}")


def validate(cfg: DensecodeConfig) -> None:
    check_choices(cfg)


def to_dict(cfg: DensecodeConfig) -> dict:
    out = dataclasses.asdict(cfg)
    if isinstance(cfg.tasks, TaskLayers):  # not typed by a domain yet: what the layers set (loads back the same)
        out["tasks"] = cfg.tasks.merged()
    return out


def dump_yaml(cfg: DensecodeConfig) -> str:
    return yaml.safe_dump(to_dict(cfg), sort_keys=False)


def add_config_arguments(parser) -> None:
    """The config flags every config-driven command shares."""
    parser.add_argument("--config", default=None, help="YAML config file (or a name in configs/, e.g. robotics)")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config field, e.g. --set train.lr=1e-6 (repeatable)",
    )
