"""The shared training loop: rollout → rewards → advantages → update → log (CleanRL's ppo.py, for token MDPs).

    for step in range(steps):
        prompts, tasks = task_source.train_batch(step)                 # per process
        responses      = sample(policy, prompts, sampling, T=algo.sampling_temperature(step))
        batch          = build_batch(...); score_batch(...)            # logπ_old, logπ_ref, V (no grad)
        rewards        = reward_fn([make_sample(...)])                 # per-token totals incl. −β·KL
        adv_stats      = algo.compute_advantages(batch)                # PPO: GAE; GRPO: group-relative
        for epoch, minibatch, micro-batch:                             # grad accumulation inside
            out        = policy_value(micro)                           # PolicyOutput (logprobs, entropy, values)
            loss, st   = algo.loss(micro, out)
        optimizer step (grad clip; a non-finite grad norm skips the step)
        algo.on_step_end, task_source.on_step_end                      # controllers, multi-task scheduler
        kl controller → reward_fn.set_weight("kl", β)
        run.write_metrics / write_rollouts / evaluate / save_checkpoint

What an optimiser and a task source provide: densecode.rl.protocols (Algorithm, TaskSource). The run folder
(logs, TensorBoard, atomic checkpoints, resume): densecode.rl.run_dir. Sampling settings: densecode.rl.sampling.
"""

from __future__ import annotations

import logging
import math
import signal
import time
import warnings
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from densecode.errors import DensecodeError
from densecode.rl.kl import make_kl_controller, reward_kl
from densecode.rl.ppo import masked_mean
from densecode.rl.protocols import (
    Algorithm,
    StepView,
    TaskSource,
    as_task_source,
    kl_weighted,
)
from densecode.rl.rollout import (
    RolloutBatch,
    build_batch,
    encode_prompts,
    sample_responses,
    score_batch,
    to_padded,
)
from densecode.rl.run_dir import (
    RunDir,
    check_resumable,
    config_fingerprint,
    load_weights,
    read_checkpoint_meta,
    resolve_checkpoint,
    resolve_checkpoint_or_none,
    rng_state,
    set_rng_state,
    write_json,
)
from densecode.rl.settings import SamplingParams, TrainerSettings
from densecode.rl.stats import per_token_algo_arrays, rollout_stats
from densecode.rl.value_head import (
    PolicyWithValue,
    ReferencePolicy,
    disable_dropout,
    is_peft_model,
)

logger = logging.getLogger(__name__)



def _kl_weight(reward_fn, cfg=None) -> float:
    """The KL weight the reward function really uses: the assembler carries its weights; a plain callable
    without them is taken to use the config's `reward.weights.kl`."""
    weights = reward_fn.weights if kl_weighted(reward_fn) else (cfg.reward.weights if cfg is not None else None)
    return float((weights or {}).get("kl", 0.0))

def _seed_for(*parts: int) -> int:
    """A deterministic 31-bit seed from integers (step, process, ...): resume needs no RNG replay."""
    h = 0x9E3779B9
    for p in parts:
        h = (h * 1_000_003 + int(p) + 0x7F4A7C15) & 0x7FFFFFFF
    return h


@dataclass
class TrainState:
    step: int = 0  # completed steps
    skipped_steps: int = 0
    started_at: float = 0.0
    elapsed_s: float = 0.0  # wall time over all sessions of this run


