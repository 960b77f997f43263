"""Typed options of the `multi` domain (the config's `tasks:` section when `domain: multi`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from densecode.domains.base import DomainOptions

SCHEDULES = ("astor", "joint", "curriculum")
POTENTIAL_SIGNALS = ("outcome", "reward")


@dataclass
class AstorOptions:
    """ASTOR's scheduler and adaptive-KL constants (docs/multitask.md gives the equations they enter)."""

    # Task utility U_k = potential_weight * P_k / max_j P_j + synergy_weight * S_k.
    potential_weight: float = 1.0  # w_p: weight of the normalised learning potential in U_k
    synergy_weight: float = 1.0  # w_s: weight of the synergy S_k in U_k
    # What the variances of P_k and of a prompt's utility are taken of: "outcome", each sample's verifiable outcome
    # in [0, 1] (tests' pass rate, execution accuracy, coverage, similarity, sim success; the paper's rewards), or
    # "reward", its sequence reward (sum of the per-token rewards, KL included). The sequence reward's scale differs
    # by task (dense per-token terms summed over a task's response length): its variance, normalised by the largest
    # task's, then measures a task's reward scale more than its learning potential (docs/multitask.md).
    potential_signal: str = "outcome"
    utility_ema: float = 0.8  # P_k is an EMA over steps of the task's rollout-outcome variance (0 = last step only)
    potential_window: int = 32  # PPO (one sample per prompt): the variance is over the task's last W rewards
    # Synergy probe: every N steps (0 = never: S_k stays 0), on up to probe_rows rows per task of that step's batch.
    synergy_every: int = 5
    probe_rows: int = 4  # rows of each task's batch the gradient probe uses
    # Task quotas: q = floor + (1 - K*floor) * softmax(U / temperature); K*floor must be <= 1.
    temperature: float = 0.5  # tau of the softmax over task utilities (lower = sharper quotas)
    floor: float = 0.1  # each task's minimum share of the batch (K * floor <= 1)
    task_quotas: bool = True  # false = uniform quotas (the "no task allocation" ablation)
    # Prompt priority within a task: weight = reward variance + max(progress, 0) (+ eps);
    # progress = EMA of the change of the prompt's mean reward between visits.
    prompt_priority: bool = True  # false = uniform within the pool (the "no prompt priority" ablation)
    progress_ema: float = 0.5  # EMA factor of a prompt's progress (change of its mean reward)
    unseen_prior: float = 1.0  # utility of a never-sampled prompt: max(unseen_prior, best seen utility in the pool)
    pool_size: int = 64  # prompts per task in the pool
    pool_refresh: int = 4  # pool prompts replaced by fresh generator draws each step (the most-visited first)
    # Adaptive KL: beta_k = beta_base,k * max(0, 1 + kl_lambda * U_k); false = beta_base,k (the ablation).
    adaptive_kl: bool = True
    kl_lambda: float = 0.5  # lambda in beta_k = beta_base,k * (1 + lambda * U_k)
    # One shared beta (the "no per-task regularisation" ablation): every task gets
    # mean_k(beta_base,k) * max(0, 1 + kl_lambda * mean_k U_k) (without the factor when adaptive_kl is false).
    shared_beta: bool = False


@dataclass
class MultiOptions(DomainOptions):
    tasks: list[str] = field(default_factory=lambda: ["robotics"])  # registered domain names, one per task
    schedule: str = "astor"  # astor | joint (uniform mix) | curriculum (tasks in order, equal steps)
    # Per-task `tasks:` options: task name -> that domain's options mapping (e.g. {code: {path: x.jsonl}}).
    options: dict[str, dict] = field(default_factory=dict)
    # Per-task reward weights over the domain's recipe and the global reward.weights (task -> {component: w}).
    reward_weights: dict[str, dict[str, float]] = field(default_factory=dict)
    # Scale of each task's whole reward (task -> factor; default 1).
    task_weights: dict[str, float] = field(default_factory=dict)
    # beta_base,k: the KL weight of task k. PPO: the reward's `kl` weight (default: the task's resolved reward
    # weight `kl`); GRPO: the weight of the k3 KL loss term for task k's samples (default: algo.grpo.beta).
    kl_beta: dict[str, float] = field(default_factory=dict)
    # Curriculum: steps per task (0 = train.steps / number of tasks, read when the reward is built).
    curriculum_steps: int = 0
    # Where a training response ends: false = at generation.stop, one list for every task; true = at its own task's
    # stop strings, the ones its held-out eval uses (generation.stop when set, else the domain's own: codeio and
    # commitmsg end at a newline, codegen at a new `def`), as in a single-task run of that domain.
    task_stops: bool = False
    astor: AstorOptions = field(default_factory=AstorOptions)
