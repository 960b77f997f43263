"""Training survives SIGKILL at any point: kill the trainer 11 times, `--resume` each time, same final weights.

The kills are deterministic (densecode.rl.crashpoints: the trainer SIGKILLs itself at phase X of step N), so the
test hits each phase — sampling, the sandbox reward batch, the update, every stage of the checkpoint write —
whatever the machine's load. After every kill: each checkpoints/step-N on disk is complete and loads; no
process of the killed trainer is left. At the end: metrics.jsonl and rollouts.jsonl have each step exactly
once, and the weights and the optimizer state equal an uninterrupted run's with the same seed, bit for bit
(same seeds per step, same CPU kernels, single thread: nothing in the loop is order-dependent).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
STEPS = 6

# (DENSECODE_CRASH_AT, the checkpoint the next --resume starts from). save_every=2: checkpoints at steps 2, 4 and
# 6 (the end), so metrics rows for steps 3 and 5 are on disk beyond the last checkpoint before some kills.
SCHEDULE = [
    ("sample:1:2", 0),       # mid-generation of the first step: no checkpoint yet, restart at 0
    ("reward:1:1", 0),       # one program of the sandbox batch done, the rest queued/running
    ("update:2:1", 0),       # after the first optimizer step of step 2 (weights half-updated in memory)
    ("checkpoint:2:1", 0),   # .tmp-step-000002 holds the model only
    ("checkpoint:2:3", 0),   # .tmp-step-000002 complete, not yet renamed
    ("checkpoint:2:4", 2),   # renamed to step-000002, no `latest` yet: the newest complete step-N is used
    ("sample:3:1", 2),       # (the resume above pointed `latest` at step-000002)
    ("reward:4:2", 2),       # metrics/rollouts of step 3 on disk beyond the checkpoint: trimmed on resume
    ("checkpoint:4:5", 2),   # step-000004 complete, `latest` still names step-000002: that one is used
    ("update:5:2", 4),       # (step-000004 was written again over the old copy, `latest` moved on)
    ("checkpoint:6:2", 4),   # the final save, optimizer written, no trainer_state.json
]


def _train_cmd(model_dir: Path, run: Path, resume: bool) -> list[str]:
    cmd = [sys.executable, "-m", "densecode.cli", "train", "--domain", "crash_domain:SandboxEchoDomain", "--model", str(model_dir),
           "--steps", str(STEPS), "--no-progress"]
    cmd += ["--resume", str(run)] if resume else ["--output-dir", str(run)]
    for s in ("train.batch_size=2", "generation.batch_size=2", "generation.max_new_tokens=12", "train.eval_every=0",
              "train.save_every=2", "train.log_every=1", "train.rollouts_every=1", "train.num_threads=1",
              "algo.ppo.epochs=2", "algo.num_minibatches=2"):
        cmd += ["--set", s]
    return cmd


def _run(cmd: list[str], crash_at: str | None, log: Path) -> int:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "sim"), str(ROOT / "tests" / "rl")]),
           "OMP_NUM_THREADS": "1"}
    env.pop("DENSECODE_CRASH_AT", None)
    if crash_at:
        env["DENSECODE_CRASH_AT"] = crash_at
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT, start_new_session=True)
        try:
            rc = proc.wait(timeout=600)
        finally:
            _wait_for_group_gone(proc.pid)
    return rc


def _wait_for_group_gone(pgid: int, timeout: float = 60.0) -> None:
    """Every process the trainer started (sandbox workers and their programs) must go when it dies."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        if time.monotonic() > deadline:
            os.killpg(pgid, signal.SIGKILL)
            pytest.fail(f"processes of the killed trainer (process group {pgid}) still alive {timeout:.0f} s later")
        time.sleep(0.2)


