"""The run folder: config, metrics.jsonl + TensorBoard, rollouts.jsonl, eval_tasks.jsonl, atomic checkpoints, resume.

    <run>/config.yaml           written by the CLI
    <run>/metrics.jsonl         one row per logged step ("kind": "train") or eval ("kind": "eval")
    <run>/tensorboard/          the same scalars
    <run>/rollouts.jsonl        samples + per-token rewards every train.rollouts_every steps (`densecode explain`)
    <run>/eval_tasks.jsonl      per-task eval outcomes (paired comparisons between runs)
    <run>/checkpoints/step-N/   model/, value_head.pt, critic/, optimizer.pt, rng.pt, trainer_state.json (last)
    <run>/checkpoints/latest    the name of the checkpoint a resume continues from

A full disk (or any write error) while logging or checkpointing is one DensecodeError that names the last good
checkpoint, which stays complete and resumable (checkpoints are published by rename, logs are trimmed on resume).
"""

from __future__ import annotations

import errno
import json
import logging
import math
import os
import random
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from densecode.errors import DensecodeError
from densecode.rl.value_head import is_peft_model

logger = logging.getLogger(__name__)

LOGS = ("metrics.jsonl", "rollouts.jsonl", "eval_tasks.jsonl")


@dataclass
class TrainState:
    """The loop's counters, checkpointed in trainer_state.json."""

    step: int = 0  # completed steps
    skipped_steps: int = 0  # steps whose every optimizer update was skipped (non-finite gradients)
    elapsed_s: float = 0.0  # wall time over all sessions of this run


