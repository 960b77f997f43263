"""Bad input to `densecode train`: one test per row of docs/reliability.md "Training and inputs".

Each: exit code 2, ONE line on stderr naming the thing and the fix, and nothing already written is lost
(input files untouched, a run's config.yaml / checkpoints / metrics kept, finished steps saved).
"""

from __future__ import annotations

import errno
import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest

from densecode.cli import main
from densecode.domains import Domain, DomainOptions, register_domain

FAST = ["--no-progress", "--set", "train.batch_size=2", "--set", "generation.batch_size=2", "--set",
        "generation.max_new_tokens=8", "--set", "train.eval_every=0", "--set", "train.num_threads=1"]


def _error_line(capsys) -> str:
    """The one stderr line `densecode train: error: ...` (log lines from before the error are allowed)."""
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    errors = [line for line in err if line.startswith("densecode train: error:")]
    assert len(errors) == 1, err[-10:]
    assert err[-1] == errors[0]
    return errors[0]


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


CODE_ROW = {"prompt": "def add(a, b):\n", "tests": ["assert add(1, 2) == 3"]}


def _train_code(tmp_path, tasks_file: Path, tiny_model_dir) -> int:
    return main(["train", "--domain", "code", "--model", str(tiny_model_dir), "--output-dir", str(tmp_path / "run"),
                 "--steps", "1", "--set", f"tasks.path={tasks_file}"] + FAST)


# ------------------------------------------------------------------------------------------- task files


def test_malformed_jsonl_row(tiny_model_dir, tmp_path, capsys):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps(CODE_ROW) + "\n" + '{"prompt": "def f(:\n')
    before = tasks.read_bytes()
    assert _train_code(tmp_path, tasks, tiny_model_dir) == 2
    line = _error_line(capsys)
    assert f"{tasks}:2: not valid JSON" in line and "each line must be one JSON object" in line
    assert tasks.read_bytes() == before and not (tmp_path / "run").exists()


def test_non_utf8_jsonl_row(tiny_model_dir, tmp_path, capsys):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_bytes(json.dumps(CODE_ROW).encode() + b"\n" + b'{"prompt": "caf\xe9"}\n')
    assert _train_code(tmp_path, tasks, tiny_model_dir) == 2
    line = _error_line(capsys)
    assert f"{tasks}:2: not UTF-8 text" in line and "save the file as UTF-8" in line
    assert not (tmp_path / "run").exists()


def test_empty_task_file(tiny_model_dir, tmp_path, capsys):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("\n\n")
    assert _train_code(tmp_path, tasks, tiny_model_dir) == 2
    line = _error_line(capsys)
    assert f"{tasks}: no tasks in the file" in line and "prompt+tests rows" in line
    assert not (tmp_path / "run").exists()


# ------------------------------------------------------------------------------------------- prompts


@dataclass
class LongPromptOptions(DomainOptions):
    long_from_call: int = 3  # train batches before this one have short prompts, from it on too long ones


@register_domain
class LongPromptDomain(Domain):
    """Short prompts for the first batches, then one longer than the tiny model's 512-token context."""

    name = "long-prompt-toy"
    Options = LongPromptOptions
    default_weights: ClassVar[dict[str, float]] = {"zero": 1.0}
    components: ClassVar[dict[str, str]] = {"zero": f"{__name__}:ZeroComponent"}
    calls = 0

    def tasks(self, split, n, seed):
        if split == "train":
            self.calls += 1
        long = split == "train" and self.calls >= self.options.long_from_call
        prompt = "x = 1\n" * 400 if long else "x = "
        return [{"prompt": prompt, "task_id": f"{split}-{self.calls}-{i}"} for i in range(n)]

    def score(self, tasks, responses):
        return [{"outcome": "failure", "score": 0.0} for _ in responses]


class ZeroComponent:
    name = "zero"

    def __call__(self, samples):
        from densecode.rewards.base import ComponentOutput

        return [ComponentOutput(np.zeros(s.n_tokens, dtype=np.float32), [], {}) for s in samples]


def test_prompt_longer_than_the_context_saves_the_steps_done(tiny_model_dir, tmp_path, capsys):
    run = tmp_path / "run"
    rc = main(["train", "--domain", "long-prompt-toy", "--model", str(tiny_model_dir), "--output-dir", str(run),
               "--steps", "5", "--set", "train.save_every=0", "--set", "reward.code_regions=completion"] + FAST)
    assert rc == 2
    line = _error_line(capsys)
    assert "step 3: prompt of" in line and "512-token context" in line and "shorten the prompt" in line
    assert f"continue with --resume {run}" in line
    # Steps 1 and 2 were not lost: a checkpoint of step 2 (save_every=0 would have saved only at the end).
    from densecode.rl.trainer import resolve_checkpoint

    assert resolve_checkpoint(run).name == "step-000002"
    rows = [json.loads(r) for r in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if r["kind"] == "train"] == [1, 2]


# ------------------------------------------------------------------------------------------- config