def _check_checkpoints_loadable(run: Path, resume_point: int) -> list[int]:
    """Every step-N directory is complete and loads; --resume would start from `resume_point`; the steps present."""
    from safetensors.torch import load_file

    from densecode.rl.trainer import resolve_checkpoint

    steps = []
    for d in sorted((run / "checkpoints").glob("step-*")):
        meta = json.loads((d / "trainer_state.json").read_text())
        assert int(d.name.split("-")[1]) == meta["step"]
        assert load_file(str(d / "model" / "model.safetensors"))
        torch.load(d / "optimizer.pt", map_location="cpu", weights_only=False)
        torch.load(d / "rng.pt", map_location="cpu", weights_only=False)
        steps.append(meta["step"])
    if resume_point:
        assert resolve_checkpoint(run).name == f"step-{resume_point:06d}"
    else:
        assert not steps
    return steps


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.slow
@pytest.mark.timeout(3000)
def test_training_killed_eleven_times_ends_with_the_uninterrupted_weights(tiny_model_dir, tmp_path):
    ref, run = tmp_path / "reference", tmp_path / "crashed"
    assert _run(_train_cmd(tiny_model_dir, ref, resume=False), None, tmp_path / "ref.log") == 0, \
        (tmp_path / "ref.log").read_text()[-3000:]

    first = True
    for crash_at, resume_point in SCHEDULE:
        log = tmp_path / f"{crash_at.replace(':', '_')}.log"
        rc = _run(_train_cmd(tiny_model_dir, run, resume=not first), crash_at, log)
        first = False
        assert rc == -signal.SIGKILL, f"{crash_at}: expected the trainer to be SIGKILLed there, got rc {rc}\n" \
                                      + log.read_text()[-3000:]
        _check_checkpoints_loadable(run, resume_point)
    # The last session runs to the end without a crash point.
    log = tmp_path / "final.log"
    assert _run(_train_cmd(tiny_model_dir, run, resume=True), None, log) == 0, log.read_text()[-3000:]
    assert _check_checkpoints_loadable(run, STEPS) == [2, 4, 6]
    assert not list((run / "checkpoints").glob(".tmp-*")) and not list((run / "checkpoints").glob(".old-*"))

    # Each step's metrics and rollouts exactly once, equal to the uninterrupted run's.
    train_rows = [r for r in _rows(run / "metrics.jsonl") if r["kind"] == "train"]
    ref_rows = [r for r in _rows(ref / "metrics.jsonl") if r["kind"] == "train"]
    assert [r["step"] for r in train_rows] == list(range(1, STEPS + 1))
    for mine, theirs in zip(train_rows, ref_rows):
        for key in theirs:
            if not key.startswith(("time/", "perf/", "elapsed")):
                assert mine[key] == theirs[key], (mine["step"], key)
    rollout_steps = Counter(r["step"] for r in _rows(run / "rollouts.jsonl"))
    assert rollout_steps == Counter(r["step"] for r in _rows(ref / "rollouts.jsonl"))

    from safetensors.torch import load_file

    final, expected = run / "checkpoints" / "step-000006", ref / "checkpoints" / "step-000006"
    w, w_ref = load_file(str(final / "model" / "model.safetensors")), load_file(str(expected / "model" / "model.safetensors"))
    assert w.keys() == w_ref.keys()
    for k in w_ref:
        assert torch.equal(w[k], w_ref[k]), k
    opt = torch.load(final / "optimizer.pt", weights_only=False)["state"]
    opt_ref = torch.load(expected / "optimizer.pt", weights_only=False)["state"]
    for i in opt_ref:
        for k, v in opt_ref[i].items():
            assert torch.equal(opt[i][k], v), (i, k)
    assert json.loads((final / "trainer_state.json").read_text())["step"] == STEPS


def test_crash_point_spec_is_checked():
    from densecode.errors import DensecodeError
    from densecode.rl.crashpoints import CrashPoint

    assert CrashPoint.parse("update:3:2") == CrashPoint("update", 3, 2)
    assert CrashPoint.parse("sample:1") == CrashPoint("sample", 1, 1)
    with pytest.raises(DensecodeError, match="PHASE:STEP"):
        CrashPoint.parse("during:3")