class RunDir:
    """One run's folder. Only the main process writes (`is_main`); the others' calls are no-ops."""

    def __init__(self, path: str | Path, *, is_main: bool = True):
        self.path = Path(path)
        self.is_main = is_main
        self._writer: Any = None  # SummaryWriter, False when TensorBoard is unavailable, None before first use
        self._purge_step: int | None = None

    @property
    def checkpoints(self) -> Path:
        return self.path / "checkpoints"

    # ------------------------------------------------------------ logs

    def open_session(self, step: int) -> None:
        """Make metrics.jsonl, rollouts.jsonl and eval_tasks.jsonl end where the training state is (`step`).

        Rows for steps after the last checkpoint were written by a session that died before saving; the
        resumed run writes them again (bit-identical training), so they are dropped, as is a torn last
        line. Starting at step 0 drops every row (the step-0 eval is redone). Each file is rewritten
        atomically (temp file, fsync, rename); TensorBoard gets purge_step for the same reason."""
        if not self.is_main:
            return
        self.path.mkdir(parents=True, exist_ok=True)
        for name in LOGS:
            if (self.path / name).is_file():
                _truncate_jsonl(self.path / name, step)
        self._purge_step = step + 1 if step else None

    def write_metrics(self, record: dict, kind: str = "train") -> None:
        if not self.is_main:
            return
        self._append("metrics.jsonl", [{"kind": kind, **record}])
        if self._writer is None:
            try:
                from torch.utils.tensorboard import SummaryWriter

                # purge_step hides events a killed session logged after the checkpoint we resumed from.
                self._writer = SummaryWriter(str(self.path / "tensorboard"), purge_step=self._purge_step)
            except Exception as exc:  # noqa: BLE001 - tensorboard missing or broken: JSONL still has everything
                logger.warning("TensorBoard logging disabled: %s", exc)
                self._writer = False
        if self._writer:
            step = int(record.get("step", 0))
            for k, v in record.items():
                if k not in ("step", "kind") and isinstance(v, (int, float)) and math.isfinite(v):
                    self._writer.add_scalar(k, v, step)
            self._writer.flush()

    def write_eval_tasks(self, step: int, rows: list[dict] | None) -> None:
        """Append an eval's per-task outcomes (one row per pass: greedy, sampled) to eval_tasks.jsonl, so runs can
        be compared task by task (paired bootstraps over tasks, benchmarks/experiments/dense_vs_sparse.py)."""
        if self.is_main and rows:  # a task source that keeps no per-task outcomes has none
            self._append("eval_tasks.jsonl", [{"step": step, **row} for row in rows])

    def write_rollouts(self, step: int, samples, reward_batch, algo_arrays: dict) -> None:
        """Append a batch's samples and per-token rewards to rollouts.jsonl (for `densecode explain`)."""
        from densecode.rewards import RewardBatch
        from densecode.rewards.explain import write_rollouts

        if not self.is_main or not isinstance(reward_batch, RewardBatch):
            return  # a custom reward_fn without the assembler's per-component outputs has nothing to explain
        with self._clear_write_errors(self.path / "rollouts.jsonl"):
            write_rollouts(self.path / "rollouts.jsonl", samples, reward_batch, step=step, algo=algo_arrays)

    def close(self) -> None:
        if self._writer:
            self._writer.close()
        self._writer = None

    def _append(self, name: str, rows: list[dict]) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        with self._clear_write_errors(self.path / name), open(self.path / name, "a") as f:
            f.writelines(json.dumps(row, default=_json_default) + "\n" for row in rows)

    def _clear_write_errors(self, target: Path):
        return _WriteErrors(self, target)

    def write_error(self, target: Path, exc: BaseException, what: str = "") -> DensecodeError:
        """One clear error for a failed write (a full disk, most often), naming what is safe to resume from."""
        previous = resolve_checkpoint_or_none(self.path)
        kept = f"{previous} is kept and `latest` still names it" if previous else "no earlier checkpoint exists"
        reason = getattr(exc, "strerror", None) or (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        where = target.parent if target.parent.exists() else self.path
        try:
            free = f"{shutil.disk_usage(where).free / 2**20:.0f} MiB free; "
        except OSError:
            free = ""
        return DensecodeError(f"could not write {what}{target}: {reason} ({free}{kept}); free space on that disk or "
                              f"choose another --output-dir, then continue with --resume {self.path}")

    # ------------------------------------------------------------ checkpoints

    def save_checkpoint(self, step: int, write_files: Callable[[Path], None],
                        crash_point: Callable[[str, int], None] = lambda phase, stage: None) -> Path:
        """Atomic and durable: `write_files` fills checkpoints/.tmp-step-N (trainer_state.json last), every file and
        directory in it is fsynced, it is renamed to checkpoints/step-N, checkpoints/ is fsynced, then `latest`
        is pointed at it the same way (temp file, fsync, rename, fsync). A kill at any moment leaves every step-N
        complete and `latest` naming a complete one (or the previous one); leftover .tmp-* directories are
        removed by the next save or resume. A write error removes the partial copy and raises DensecodeError."""
        ckpt_root = self.checkpoints
        name = f"step-{step:06d}"
        tmp = ckpt_root / f".tmp-{name}"
        try:
            ckpt_root.mkdir(parents=True, exist_ok=True)
            _remove_stale(ckpt_root)
            tmp.mkdir()
            write_files(tmp)
            _fsync_tree(tmp)
        except (OSError, RuntimeError) as exc:  # torch.save reports a full disk as a RuntimeError
            shutil.rmtree(tmp, ignore_errors=True)
            raise self.write_error(ckpt_root / name, exc, "checkpoint ") from None
        crash_point("checkpoint", 3)
        final = ckpt_root / name
        if final.exists():
            # Same step saved again (a resume that ends where it started): move the old copy aside
            # first, so a kill between the two renames still leaves a complete step-N (.old-*).
            os.replace(final, ckpt_root / f".old-{name}")
        os.replace(tmp, final)
        _fsync_dir(ckpt_root)
        crash_point("checkpoint", 4)
        latest_tmp = ckpt_root / ".tmp-latest"
        _write_durable(latest_tmp, name + "\n")
        crash_point("checkpoint", 5)
        os.replace(latest_tmp, ckpt_root / "latest")
        _fsync_dir(ckpt_root)
        _remove_stale(ckpt_root)
        return final

    def point_latest_at(self, path: Path) -> None:
        """This run continues from `path`: make `latest` say so (it was missing after a kill between a
        checkpoint's rename and the pointer's, or names a later checkpoint of an abandoned continuation)."""
        ckpt_root = self.checkpoints
        if not self.is_main or path.parent.resolve() != ckpt_root.resolve():
            return
        latest = ckpt_root / "latest"
        if latest.is_file() and latest.read_text().strip() == path.name:
            return
        _write_durable(ckpt_root / ".tmp-latest", path.name + "\n")
        os.replace(ckpt_root / ".tmp-latest", latest)
        _fsync_dir(ckpt_root)


class _WriteErrors:
    """Turns an OSError of a log write (ENOSPC, EDQUOT, EIO, ...) into the run folder's clear error."""

    def __init__(self, run_dir: RunDir, target: Path):
        self.run_dir, self.target = run_dir, target

    def __enter__(self):
        return None

    def __exit__(self, typ, exc, tb):
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EFBIG):
            raise self.run_dir.write_error(self.target, exc) from None
        return False


