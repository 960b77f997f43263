"""densecode from Python: train, evaluate and explain with the command line's defaults.

    from densecode import api

    run = api.train(domain="robotics", steps=20, output_dir="runs/robotics-api")      # densecode train ...
    results = api.evaluate(benchmark="robotics", model=run["run_dir"], tasks=100)   # densecode eval ...
    api.explain(f"{run['run_dir']}/rollouts.jsonl", "report.html")                # densecode explain ...

    cfg = api.load_config(domain="codegen", overrides=["train.lr=1e-5"])             # densecode config ...
    trainer = api.build_trainer(cfg, "runs/codegen")                                  # the loop, to drive yourself

Each function is the library call behind its command (densecode.training, densecode.eval.runner,
densecode.eval.explain), so a keyword here means what the flag of the same name means there.
"""

from __future__ import annotations

from pathlib import Path

from densecode.eval.spec import EvalSpec

__all__ = ["EvalSpec", "build_trainer", "evaluate", "explain", "load_config", "train"]


def load_config(config=None, *, domain: str | None = None, overrides=(), model: str | None = None,
                algo: str | None = None, output_dir=None, steps: int | None = None):
    """The typed config `densecode train` would use: `config` (a file or a shipped name), else the domain's shipped
    YAML, then `overrides` ("key=value", as --set) and the named settings."""
    from densecode.training import resolve_run_config

    cfg, _path, _ckpt = resolve_run_config(config=config, domain=domain, overrides=overrides, model=model, algo=algo,
                                           output_dir=output_dir, steps=steps)
    return cfg


def build_trainer(cfg, run_dir=None, *, progress: bool = True):
    """A densecode.rl.trainer.Trainer for `cfg` (its domain, models, reward and optimiser), writing to `run_dir`
    (default train.output_dir); call .train() or .train_step(step) yourself."""
    from densecode.training import build_trainer as _build

    return _build(cfg, Path(run_dir or cfg.train.output_dir), progress=progress)


def train(config=None, *, domain: str | None = None, overrides=(), model: str | None = None, algo: str | None = None,
          output_dir=None, steps: int | None = None, resume=None, progress: bool = True) -> dict:
    """Run `densecode train` from Python. Returns {"run_dir", "step", "interrupted", ...}; the run folder holds
    what the command writes (metrics.jsonl, checkpoints/, summary.md)."""
    from densecode.training import resolve_run_config, resume_point, run_training

    cfg, _path, ckpt = resolve_run_config(config=config, domain=domain, overrides=overrides, model=model, algo=algo,
                                          output_dir=output_dir, steps=steps, resume=resume)
    run_dir = resume_point(resume)[1] if resume and not output_dir else Path(cfg.train.output_dir)
    result = run_training(cfg, run_dir, resume_ckpt=ckpt, resuming=resume is not None, progress=progress)
    result["run_dir"] = run_dir
    return result


def evaluate(spec: EvalSpec | None = None, *, write: bool = True, **fields) -> dict:
    """Run `densecode eval` from Python: an EvalSpec, or its fields as keywords (benchmark=, model=, data=, ...).
    Returns the results dict (scores, per-task records); with `write`, also the run folder (spec.out) as the
    command writes it."""
    from densecode.eval.runner import evaluate as _evaluate
    from densecode.eval.runner import run as _run

    spec = spec if spec is not None else EvalSpec(**fields)
    return _run(spec)[0] if write else _evaluate(spec)


def explain(rollouts, out, *, model: str | None = None, config=None, overrides=(), limit: int = 0, step="last",
            title: str = "densecode reward explorer") -> Path:
    """Write the reward explorer's HTML for a rollouts JSONL (or a generate output, scored with `model` and
    `config`); returns the page's path."""
    from densecode.eval.explain import explain as _explain

    return _explain(rollouts, out, model=model, config=config, overrides=overrides, limit=limit, step=step,
                    title=title)[0]