def test_config_with_an_unknown_key(tmp_path, capsys):
    cfg = tmp_path / "my.yaml"
    cfg.write_text("domain: robotics\ntrain:\n  stpes: 3\n")
    assert main(["train", "--config", str(cfg), "--output-dir", str(tmp_path / "run")]) == 2
    line = _error_line(capsys)
    assert str(cfg) in line and "train.stpes" in line and "steps" in line
    assert not (tmp_path / "run").exists()


def test_config_with_a_wrong_type(tmp_path, capsys):
    assert main(["train", "--domain", "robotics", "--output-dir", str(tmp_path / "run"),
                 "--set", "train.lr=fast"]) == 2
    line = _error_line(capsys)
    assert "train.lr" in line and "expects a number" in line
    assert not (tmp_path / "run").exists()


# ------------------------------------------------------------------------------------------- model


def test_model_directory_with_a_missing_file(tiny_model_dir, tmp_path, capsys):
    model = tmp_path / "model"
    shutil.copytree(tiny_model_dir, model)
    (model / "model.safetensors").unlink()
    assert main(["train", "--domain", "robotics", "--model", str(model), "--output-dir", str(tmp_path / "run"),
                 "--steps", "1"] + FAST) == 2
    line = _error_line(capsys)
    assert f"could not load model weights from {model}" in line and "no file named" in line and "model.safetensors" in line
    assert "copy it whole" in line
    assert not (tmp_path / "run").exists()


def test_tokenizer_that_does_not_match_the_model(tiny_model_dir, tmp_path, capsys):
    from densecode.testing import make_tiny_model

    other = make_tiny_model(tmp_path / "bigger-vocab", vocab_size=512)
    model = tmp_path / "model"
    shutil.copytree(tiny_model_dir, model)
    for f in other.iterdir():
        if f.name.startswith(("tokenizer", "special_tokens", "vocab", "merges")):
            shutil.copy(f, model / f.name)
    assert main(["train", "--domain", "robotics", "--model", str(model), "--output-dir", str(tmp_path / "run"),
                 "--steps", "1"] + FAST) == 2
    line = _error_line(capsys)
    assert f"{model}" in line and "tokens but the model's embedding has only" in line and "different checkpoints" in line
    assert not (tmp_path / "run").exists()


# ------------------------------------------------------------------------------------------- checkpoints


def test_full_disk_while_writing_a_checkpoint(tiny_model_dir, tmp_path, capsys, monkeypatch):
    import torch

    import densecode.rl.trainer as trainer_mod

    real_save = torch.save

    def save_on_a_full_disk(obj, f, *a, **kw):
        if ".tmp-step-000002" in str(f):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_save(obj, f, *a, **kw)

    monkeypatch.setattr(trainer_mod.torch, "save", save_on_a_full_disk)
    run = tmp_path / "run"
    rc = main(["train", "--domain", "robotics", "--model", str(tiny_model_dir), "--output-dir", str(run),
               "--steps", "3", "--set", "train.save_every=1"] + FAST)
    assert rc == 2
    line = _error_line(capsys)
    assert f"could not write checkpoint {run / 'checkpoints' / 'step-000002'}: No space left on device" in line
    assert "step-000001 is kept" in line and f"continue with --resume {run}" in line
    ckpts = run / "checkpoints"
    assert (ckpts / "latest").read_text().strip() == "step-000001"
    assert sorted(p.name for p in ckpts.iterdir()) == ["latest", "step-000001"]  # the temp dir is gone
    monkeypatch.setattr(trainer_mod.torch, "save", real_save)
    assert main(["train", "--resume", str(run), "--steps", "3"] + FAST) == 0  # space is back: continue
    rows = [json.loads(r) for r in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if r["kind"] == "train"] == [1, 2, 3]


def test_resume_directory_from_a_different_config(tiny_model_dir, tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["train", "--domain", "robotics", "--model", str(tiny_model_dir), "--output-dir", str(run),
                 "--steps", "1"] + FAST) == 0
    before = _snapshot(run)
    capsys.readouterr()
    assert main(["train", "--resume", str(run), "--algo", "grpo", "--steps", "2"] + FAST) == 2
    line = _error_line(capsys)
    assert f"--resume {run / 'checkpoints' / 'step-000001'}" in line
    assert "algo: 'ppo' in the checkpoint, 'grpo' now" in line and "another --output-dir" in line
    assert _snapshot(run) == before  # config.yaml, checkpoint and metrics untouched


def test_bad_input_after_the_update_saves_nothing_half_done(tiny_model_dir, tmp_path):
    """An error raised after the step's optimizer step must not be checkpointed as the previous step."""
    from tests.helpers import make_cfg, make_trainer

    from densecode.errors import DensecodeError
    from densecode.rl.trainer import resolve_checkpoint_or_none

    tr = make_trainer(make_cfg(tiny_model_dir, tmp_path), tmp_path)
    real = tr._rollout_stats  # runs after update() in train_step

    def fails_in_step_two(batch):
        if tr.state.step == 1:
            raise DensecodeError("a late problem")
        return real(batch)

    tr._rollout_stats = fails_in_step_two
    with pytest.raises(DensecodeError, match=r"^step 2: a late problem$"):
        tr.train(steps=3)
    assert resolve_checkpoint_or_none(tmp_path) is None  # step 1 + half of step 2 is not "step 1"