def save_model_state(tmp: Path, pv, tokenizer, optimizer, crash_point: Callable[[str, int], None]) -> None:
    """The weights (policy, value head, critic), the tokenizer, the optimizer and the RNGs into checkpoint dir `tmp`."""
    pv.policy.save_pretrained(tmp / "model", safe_serialization=True)
    tokenizer.save_pretrained(tmp / "model")
    if pv.value_head is not None:
        torch.save(pv.value_head.state_dict(), tmp / "value_head.pt")
    if pv.critic is not None:
        pv.critic.save_pretrained(tmp / "critic", safe_serialization=True)
    crash_point("checkpoint", 1)
    torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
    torch.save(rng_state(), tmp / "rng.pt")
    crash_point("checkpoint", 2)


def load_model_state(path: Path, meta: dict, pv, optimizer) -> None:
    """save_model_state's counterpart, exactly (resume is bit-for-bit)."""
    if meta.get("lora") != is_peft_model(pv.policy):
        raise DensecodeError(f"checkpoint {path} was trained with lora.enabled={meta.get('lora')}; "
                             f"this run has lora.enabled={is_peft_model(pv.policy)} (make them match)")
    load_weights(pv.policy, path / "model")
    if pv.value_head is not None and (path / "value_head.pt").is_file():
        pv.value_head.load_state_dict(torch.load(path / "value_head.pt", map_location="cpu"))
    if pv.critic is not None and (path / "critic").is_dir():
        load_weights(pv.critic, path / "critic")
    optimizer.load_state_dict(torch.load(path / "optimizer.pt", map_location="cpu", weights_only=False))
    set_rng_state(torch.load(path / "rng.pt", map_location="cpu", weights_only=False))


def read_checkpoint_meta(path: Path) -> dict:
    try:
        return json.loads((path / "trainer_state.json").read_text())
    except (OSError, ValueError) as exc:
        raise DensecodeError(f"checkpoint {path}: unreadable trainer_state.json ({exc}); resume from an "
                             "earlier checkpoints/step-N directory") from None


def write_json(path: Path, obj: Any) -> None:
    path.write_text(json.dumps(obj, indent=2, default=_json_default))


def _json_default(o):
    if isinstance(o, (np.floating, np.integer)):
        return o.item()
    if torch.is_tensor(o):
        return o.item() if o.numel() == 1 else o.tolist()
    return str(o)


def rng_state() -> dict:
    return {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
    }


def set_rng_state(state: dict) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if state.get("cuda") is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def resolve_checkpoint(path: str | Path) -> Path:
    """A checkpoint dir, or a run dir / checkpoints dir whose `latest` names one.

    `latest` wins over a newer step-N (a kill after that checkpoint's rename but before the pointer's update:
    the run continues from the previous one, which is safe; step-N is rewritten when reached again). Only
    when `latest` is missing or names no complete checkpoint is the newest complete checkpoints/step-N used:
    only complete checkpoints ever get that name (load_checkpoint then points `latest` at it)."""
    path = Path(path)
    if (path / "trainer_state.json").is_file():
        return path
    for root in (path / "checkpoints", path):
        latest = root / "latest"
        if latest.is_file():
            cand = root / latest.read_text().strip()
            if (cand / "trainer_state.json").is_file():
                return cand
        complete = sorted(d for d in root.glob("step-*") if (d / "trainer_state.json").is_file())
        if complete:
            return complete[-1]
    raise DensecodeError(f"--resume {path}: no checkpoint there (expected a run directory with "
                         "checkpoints/latest, or a checkpoints/step-N directory with trainer_state.json)")


