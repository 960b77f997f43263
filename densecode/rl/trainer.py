"""The shared training loop: rollout → rewards → advantages → update → log (CleanRL's ppo.py, for token MDPs).

    for step in range(steps):
        prompts, tasks = task_source.train_batch(n, seed_for(step))    # per process, deterministic in the step
        responses      = sample(policy, prompts, sampling, T=algo.sampling_temperature(step))
        batch          = build_batch(...); score_batch(...)            # logπ_old, logπ_ref, V (no grad)
        rewards        = reward_fn([make_sample(...)])                 # per-token totals incl. −β·KL
        adv_stats      = algo.compute_advantages(batch)                # PPO: GAE; GRPO: group-relative
        for epoch, minibatch, micro-batch:                             # grad accumulation inside
            out        = policy_value(micro)                           # PolicyOutput (logprobs, entropy, values)
            loss, st   = algo.loss(micro, out)
        optimizer step (grad clip; a non-finite grad norm skips the step, a zero one with algo.skip_zero_gradient)
        algo.on_step_end, task_source.on_step_end                      # controllers, multi-task scheduler
        kl controller → reward_fn.set_weight("kl", β)
        run.write_metrics / write_rollouts / evaluate / save_checkpoint

What an optimiser and a task source provide: densecode.rl.protocols (Algorithm, TaskSource). The run folder
(logs, TensorBoard, atomic checkpoints, resume): densecode.rl.run_dir. Settings and sampling parameters:
densecode.rl.settings (built once from the config).
"""

from __future__ import annotations

import logging
import math
import time
import warnings
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import torch

from densecode.errors import DensecodeError
from densecode.rl.kl import make_kl_controller, reward_kl, sample_kl_coefs
from densecode.rl.minibatches import UpdateRows, zero_gradients
from densecode.rl.optim import clip_gradients, make_optimizer, policy_gradient, split_parameters
from densecode.rl.tensors import masked_mean
from densecode.rl.progress import StepProgress, closing, sigint_handler
from densecode.rl.protocols import Algorithm, StepView, TaskSource, as_task_source, kl_weighted
from densecode.rl.rollout import (RolloutBatch, append_stop_tokens, build_batch, encode_prompts, reward_samples,
                                  sample_responses, score_batch, to_padded)
# resolve_checkpoint, check_resumable, resolve_checkpoint_or_none, config_fingerprint: also imported from here
from densecode.rl.run_dir import (RunDir, TrainState, check_resumable, config_fingerprint, load_model_state, read_checkpoint_meta,
                                  resolve_checkpoint, resolve_checkpoint_or_none, save_model_state, write_json)
from densecode.rl.settings import SamplingParams, TrainerSettings, due, seed_for
from densecode.rl.stats import (RunningMeans, mean_over_processes, phase_timer, per_token_algo_arrays, reward_stats,
                                rollout_stats)
from densecode.rl.value_head import PolicyWithValue, ReferencePolicy, disable_dropout, is_peft_model

logger = logging.getLogger(__name__)


