"""A sweep of `densecode train` runs (arms x seeds), each in its own folder, N at a time, resumable, one progress bar.

The comparison benchmarks (benchmarks/experiments/dense_vs_sparse.py, benchmarks/experiments/optimizers.py) describe
their runs as `RunSpec`s and call `run_sweep`. Each run is the CLI itself (`python -m densecode.cli train ...` in a
subprocess, its output in `<run folder>.log`), so the numbers are what `densecode train` gives. Rerunning a sweep
- skips a finished run (its latest checkpoint is at the run's last step),
- continues a crashed or killed one from its latest checkpoint (`densecode train --resume <folder>`; a run killed
  before its first checkpoint restarts from step 0 with its config.yaml),
- refuses a folder whose run was started with other settings (sweep.json records them), naming the fix.
With `archive_dir`, each run that finishes is also archived there (densecode.eval.run_archive: its result files,
no weights), and a run missing here whose archive is there is restored and counts as finished: a sweep longer than
the machine it runs on continues on the next one from the archives kept with the project.
A failed run does not stop the others; the sweep reports every failure, with its log, at the end.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from densecode.errors import DensecodeError
from densecode.eval.run_archive import archived_step, pack, restore_if_archived

SPEC_FILE = "sweep.json"


@dataclass
class RunSpec:
    name: str  # e.g. "dense-seed0"
    run_dir: Path
    config: str  # YAML path or a shipped config's name
    steps: int
    overrides: list[str] = field(default_factory=list)  # --set KEY=VALUE items
    extra_args: list[str] = field(default_factory=list)  # e.g. ["--model", "densecode-tiny"]

    def settings(self) -> dict:
        d = asdict(self)
        d.pop("run_dir")
        d.pop("name")
        return d

    @property
    def log_path(self) -> Path:
        return self.run_dir.with_name(self.run_dir.name + ".log")


def latest_step(run_dir: Path) -> int | None:
    """The step of the run's latest complete checkpoint (None: no checkpoint)."""
    latest = run_dir / "checkpoints" / "latest"
    try:
        name = latest.read_text().strip()
        state = json.loads((run_dir / "checkpoints" / name / "trainer_state.json").read_text())
        return int(state["step"])
    except (OSError, ValueError, KeyError):
        return None


def logged_step(run_dir: Path) -> int:
    """The last training step in the run's metrics.jsonl (0 when none): the progress bar's view."""
    path = run_dir / "metrics.jsonl"
    step = 0
    try:
        with open(path, "rb") as fh:
            for raw in fh:
                try:
                    row = json.loads(raw)
                except ValueError:
                    continue
                if row.get("kind") == "train":
                    step = max(step, int(row.get("step", 0)))
    except OSError:
        pass
    return step


def run_state(spec: RunSpec) -> str:
    """"finished", "partial" (started, not finished: resume it) or "new"."""
    step = latest_step(spec.run_dir)
    if step is None:
        step = archived_step(spec.run_dir)
    if step is not None and step >= spec.steps:
        return "finished"
    if spec.run_dir.exists() and any(spec.run_dir.iterdir()):
        return "partial"
    return "new"


def check_settings(spec: RunSpec) -> None:
    """A run folder is reused only for the settings it was started with."""
    path = spec.run_dir / SPEC_FILE
    if not path.is_file():
        return
    before = json.loads(path.read_text())
    if before != spec.settings():
        changed = sorted(k for k in set(before) | set(spec.settings()) if before.get(k) != spec.settings().get(k))
        raise DensecodeError(f"{spec.run_dir} holds a run started with other settings ({', '.join(changed)} differ: "
                             f"{ {k: before.get(k) for k in changed} } then, { {k: spec.settings().get(k) for k in changed} } "
                             "now); pass another --out, or delete that folder to rerun it")


def train_command(spec: RunSpec, state: str, python: str = sys.executable) -> list[str]:
    if state == "partial" and (spec.run_dir / "config.yaml").is_file():
        # The run's own config.yaml holds every override; the checkpoint's fingerprint is checked against it.
        return [python, "-m", "densecode.cli", "train", "--resume", str(spec.run_dir), "--no-progress"]
    cmd = [python, "-m", "densecode.cli", "train", "--config", spec.config, "--output-dir", str(spec.run_dir),
           "--steps", str(spec.steps), "--no-progress", *spec.extra_args]
    for kv in spec.overrides:
        cmd += ["--set", kv]
    return cmd