class Trainer:
    """Runs the loop; owns the optimizer, accelerate, logging, eval and checkpoints."""

    def __init__(self, cfg, *, model, tokenizer, task_source, reward_fn, algo: Algorithm, run_dir: str | Path,
                 critic=None, accelerator=None, sample_builder: Callable | None = None, sampler: Callable | None = None,
                 progress: bool = True):
        from accelerate import Accelerator

        self.cfg = cfg
        self.settings = TrainerSettings.from_config(cfg)
        self.sampling = SamplingParams.from_config(cfg.generation)
        self.tokenizer = tokenizer
        self.task_source: TaskSource = as_task_source(task_source)
        self.reward_fn = reward_fn
        self.algo = algo
        self.run_dir = Path(run_dir)
        self.progress = progress
        self.accelerator = accelerator or Accelerator(mixed_precision=cfg.train.mixed_precision)
        self.sampler = sampler or sample_responses
        if sample_builder is None:
            from densecode.rewards import make_sample as sample_builder
        self.sample_builder = sample_builder
        # Dropout off (as TRL's PPOTrainer): ratio = 1 on the first minibatch, clean KL.
        disable_dropout(model)
        if critic is not None:
            disable_dropout(critic)
        if _kl_weight(reward_fn, cfg) > 0 and not algo.allows_reward_kl:
            raise DensecodeError(
                f"{algo.name}: the reward has a KL weight of {_kl_weight(reward_fn, cfg):g} (reward.weights.kl), but "
                f"{algo.name} uses no KL in the reward (MicroCoder: beta = 0). Set reward.weights.kl=0 (and "
                f"algo.{algo.name}.beta for a KL loss term), or algo.{algo.name}.allow_reward_kl=true to keep it")
        # GRPO hook: an algorithm with a KL loss term (algo.grpo.beta > 0) sets needs_reference.
        needs_ref = _kl_weight(reward_fn, cfg) > 0 or algo.needs_reference
        # KL to the reference is a diagnostic of every run (drift), so the reference is scored even when no
        # reward or loss term uses it, unless train.log_reference_kl is off.
        needs_ref = needs_ref or self.settings.log_reference_kl
        # A task source with per-sample KL loss weights (a multi-task run's beta_k) needs the reference too.
        self._kl_loss_hook = self.task_source.kl_loss_coefs if algo.kl_coef is not None else None
        if self._kl_loss_hook is not None:
            needs_ref = needs_ref or bool(self.task_source.uses_kl_loss(float(algo.kl_coef)))
        self.reference = ReferencePolicy(model) if needs_ref or is_peft_model(model) else None
        self.policy_value = PolicyWithValue(model, cfg.model.value_model, critic,
                                            with_value_head=algo.needs_value_head)
        value_params = {id(p) for m in (self.policy_value.value_head, self.policy_value.critic) if m is not None
                        for p in m.parameters()}
        self._policy_params = [p for p in self.policy_value.parameters() if p.requires_grad and id(p) not in value_params]
        self._value_params = [p for p in self.policy_value.parameters() if p.requires_grad and id(p) in value_params]
        groups = [{"params": self._policy_params, "lr": self.settings.lr},
                  {"params": self._value_params, "lr": self.settings.vf_lr}]
        # eps=1e-5 as CleanRL: tiny second moments early in RL otherwise blow the first steps up.
        self.optimizer = torch.optim.AdamW([g for g in groups if g["params"]], weight_decay=self.settings.weight_decay,
                                           eps=1e-5)
        self.policy_value, self.optimizer = self.accelerator.prepare(self.policy_value, self.optimizer)
        if self.reference is not None:
            self.reference.to(self.accelerator.device)
        beta = _kl_weight(reward_fn, cfg)
        self.kl_ctl = make_kl_controller(cfg.algo, beta)
        self.state = TrainState()
        self.run = RunDir(self.run_dir, is_main=self.accelerator.is_main_process)
        self._last_batch: RolloutBatch | None = None
        self._stop_requested = False
        self._crash_hooks = None  # densecode.rl.crashpoints, armed by DENSECODE_CRASH_AT (the crash-safety test)
        self._watching_optimizer = False
        self._optimizer_stepped = False  # this step changed the weights (see _save_after_bad_input)
        self._prompt_cache: dict[str, list[int]] = {}

    # ------------------------------------------------------------ helpers

    @property
    def unwrapped(self) -> PolicyWithValue:
        return self.accelerator.unwrap_model(self.policy_value)

    @property
    def is_main(self) -> bool:
        return self.accelerator.is_main_process

    def _log(self, msg: str) -> None:
        if self.is_main:
            logger.info(msg)

    # ------------------------------------------------------------ one step

    def rollout(self, step: int) -> tuple[RolloutBatch, dict[str, float]]:
        s, proc = self.settings, self.accelerator.process_index
        prompts, tasks = self.task_source.train_batch(s.batch_size, _seed_for(s.seed, step, proc, 1))
        temperature = float(self.algo.sampling_temperature(step))
        policy = self.unwrapped.policy
        timings = {}
        t0, c0 = time.perf_counter(), time.process_time()
        responses = self.sampler(policy, self.tokenizer, prompts, n=self.algo.samples_per_prompt,
                                 seed=_seed_for(s.seed, step, proc, 2), progress=False,
                                 **self.sampling.sampler_kwargs(temperature))
        for r in responses:
            # The EOS decision is an action too: keep the token that was sampled (a model may have
            # several end tokens) so the update credits stopping on the token the policy chose.
            stop_token = _sampled_stop_token(r, self.tokenizer)
            if stop_token is not None:
                r.token_ids = list(r.token_ids) + [stop_token]
        timings["time/generate_s"] = time.perf_counter() - t0
        timings["time/generate_cpu_s"] = time.process_time() - c0
        t0, c0 = time.perf_counter(), time.process_time()
        batch = build_batch(self.tokenizer, prompts, tasks, responses, temperature, self.accelerator.device,
                            prompt_ids=encode_prompts(self.tokenizer, prompts))
        batch.step = step
        self.policy_value.eval()
        sources = score_batch(self.unwrapped, self.reference, batch, chunk_size=max(1, self.sampling.batch_size),
                              with_values=self.algo.needs_value_head,
                              score_pass=s.score_pass)
        timings["time/score_s"] = time.perf_counter() - t0
        timings["time/score_cpu_s"] = time.process_time() - c0
        timings.update(sources or {})
        return batch, timings

    def compute_rewards(self, batch: RolloutBatch) -> dict[str, float]:
        samples = []
        for i, r in enumerate(batch.responses):
            n = len(r.token_ids)
            s = self.sample_builder(batch.prompts[i], r.token_ids, self.tokenizer, batch.tasks[i],
                                    code_regions=self.settings.code_regions, truncated=r.finish_reason == "length")
            s.logprobs = batch.logprobs[i, :n].detach().float().cpu().numpy()
            s.ref_logprobs = (batch.ref_logprobs[i, :n].detach().float().cpu().numpy()
                              if batch.ref_logprobs is not None else s.logprobs.copy())
            if r.grammar_verdicts is not None:
                s.grammar_verdicts = list(r.grammar_verdicts) + [None] * (n - len(r.grammar_verdicts))
            samples.append(s)
        rb = self.reward_fn(samples)
        R = batch.response_ids.shape[1]
        dev = batch.response_ids.device
        rewards = to_padded(rb.total, R, dev)
        batch.samples = samples
        batch.rewards = rewards * batch.response_mask
        batch.components = {k: to_padded(v, R, dev) for k, v in (rb.components or {}).items()}
        batch.sequence_rewards = batch.rewards.sum(-1)
        batch.reward_outputs = rb
        stats = {k: float(v) for k, v in (rb.stats or {}).items() if isinstance(v, (int, float))}
        stats["reward/sequence_mean"] = float(batch.sequence_rewards.mean())
        stats["reward/sequence_std"] = float(batch.sequence_rewards.std()) if batch.size > 1 else 0.0
        for name, vals in batch.components.items():
            stats[f"reward/{name}/sequence_mean"] = float(vals.sum(-1).mean())
        return stats

    def update(self, batch: RolloutBatch, step: int) -> dict[str, float]:
        cfg = self.settings
        B = batch.size
        n_mb = max(1, min(cfg.num_minibatches, B))
        n_micro = max(1, cfg.grad_accum_steps)
        gen = torch.Generator().manual_seed(_seed_for(cfg.seed, step, self.accelerator.process_index, 3))
        sums: dict[str, float] = defaultdict(float)
        counts: dict[str, int] = defaultdict(int)
        skipped = 0
        self.policy_value.train()
        epochs = int(self.algo.epochs)
        early_stopped = 0.0
        minibatches_done = 0
        for _epoch in range(epochs):
            if early_stopped:
                break
            perm = torch.randperm(B, generator=gen)
            for mb_idx in torch.tensor_split(perm, n_mb):
                if early_stopped:
                    break
                mb_kl_sum, mb_kl_n = 0.0, 0
                micro_parts = [m for m in torch.tensor_split(mb_idx, min(n_micro, len(mb_idx))) if len(m)]
                for k, micro_idx in enumerate(micro_parts):
                    mb = batch.select(micro_idx)
                    last = k == len(micro_parts) - 1
                    # Sync gradients across processes only on the last micro-batch.
                    ctx = self.accelerator.no_sync(self.policy_value) if not last else _nullcontext()
                    with ctx:
                        out = self.policy_value(mb.input_ids, mb.attention_mask, mb.position_ids, mb.response_ids,
                                                temperature=batch.temperature, with_values=self.algo.needs_value_head)
                        loss, st = self.algo.loss(mb, out)
                        self.accelerator.backward(loss / len(micro_parts))
                    with torch.no_grad():
                        # approx_kl(π_old ‖ π) of this micro-batch, k3 (CleanRL), whatever the algorithm logs.
                        logratio = out.logprobs.detach() - mb.logprobs
                        mb_kl_sum += float(masked_mean(torch.exp(logratio) - 1 - logratio, mb.response_mask))
                        mb_kl_n += 1
                    for key, v in st.items():
                        sums[key] += float(v)
                        counts[key] += 1
                    sums["train/loss"] += float(loss.detach())
                    counts["train/loss"] += 1
                grad_norm, vf_grad_norm = self._clip_gradients()
                if not (math.isfinite(grad_norm) and math.isfinite(vf_grad_norm)):
                    # A NaN/inf anywhere (loss, rewards, activations) poisons the all-reduced grads on
                    # every process alike, so every process skips this optimizer step together.
                    skipped += 1
                    self.optimizer.zero_grad(set_to_none=True)
                    continue
                sums["train/grad_norm"] += grad_norm
                counts["train/grad_norm"] += 1
                if self._value_params:
                    sums["train/vf_grad_norm"] += vf_grad_norm
                    counts["train/vf_grad_norm"] += 1
                self.optimizer.step()
                self.optimizer.zero_grad(set_to_none=True)
                minibatches_done += 1
                mb_kl = mb_kl_sum / max(mb_kl_n, 1)
                if cfg.early_stop_kl > 0 and self.accelerator.num_processes > 1:
                    # Every process must take the same number of updates (collectives): decide on the mean.
                    mb_kl = float(self.accelerator.reduce(
                        torch.tensor(mb_kl, device=self.accelerator.device), reduction="mean"))
                sums["train/approx_kl"] += mb_kl
                counts["train/approx_kl"] += 1
                # CleanRL's target_kl: this minibatch was measured before its own update, so the policy has
                # moved at least this far from the rollout policy; stop the step's remaining epochs.
                if cfg.early_stop_kl > 0 and mb_kl > cfg.early_stop_kl:
                    early_stopped = 1.0
        self.policy_value.eval()
        stats = {k: sums[k] / max(counts[k], 1) for k in sums}
        stats["train/skipped_updates"] = float(skipped)
        stats["train/early_stopped"] = early_stopped
        stats["train/minibatches_done"] = float(minibatches_done)
        if skipped:
            warnings.warn(f"step {step}: {skipped} optimizer update(s) skipped because the loss or gradients "
                          "were NaN/inf (weights unchanged by those updates)", RuntimeWarning, stacklevel=2)
        return stats

    def _clip_gradients(self) -> tuple[float, float]:
        """Clip the policy's and the value model's gradients separately (norms before clipping).

        One joint norm would let the value loss — returns of magnitude ~10 early on — shrink
        the policy's share of every clipped update to almost nothing.
        """
        from accelerate.utils import DistributedType

        max_norm = self.settings.max_grad_norm
        if self.accelerator.distributed_type in (DistributedType.DEEPSPEED, DistributedType.FSDP):
            norm = self.accelerator.clip_grad_norm_(self.policy_value.parameters(), max_norm)
            norm = float(norm) if norm is not None else float("nan")
            return norm, 0.0 if not self._value_params else norm
        self.accelerator.unscale_gradients()
        norm = float(torch.nn.utils.clip_grad_norm_(self._policy_params, max_norm))
        vf_norm = float(torch.nn.utils.clip_grad_norm_(self._value_params, max_norm)) if self._value_params else 0.0
        return norm, vf_norm

    def train_step(self, step: int) -> dict[str, float]:
        # Wall time per phase, and this process's CPU time (all its threads; not the sandbox's
        # processes): on a shared machine the CPU-time split moves far less with the load.
        t_step, c_step = time.perf_counter(), time.process_time()
        batch, stats = self.rollout(step)
        t0, c0 = time.perf_counter(), time.process_time()
        stats.update(self.compute_rewards(batch))
        stats["time/reward_s"] = time.perf_counter() - t0
        stats["time/reward_cpu_s"] = time.process_time() - c0
        t0, c0 = time.perf_counter(), time.process_time()
        stats.update(self.algo.compute_advantages(batch))
        batch.kl_coefs = self._sample_kl_coefs(batch)
        stats.update(self.update(batch, step))
        stats["time/update_s"] = time.perf_counter() - t0
        stats["time/update_cpu_s"] = time.process_time() - c0
        stats.update(self._rollout_stats(batch))
        stats.update(self.algo.on_step_end(batch, stats) or {})
        view = StepView(step, int(self.algo.samples_per_prompt), lambda rows: self.policy_gradient(batch, rows))
        stats.update(self.task_source.on_step_end(view, batch, stats) or {})
        # KL controller: sequence KL summed over tokens (Ziegler et al.), n_steps = prompts this step,
        # measured with the estimator the reward's kl component uses (k1 here would steer a different number).
        seq_kl = reward_kl(batch.reward_outputs)
        if seq_kl is None:
            seq_kl = stats.get("objective/kl", 0.0)
        else:
            stats["objective/kl_reward"] = seq_kl
        beta = self.kl_ctl.update(seq_kl, batch.size * self.accelerator.num_processes)
        if kl_weighted(self.reward_fn) and _kl_weight(self.reward_fn, self.cfg) > 0:
            try:
                self.reward_fn.set_weight("kl", beta)
            except DensecodeError:
                pass
        stats["objective/kl_coef"] = beta
        dt = time.perf_counter() - t_step
        stats["time/step_s"] = dt
        stats["time/step_cpu_s"] = time.process_time() - c_step
        stats["perf/tokens_per_s"] = float(batch.response_mask.sum()) / max(dt, 1e-9)
        stats["perf/generate_tokens_per_s"] = float(batch.response_mask.sum()) / max(stats["time/generate_s"], 1e-9)
        self._last_batch = batch
        return self._reduce(stats)

    def _sample_kl_coefs(self, batch: RolloutBatch) -> torch.Tensor | None:
        """[B] weights of the algorithm's KL loss term from the task source's `kl_loss_coefs` hook, or None."""
        if self._kl_loss_hook is None:
            return None
        coefs = self._kl_loss_hook(batch.tasks, float(self.algo.kl_coef))
        if coefs is None:
            return None
        t = torch.as_tensor(list(coefs), dtype=torch.float32)
        if t.shape != (batch.size,) or not bool(torch.isfinite(t).all()) or bool((t < 0).any()):
            raise DensecodeError(f"the task source's kl_loss_coefs gave {t.tolist()}; it must give one finite "
                                 f"weight >= 0 per sample ({batch.size})")
        if bool((t > 0).any()) and batch.ref_logprobs is None:
            raise DensecodeError("the task source's kl_loss_coefs are > 0 but no reference model is loaded: its "
                                 "uses_kl_loss(base) must say True for such a run")
        return t.to(batch.response_mask.device)

    def policy_gradient(self, batch: RolloutBatch, rows: list[int]) -> torch.Tensor:
        """Flat gradient of -mean_t(A_t * log pi(a_t)) on `rows` of `batch` over the trainable policy parameters
        (autograd.grad: the optimizer's .grad buffers are untouched). At ratio 1 this is PPO's and GRPO's
        surrogate gradient without clipping, so it is algorithm-independent."""
        mb = batch.select(torch.as_tensor(list(rows), dtype=torch.long))
        out = self.unwrapped(mb.input_ids, mb.attention_mask, mb.position_ids, mb.response_ids,
                             temperature=batch.temperature, with_values=False)
        loss = -masked_mean(out.logprobs * mb.advantages.to(out.logprobs.dtype), mb.response_mask)
        params = list(self._policy_params)
        grads = torch.autograd.grad(loss, params, allow_unused=True)
        return torch.cat([(g if g is not None else torch.zeros_like(p)).detach().reshape(-1).float()
                          for g, p in zip(grads, params)])

    def _rollout_stats(self, batch: RolloutBatch) -> dict[str, float]:
        return rollout_stats(batch)

    def _reduce(self, stats: dict[str, float]) -> dict[str, float]:
        """Mean of every scalar over processes (same keys on every process, sorted)."""
        if self.accelerator.num_processes == 1:
            return stats
        keys = sorted(stats)
        t = torch.tensor([float(stats[k]) for k in keys], dtype=torch.float64, device=self.accelerator.device)
        t = self.accelerator.reduce(t, reduction="mean")
        return dict(zip(keys, t.tolist()))

    # ------------------------------------------------------------ eval, logging

    # ------------------------------------------------------------ eval, logging, checkpoints (densecode.rl.run_dir)

    def evaluate(self, step: int) -> dict[str, float]:
        out = {}
        if self.is_main:
            t0 = time.perf_counter()
            res = self.task_source.evaluate(self.unwrapped.policy, self.tokenizer, n=self.settings.eval_tasks,
                                            seed=self.settings.seed)
            out = {f"eval/{k}": float(v) for k, v in res.items()}
            out["time/eval_s"] = time.perf_counter() - t0
            self.run.write_metrics({"step": step, **out}, kind="eval")
            self.run.write_eval_tasks(step, self.task_source.last_eval_rows)
        self.accelerator.wait_for_everyone()
        return out

    def write_rollouts(self, step: int) -> None:
        batch = self._last_batch
        if batch is not None:
            self.run.write_rollouts(step, batch.samples, batch.reward_outputs, per_token_algo_arrays(batch))

    def save_checkpoint(self) -> Path | None:
        """checkpoints/step-N, published atomically by RunDir.save_checkpoint."""
        self.accelerator.wait_for_everyone()
        path = self.run.save_checkpoint(self.state.step, self._write_checkpoint_files, self._crash_point) \
            if self.is_main else None
        self.accelerator.wait_for_everyone()
        return path

    def _write_checkpoint_files(self, tmp: Path) -> None:
        """Everything of a checkpoint into `tmp`, trainer_state.json last."""
        pv = self.unwrapped
        pv.policy.save_pretrained(tmp / "model", safe_serialization=True)
        self.tokenizer.save_pretrained(tmp / "model")
        if pv.value_head is not None:
            torch.save(pv.value_head.state_dict(), tmp / "value_head.pt")
        if pv.critic is not None:
            pv.critic.save_pretrained(tmp / "critic", safe_serialization=True)
        self._crash_point("checkpoint", 1)
        torch.save(self.optimizer.state_dict(), tmp / "optimizer.pt")
        torch.save(rng_state(), tmp / "rng.pt")
        self._crash_point("checkpoint", 2)
        meta = {
            "step": self.state.step,
            "skipped_steps": self.state.skipped_steps,
            "elapsed_s": self.state.elapsed_s,
            "kl_controller": self.kl_ctl.state_dict(),
            "algo": self.algo.state_dict(),
            "algo_name": self.algo.name,
            "task_source": self.task_source.state_dict(),
            "lora": is_peft_model(pv.policy),
            "config_fingerprint": config_fingerprint(self.cfg),
        }
        # Written last: a directory with trainer_state.json is a complete checkpoint.
        write_json(tmp / "trainer_state.json", meta)


    def _save_after_bad_input(self, exc: DensecodeError, step: int) -> DensecodeError:
        """Bad input met inside step `step` (a prompt too long, a task the reward cannot judge): the steps done
        since the last checkpoint are saved first, so fixing the input and `--resume` loses nothing.

        Only when the error came before the step's first optimizer step (sampling, rewards): then the model,
        the optimizer and the controllers still hold the state after step - 1, exactly what a checkpoint of
        step - 1 is. After it, the weights are half-way into step `step`, and nothing is saved."""
        saved = ""
        done = self.state.step
        latest = self.run_dir / "checkpoints" / f"step-{done:06d}"
        if self._optimizer_stepped:
            last = resolve_checkpoint_or_none(self.run_dir)
            saved = f" (continue from {last} with --resume {self.run_dir} once fixed)" if last else ""
        elif self.accelerator.num_processes > 1:
            pass  # the other processes are inside the step's collectives: a save would wait for them forever
        elif done > 0 and not (latest / "trainer_state.json").is_file():
            try:
                self.save_checkpoint()
                saved = f" (steps up to {done} saved in {latest}; fix this and continue with --resume {self.run_dir})"
            except DensecodeError as save_exc:
                saved = f" (and saving step {done} failed too: {save_exc})"
        elif done > 0:
            saved = f" (checkpoint {latest} holds the steps done; fix this and continue with --resume {self.run_dir})"
        return DensecodeError(f"step {step}: {exc}{saved}")


    def _crash_point(self, phase: str, stage: int) -> None:
        """The crash-safety test's hook (densecode.rl.crashpoints); a no-op unless DENSECODE_CRASH_AT is set."""
        hooks = self._crash_hooks
        if hooks is not None and hooks.point.phase == phase and hooks.point.step == self.state.step \
                and hooks.point.k == stage:
            from densecode.rl.crashpoints import die

            die()


    def load_checkpoint(self, path: str | Path) -> None:
        path = resolve_checkpoint(path)
        meta = read_checkpoint_meta(path)
        check_resumable(path, meta, self.cfg)
        self.run.point_latest_at(path)
        pv = self.unwrapped
        if meta.get("lora") != is_peft_model(pv.policy):
            raise DensecodeError(f"checkpoint {path} was trained with lora.enabled={meta.get('lora')}; "
                                 f"this run has lora.enabled={is_peft_model(pv.policy)} (make them match)")
        load_weights(pv.policy, path / "model")
        if pv.value_head is not None and (path / "value_head.pt").is_file():
            pv.value_head.load_state_dict(torch.load(path / "value_head.pt", map_location="cpu"))
        if pv.critic is not None and (path / "critic").is_dir():
            load_weights(pv.critic, path / "critic")
        self.optimizer.load_state_dict(torch.load(path / "optimizer.pt", map_location="cpu", weights_only=False))
        set_rng_state(torch.load(path / "rng.pt", map_location="cpu", weights_only=False))
        self.kl_ctl.load_state_dict(meta["kl_controller"])
        if kl_weighted(self.reward_fn) and _kl_weight(self.reward_fn, self.cfg) > 0:
            try:
                self.reward_fn.set_weight("kl", self.kl_ctl.value)
            except DensecodeError:
                pass
        self.algo.load_state_dict(meta.get("algo") or {})
        self.task_source.load_state_dict(meta.get("task_source") or {})
        self.state.step = int(meta["step"])
        self.state.skipped_steps = int(meta.get("skipped_steps", 0))
        self.state.elapsed_s = float(meta.get("elapsed_s", 0.0))
        self._log(f"resumed from {path} at step {self.state.step}")

    # ------------------------------------------------------------ the loop

    def _on_sigint(self, signum, frame):
        if self._stop_requested:
            raise KeyboardInterrupt
        self._stop_requested = True
        if self.is_main:
            print("\ninterrupt: finishing this step, saving a checkpoint and exiting "
                  "(press Ctrl-C again to abort without saving)", flush=True)

    def train(self, steps: int | None = None) -> dict[str, Any]:
        cfg = self.settings
        total = int(steps if steps is not None else cfg.steps)
        if self.is_main:
            self.run.open_session(self.state.step)
        from densecode.rl.crashpoints import install_from_env

        if self._crash_hooks is None:
            self._crash_hooks = install_from_env(self)
        if not self._watching_optimizer:
            # Tells _save_after_bad_input whether an error came after this step changed the weights.
            inner = getattr(self.optimizer, "optimizer", self.optimizer)
            inner.register_step_post_hook(lambda *_: setattr(self, "_optimizer_stepped", True))
            self._watching_optimizer = True
        old_handler = None
        try:
            old_handler = signal.signal(signal.SIGINT, self._on_sigint)
        except ValueError:  # not the main thread
            pass
        bar = None
        if self.progress and self.is_main:
            from tqdm.auto import tqdm

            bar = tqdm(total=total, initial=self.state.step, desc=f"train {self.algo.name}", unit="step",
                       dynamic_ncols=True)
        session_start = time.perf_counter()
        base_elapsed = self.state.elapsed_s
        last_stats: dict[str, float] = {}
        interrupted = False
        try:
            if self.state.step == 0 and cfg.eval_every > 0:
                self.evaluate(0)
            while self.state.step < total:
                step = self.state.step
                self._optimizer_stepped = False
                try:
                    stats = self.train_step(step)
                except DensecodeError as exc:
                    raise self._save_after_bad_input(exc, step + 1) from None
                self.state.step = step + 1
                self.state.elapsed_s = base_elapsed + time.perf_counter() - session_start
                if stats.get("train/skipped_updates", 0) > 0:
                    self.state.skipped_steps += 1
                last_stats = stats
                if cfg.log_every > 0 and (self.state.step % cfg.log_every == 0 or self.state.step == total):
                    self.run.write_metrics({"step": self.state.step, "elapsed_s": self.state.elapsed_s, **stats})
                if cfg.rollouts_every > 0 and (self.state.step % cfg.rollouts_every == 0 or self.state.step == total):
                    self.write_rollouts(self.state.step)
                if cfg.eval_every > 0 and (self.state.step % cfg.eval_every == 0 or self.state.step == total):
                    last_stats.update(self.evaluate(self.state.step))
                if cfg.save_every > 0 and self.state.step % cfg.save_every == 0 and self.state.step < total:
                    self.save_checkpoint()
                if bar is not None:
                    bar.update(1)
                    post = {"reward": f"{stats.get('reward/sequence_mean', float('nan')):.3f}",
                            "kl": f"{stats.get('objective/kl', 0.0):.3f}"}
                    for k in ("eval/success_rate", "eval/pass_rate"):
                        if k in last_stats:
                            post[k.split("/")[1]] = f"{last_stats[k]:.3f}"
                    bar.set_postfix(post)
                if self._stop_requested:
                    interrupted = True
                    break
            self.save_checkpoint()
        finally:
            if bar is not None:
                bar.close()
            if old_handler is not None:
                signal.signal(signal.SIGINT, old_handler)
            self.run.close()
        if self.is_main:
            try:
                from densecode.rl.report import write_report

                write_report(self.run_dir)
                self.task_source.write_report(self.run_dir)  # a task source's own pictures (multi-task curves)
            except Exception as exc:  # noqa: BLE001 - a plotting problem must not lose a finished run
                logger.warning("could not write the learning-curve report: %s", exc)
        return {"step": self.state.step, "interrupted": interrupted, "last": last_stats}


def _sampled_stop_token(response, tokenizer) -> int | None:
    """The end token a response stopped on: the sampled one, else (a sampler that does not record it)
    the tokenizer's single EOS id; None when the response did not end on an end token."""
    if response.finish_reason != "eos":
        return None
    sampled = response.stop_token_id
    if sampled is not None:
        return int(sampled)
    eos = tokenizer.eos_token_id
    return int(eos) if eos is not None else None


class _nullcontext:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False