def _kl_weight(reward_fn, cfg) -> float:
    """The reward's KL weight: the assembler's own; a plain callable is taken to use `reward.weights.kl`."""
    return float(((reward_fn.weights if kl_weighted(reward_fn) else cfg.reward.weights) or {}).get("kl", 0.0))


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
        # A KL reward or loss term (algo.grpo.beta > 0) needs the reference; KL to it is also every run's drift
        # diagnostic, so it is scored even when nothing uses it, unless train.log_reference_kl is off.
        needs_ref = _kl_weight(reward_fn, cfg) > 0 or algo.needs_reference or self.settings.log_reference_kl
        # A task source with per-sample KL loss weights (a multi-task run's beta_k) needs the reference too.
        self._kl_loss_hook = self.task_source.kl_loss_coefs if algo.kl_coef is not None else None
        if self._kl_loss_hook is not None:
            needs_ref = needs_ref or bool(self.task_source.uses_kl_loss(float(algo.kl_coef)))
        self.reference = ReferencePolicy(model) if needs_ref or is_peft_model(model) else None
        self.policy_value = PolicyWithValue(model, cfg.model.value_model, critic,
                                            with_value_head=algo.needs_value_head)
        self._policy_params, self._value_params = split_parameters(self.policy_value)
        self.optimizer = make_optimizer(self._policy_params, self._value_params, self.settings)
        self.policy_value, self.optimizer = self.accelerator.prepare(self.policy_value, self.optimizer)
        if self.reference is not None:
            self.reference.to(self.accelerator.device)
        self.update_rows = UpdateRows(self.settings, self.accelerator.num_processes)
        self.kl_ctl = make_kl_controller(cfg.algo, _kl_weight(reward_fn, cfg))
        self.state = TrainState()
        self.run = RunDir(self.run_dir, is_main=self.accelerator.is_main_process)
        self._last_batch: RolloutBatch | None = None
        self._stop_requested = False
        self._crash_hooks = None  # densecode.rl.crashpoints, armed by DENSECODE_CRASH_AT (the crash-safety test)
        self._watching_optimizer = False
        self._optimizer_stepped = False  # this step changed the weights (see _save_after_bad_input)

    @property
    def unwrapped(self) -> PolicyWithValue:
        return self.accelerator.unwrap_model(self.policy_value)

    @property
    def is_main(self) -> bool:
        return self.accelerator.is_main_process

    # ------------------------------------------------------------ one step

    def rollout(self, step: int) -> tuple[RolloutBatch, dict[str, float]]:
        s, proc = self.settings, self.accelerator.process_index
        prompts, tasks = self.task_source.train_batch(s.batch_size, seed_for(s.seed, step, proc, 1))
        temperature = float(self.algo.sampling_temperature(step))
        timings: dict[str, float] = {}
        kwargs = self.sampling.sampler_kwargs(temperature, self.task_source.prompt_stops(tasks))
        with phase_timer(timings, "generate"):
            responses = self.sampler(self.unwrapped.policy, self.tokenizer, prompts, n=self.algo.samples_per_prompt,
                                     seed=seed_for(s.seed, step, proc, 2), progress=False, **kwargs)
            # The EOS decision is an action too: keep the token that was sampled (a model may have
            # several end tokens) so the update credits stopping on the token the policy chose.
            append_stop_tokens(responses, self.tokenizer, stop_strings=self.sampling.train_stop_tokens)
        with phase_timer(timings, "score"):  # logπ_old, logπ_ref and V(s_t) of the sampled tokens, no grad
            batch = build_batch(self.tokenizer, prompts, tasks, responses, temperature, self.accelerator.device,
                                prompt_ids=encode_prompts(self.tokenizer, prompts))
            batch.step = step
            self.policy_value.eval()
            sources = score_batch(self.unwrapped, self.reference, batch, chunk_size=max(1, self.sampling.batch_size),
                                  with_values=self.algo.needs_value_head, score_pass=s.score_pass)
        timings.update(sources or {})
        return batch, timings

    def compute_rewards(self, batch: RolloutBatch) -> dict[str, float]:
        samples = reward_samples(batch, self.sample_builder, self.tokenizer, self.settings.code_regions)
        rb = self.reward_fn(samples)
        R = batch.response_ids.shape[1]
        dev = batch.response_ids.device
        rewards = to_padded(rb.total, R, dev)
        batch.samples = samples
        batch.rewards = rewards * batch.response_mask
        batch.components = {k: to_padded(v, R, dev) for k, v in (rb.components or {}).items()}
        batch.sequence_rewards = batch.rewards.sum(-1)
        batch.reward_outputs = rb
        return reward_stats(batch)

    def update(self, batch: RolloutBatch, step: int) -> dict[str, float]:
        cfg = self.settings
        B = batch.size
        n_mb = max(1, min(cfg.num_minibatches, B))
        gen = torch.Generator().manual_seed(seed_for(cfg.seed, step, self.accelerator.process_index, 3))
        means = RunningMeans()
        skipped = no_signal = 0
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
                parts, n_micro = self.update_rows.parts(batch, mb_idx, self.algo)
                if not parts:  # no row with a gradient: what their forward/backward would give is exactly 0
                    if cfg.skip_zero_gradient:
                        no_signal += 1
                        continue
                    zero_gradients(self._policy_params + self._value_params)  # Adam still steps, as without it
                for k, (mb, scale) in enumerate(parts):
                    last = k == len(parts) - 1
                    # Sync gradients across processes only on the last micro-batch.
                    ctx = self.accelerator.no_sync(self.policy_value) if not last else nullcontext()
                    with ctx:
                        out = self.policy_value(mb.input_ids, mb.attention_mask, mb.position_ids, mb.response_ids,
                                                temperature=batch.temperature, with_values=self.algo.needs_value_head)
                        loss, st = self.algo.loss(mb, out)
                        self.accelerator.backward(loss * scale / n_micro)
                    with torch.no_grad():
                        # approx_kl(π_old ‖ π) of this micro-batch, k3 (CleanRL), whatever the algorithm logs.
                        logratio = out.logprobs.detach() - mb.logprobs
                        mb_kl_sum += float(masked_mean(torch.exp(logratio) - 1 - logratio, mb.response_mask))
                        mb_kl_n += 1
                    for key, v in st.items():
                        means.add(key, v)
                    means.add("train/loss", loss.detach())
                grad_norm, vf_grad_norm = clip_gradients(self.accelerator, self.policy_value, self._policy_params,
                                                         self._value_params, cfg.max_grad_norm)
                if not (math.isfinite(grad_norm) and math.isfinite(vf_grad_norm)):
                    # A NaN/inf anywhere (loss, rewards, activations) poisons the all-reduced grads on
                    # every process alike, so every process skips this optimizer step together.
                    skipped += 1
                    self.optimizer.zero_grad(set_to_none=True)
                    continue
                no_signal += grad_norm == 0.0 and vf_grad_norm == 0.0  # every advantage 0 (algo.skip_zero_gradient)
                if cfg.skip_zero_gradient and grad_norm == 0.0 and vf_grad_norm == 0.0:
                    self.optimizer.zero_grad(set_to_none=True)
                    means.add("train/approx_kl", mb_kl_sum / max(mb_kl_n, 1))
                    continue
                means.add("train/grad_norm", grad_norm)
                if self._value_params:
                    means.add("train/vf_grad_norm", vf_grad_norm)
                self.optimizer.step()
                self.optimizer.zero_grad(set_to_none=True)
                minibatches_done += 1
                mb_kl = mb_kl_sum / max(mb_kl_n, 1)
                if cfg.early_stop_kl > 0 and self.accelerator.num_processes > 1:
                    # Every process must take the same number of updates (collectives): decide on the mean.
                    mb_kl = float(self.accelerator.reduce(
                        torch.tensor(mb_kl, device=self.accelerator.device), reduction="mean"))
                means.add("train/approx_kl", mb_kl)
                # CleanRL's target_kl: this minibatch was measured before its own update, so the policy has
                # moved at least this far from the rollout policy; stop the step's remaining epochs.
                if cfg.early_stop_kl > 0 and mb_kl > cfg.early_stop_kl:
                    early_stopped = 1.0
        self.policy_value.eval()
        stats = means.means()
        stats.update({"train/skipped_updates": float(skipped), "train/zero_gradient_minibatches": float(no_signal),
                      "train/early_stopped": early_stopped, "train/minibatches_done": float(minibatches_done),
                      **self.update_rows.stats()})
        if skipped:
            warnings.warn(f"step {step}: {skipped} optimizer update(s) skipped because the loss or gradients "
                          "were NaN/inf (weights unchanged by those updates)", RuntimeWarning, stacklevel=2)
        return stats

    def train_step(self, step: int) -> dict[str, float]:
        stats: dict[str, float] = {}
        with phase_timer(stats, "step"):
            batch, timings = self.rollout(step)                                  # 1. rollout (+ scoring)
            stats.update(timings)
            with phase_timer(stats, "reward"):
                stats.update(self.compute_rewards(batch))                        # 2. per-token rewards
            with phase_timer(stats, "update"):
                stats.update(self.algo.compute_advantages(batch))                # 3. advantages (and returns)
                batch.kl_coefs = self._sample_kl_coefs(batch)
                stats.update(self.update(batch, step))                           # 4. the policy/value update
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
            self._set_reward_kl(beta)
            stats["objective/kl_coef"] = beta
        dt = stats["time/step_s"]
        stats["perf/tokens_per_s"] = float(batch.response_mask.sum()) / max(dt, 1e-9)
        stats["perf/generate_tokens_per_s"] = float(batch.response_mask.sum()) / max(stats["time/generate_s"], 1e-9)
        self._last_batch = batch
        return mean_over_processes(self.accelerator, stats)

    def _set_reward_kl(self, beta: float) -> None:
        """The KL controller's β into the reward (an assembler without a kl component keeps its weights)."""
        if kl_weighted(self.reward_fn) and _kl_weight(self.reward_fn, self.cfg) > 0:
            try:
                self.reward_fn.set_weight("kl", beta)
            except DensecodeError:
                pass

    def _sample_kl_coefs(self, batch: RolloutBatch) -> torch.Tensor | None:
        """[B] weights of the algorithm's KL loss term from the task source's `kl_loss_coefs` hook, or None."""
        return sample_kl_coefs(self._kl_loss_hook, self.algo.kl_coef, batch)

    def policy_gradient(self, batch: RolloutBatch, rows: list[int]) -> torch.Tensor:
        """The StepView probe: densecode.rl.optim.policy_gradient at the current weights."""
        return policy_gradient(self.unwrapped, self._policy_params, batch, rows)

    def _rollout_stats(self, batch: RolloutBatch) -> dict[str, float]:
        return rollout_stats(batch)

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
        save_model_state(tmp, pv, self.tokenizer, self.optimizer, self._crash_point)
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
        if self._crash_hooks is not None:
            self._crash_hooks.at(phase, self.state.step, stage)

    def load_checkpoint(self, path: str | Path) -> None:
        path = resolve_checkpoint(path)
        meta = read_checkpoint_meta(path)
        check_resumable(path, meta, self.cfg)
        self.run.point_latest_at(path)
        load_model_state(path, meta, self.unwrapped, self.optimizer)
        self.kl_ctl.load_state_dict(meta["kl_controller"])
        self._set_reward_kl(self.kl_ctl.value)
        self.algo.load_state_dict(meta.get("algo") or {})
        self.task_source.load_state_dict(meta.get("task_source") or {})
        self.state.step = int(meta["step"])
        self.state.skipped_steps = int(meta.get("skipped_steps", 0))
        self.state.elapsed_s = float(meta.get("elapsed_s", 0.0))
        if self.is_main:
            logger.info(f"resumed from {path} at step {self.state.step}")

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
        bar = StepProgress(self.progress and self.is_main, total=total, initial=self.state.step,
                           desc=f"train {self.algo.name}")
        session_start, base_elapsed = time.perf_counter(), self.state.elapsed_s
        last_stats: dict[str, float] = {}
        interrupted = False
        with sigint_handler(self._on_sigint), closing(bar, self.run):
            if self.state.step == 0 and cfg.eval_every > 0:
                self.evaluate(0)
            while self.state.step < total:
                step = self.state.step
                self._optimizer_stepped = False
                try:
                    stats = self.train_step(step)
                except DensecodeError as exc:
                    raise self._save_after_bad_input(exc, step + 1) from None
                self.state.step = done = step + 1
                self.state.elapsed_s = base_elapsed + time.perf_counter() - session_start
                if stats.get("train/skipped_updates", 0) > 0:
                    self.state.skipped_steps += 1
                last_stats = stats
                if due(cfg.log_every, done, total):
                    self.run.write_metrics({"step": done, "elapsed_s": self.state.elapsed_s, **stats})
                if due(cfg.rollouts_every, done, total):
                    self.write_rollouts(done)
                if due(cfg.eval_every, done, total):
                    last_stats.update(self.evaluate(done))
                if cfg.save_every > 0 and done % cfg.save_every == 0 and done < total:
                    self.save_checkpoint()
                bar.update(stats, last_stats)
                if self._stop_requested:
                    interrupted = True
                    break
            self.save_checkpoint()
        if self.is_main:
            try:
                from densecode.rl.report import write_report

                write_report(self.run_dir)
                self.task_source.write_report(self.run_dir)  # a task source's own pictures (multi-task curves)
            except Exception as exc:  # noqa: BLE001 - a plotting problem must not lose a finished run
                logger.warning("could not write the learning-curve report: %s", exc)
        return {"step": self.state.step, "interrupted": interrupted, "last": last_stats}