def prune_checkpoints(run_dir: Path) -> None:
    """Keep only the checkpoint `latest` names (a finished run's final weights, for re-scoring)."""
    root = run_dir / "checkpoints"
    try:
        keep = (root / "latest").read_text().strip()
    except OSError:
        return
    for path in root.glob("step-*"):
        if path.name != keep and path.is_dir():
            shutil.rmtree(path, ignore_errors=True)


def restore_archived(specs: list[RunSpec], archive_dir: Path) -> None:
    """Restore each run that is not finished here but archived in archive_dir (a previous machine's run)."""
    for spec in specs:
        if run_state(spec) == "finished":
            continue
        step = restore_if_archived(archive_dir, spec.run_dir, spec.settings(), SPEC_FILE)
        if step is not None:
            print(f"[{spec.name}] restored from {archive_dir} (finished at step {step})", file=sys.stderr, flush=True)


def run_sweep(specs: list[RunSpec], *, parallel: int = 1, progress: bool = True, python: str = sys.executable,
              keep_checkpoints: bool = False, poll_s: float = 2.0,
              archive_dir: Path | None = None) -> dict[str, float]:
    """Train every spec not finished yet, `parallel` at a time; returns {name: wall seconds} of the runs trained
    now. Raises DensecodeError naming every failed run and its log (after the others have finished)."""
    if archive_dir is not None:
        restore_archived(specs, Path(archive_dir))
    for spec in specs:
        check_settings(spec)
    todo = []
    for spec in specs:
        state = run_state(spec)
        if state == "finished":
            print(f"[{spec.name}] finished already in {spec.run_dir}", file=sys.stderr, flush=True)
        else:
            todo.append((spec, state))
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=sum(s.steps for s in specs), initial=sum(s.steps for s in specs) - sum(s.steps for s, _ in todo),
                   desc="training runs", unit="step", dynamic_ncols=True)
    env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"), TOKENIZERS_PARALLELISM="false")
    running: list[tuple[RunSpec, subprocess.Popen, float, object]] = []
    walls: dict[str, float] = {}
    failed: list[str] = []
    shown = {s.name: 0 for s, _ in todo}
    try:
        while todo or running:
            while todo and len(running) < max(1, parallel):
                spec, state = todo.pop(0)
                spec.run_dir.parent.mkdir(parents=True, exist_ok=True)
                cmd = train_command(spec, state, python)
                log = open(spec.log_path, "a")
                log.write("$ " + " ".join(cmd) + "\n")
                log.flush()
                # The settings go down before the run starts, so a later sweep recognises (or refuses) the folder.
                spec.run_dir.mkdir(parents=True, exist_ok=True)
                (spec.run_dir / SPEC_FILE).write_text(json.dumps(spec.settings(), indent=1))
                verb = "resuming" if state == "partial" else "starting"
                msg = f"[{spec.name}] {verb}: log {spec.log_path}"
                (bar.write if bar else print)(msg)
                proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
                running.append((spec, proc, time.perf_counter(), log))
            time.sleep(poll_s)
            for item in list(running):
                spec, proc, start, log = item
                if bar is not None:
                    now = min(logged_step(spec.run_dir), spec.steps)
                    bar.update(max(0, now - shown[spec.name]))
                    shown[spec.name] = max(shown[spec.name], now)
                if proc.poll() is None:
                    continue
                running.remove(item)
                log.close()
                walls[spec.name] = time.perf_counter() - start
                if proc.returncode != 0 or run_state(spec) != "finished":
                    failed.append(f"{spec.name} (exit {proc.returncode}; log {spec.log_path})")
                    (bar.write if bar else print)(f"[{spec.name}] FAILED: exit {proc.returncode}, see {spec.log_path}")
                else:
                    if archive_dir is not None:
                        pack(spec.run_dir, Path(archive_dir), spec.steps)
                    if not keep_checkpoints:
                        prune_checkpoints(spec.run_dir)
    except KeyboardInterrupt:
        # Ctrl-C reaches the runs too (same process group): each finishes its step, saves a checkpoint and exits,
        # and the next sweep resumes it.
        for spec, proc, _, log in running:
            try:
                proc.wait(timeout=600)
            except subprocess.TimeoutExpired:
                proc.kill()
            log.close()
        raise
    finally:
        if bar is not None:
            bar.close()
    if failed:
        raise DensecodeError("training run(s) failed: " + "; ".join(failed) + ". Fix the cause and rerun the same "
                             "command: finished runs are kept and the others continue from their latest checkpoint")
    return walls