def check_resumable(path: Path, meta: dict, cfg) -> None:
    """DensecodeError when checkpoint `path` (its trainer_state.json `meta`) was trained with settings `cfg` cannot
    continue (another domain, algorithm, LoRA on/off, value model): its weights and optimizer state mean
    something else there."""
    saved, ours = meta.get("config_fingerprint"), config_fingerprint(cfg)
    if saved is None or saved == ours:
        return
    diff = ", ".join(f"{k}: {saved.get(k)!r} in the checkpoint, {ours.get(k)!r} now"
                     for k in sorted(set(saved) | set(ours)) if saved.get(k) != ours.get(k))
    raise DensecodeError(f"--resume {path}: the checkpoint was trained with a different config ({diff}); resume "
                         "with the run's own config.yaml (drop --config/--domain/--algo/--set for these), or "
                         "start a new run with another --output-dir")


def resolve_checkpoint_or_none(path: str | Path) -> Path | None:
    try:
        return resolve_checkpoint(path)
    except DensecodeError:
        return None


def config_fingerprint(cfg) -> dict[str, Any]:
    """The settings a checkpoint cannot be resumed across (they change what the saved state means)."""
    return {
        "domain": str(cfg.domain),
        "algo": cfg.algo.name,
        "lora": bool(cfg.lora.enabled),
        "value_model": cfg.model.value_model,
    }


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_tree(root: Path) -> None:
    """fsync every file, then every directory (deepest first), so a rename of `root` publishes durable data."""
    dirs = [root]
    for dirpath, dirnames, filenames in os.walk(root):
        for name in filenames:
            fd = os.open(os.path.join(dirpath, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        dirs += [Path(dirpath) / d for d in dirnames]
    for d in reversed(dirs):
        _fsync_dir(d)


def _write_durable(path: Path, text: str) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())


def _remove_stale(ckpt_root: Path) -> None:
    """Leftovers of a killed save: .tmp-* (never complete until renamed) and .old-* (a replaced copy)."""
    for stale in list(ckpt_root.glob(".tmp-*")) + list(ckpt_root.glob(".old-*")):
        if stale.is_dir():
            shutil.rmtree(stale, ignore_errors=True)
        else:
            stale.unlink(missing_ok=True)


def _truncate_jsonl(path: Path, keep_to_step: int) -> None:
    """Keep the rows with step <= keep_to_step (none when it is 0); drop a torn or unparsable row."""
    kept, dropped = [], 0
    with open(path, "rb") as fh:
        for raw in fh:
            try:
                row = json.loads(raw.decode("utf-8"))
                step = row.get("step") if isinstance(row, dict) else None
                ok = raw.endswith(b"\n") and keep_to_step > 0 and (step is None or int(step) <= keep_to_step)
            except (ValueError, TypeError):
                ok = False
            if ok:
                kept.append(raw)
            else:
                dropped += 1
    if not dropped:
        return
    tmp = path.with_name(f".tmp-{path.name}")
    with open(tmp, "wb") as fh:
        fh.writelines(kept)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)
    logger.info("%s: dropped %d row(s) written after step %d (the run continues from there)", path, dropped,
                keep_to_step)


def load_weights(model, directory: Path) -> None:
    """Load save_pretrained weights (full model or LoRA adapter) into an existing model, exactly."""
    from safetensors.torch import load_file

    if is_peft_model(model):
        from peft import set_peft_model_state_dict

        sd = load_file(str(directory / "adapter_model.safetensors"))
        set_peft_model_state_dict(model, sd)
        return
    files = sorted(directory.glob("*.safetensors"))
    if not files:
        raise DensecodeError(f"checkpoint {directory} has no .safetensors weights")
    sd = {}
    for f in files:
        sd.update(load_file(str(f)))
    try:
        missing, unexpected = model.load_state_dict(sd, strict=False)
    except RuntimeError as exc:  # shape mismatch: another model size or vocabulary
        first = str(exc).strip().splitlines()[-1].strip()
        raise DensecodeError(f"checkpoint {directory} does not match the model ({first}); resume with the model "
                             "the run was trained with (its config.yaml model.name_or_path)") from None
    tied = {k for k in missing if "lm_head" in k or "embed" in k or "wte" in k}
    if set(missing) - tied or unexpected:
        raise DensecodeError(f"checkpoint {directory} does not match the model: missing {sorted(set(missing) - tied)[:5]}, "
                             f"unexpected {sorted(unexpected)[:5]}")
    if hasattr(model, "tie_weights"):
        model.tie_weights()
