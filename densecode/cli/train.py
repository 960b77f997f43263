"""`densecode train`: PPO (or GRPO) on dense token rewards, robotics or code.

    densecode train --domain robotics                       # configs/robotics.yaml, embedded model
    densecode train --domain code --set tasks.path=../shared/data/mbpp/mbpp.jsonl
    densecode train --domain robotics --resume runs/robotics   # continue exactly
    accelerate launch --num_processes 2 -m densecode.cli train --domain robotics

The run directory (`--output-dir`, default `train.output_dir`) gets config.yaml,
metrics.jsonl, tensorboard/, checkpoints/step-N (atomic), learning_curves.png and
summary.md. Ctrl-C finishes the current step, saves a checkpoint and exits.
"""

from __future__ import annotations

import logging
from pathlib import Path

from densecode.config import add_config_arguments
from densecode.training import resolve_config, resume_point, run_training


def configure(parser) -> None:
    parser.add_argument("--domain", default=None,
                        help="a registered domain (robotics, code, ...: see `densecode config --domains`), "
                             "'package.module:Class', or the domain of a simulator plug-in config")
    add_config_arguments(parser)
    parser.add_argument("--model", default=None, help="model dir, densecode-tiny, or hub id (overrides model.name_or_path)")
    parser.add_argument("--algo", choices=("ppo", "grpo", "rft"), default=None,
                        help="optimiser (overrides algo.name); rft = rejection-sampling fine-tuning, the baseline")
    parser.add_argument("--resume", default=None, metavar="DIR",
                        help="continue a run: its run directory or a checkpoints/step-N directory")
    parser.add_argument("--output-dir", default=None, metavar="DIR", help="run directory (overrides train.output_dir)")
    parser.add_argument("--steps", type=int, default=None, help="total training steps (overrides train.steps)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def run(args) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    cfg, _config_path, resume_ckpt = resolve_config(args)
    run_dir = Path(cfg.train.output_dir)
    if args.resume and not args.output_dir:
        run_dir = resume_point(args.resume)[1]
    result = run_training(cfg, run_dir, resume_ckpt=resume_ckpt, resuming=bool(args.resume),
                          progress=not args.no_progress)
    if result["is_main"]:
        if result["interrupted"]:
            print(f"interrupted at step {result['step']}: checkpoint saved; continue with "
                  f"densecode train --resume {run_dir}")
        print(f"run directory: {run_dir.resolve()} (summary.md, learning_curves.png, metrics.jsonl, checkpoints/)")
    return 130 if result["interrupted"] else 0
