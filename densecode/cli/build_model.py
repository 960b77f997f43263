"""`densecode build-model`: rebuild the embedded densecode-tiny model offline (atomically: a build interrupted midway
never leaves a half-written asset). The five-task recipe (`--recipe multitask`, the default) builds the shipped asset;
`--recipe tiny` builds the robotics-only model of docs/embedded-model.md into another directory."""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
from pathlib import Path

from densecode.embedded import ASSET_DIR
from densecode.embedded.build import (
    TOY,
    BuildRecipe,
    _prepare_out,
    build,
    build_from_stage1,
)
from densecode.errors import DensecodeError

# Where a checkout finds MBPP's file by default: ../shared/data beside the repository (or the working directory).
MBPP_DEFAULTS = (Path(__file__).resolve().parents[2].parent / "shared" / "data" / "mbpp" / "mbpp.jsonl",
                 Path("../shared/data/mbpp/mbpp.jsonl"))
# Larger shapes of the multitask recipe, for a GPU (`--device cuda`).
SIZES = {"default": {}, "small": {"n_layer": 8, "n_embd": 384, "n_head": 8, "n_inner": 1536},
         "base": {"n_layer": 12, "n_embd": 512, "n_head": 8, "n_inner": 2048}}


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", default=str(ASSET_DIR),
                        help=f"output directory (default: the packaged asset, {ASSET_DIR})")
    parser.add_argument("--steps", type=int, default=None, help="optimiser steps = schedule length (default: the recipe's)")
    parser.add_argument("--toy", action="store_true",
                        help="tiny model, few steps (about a minute): for tests, produces a loadable model")
    parser.add_argument("--seed", type=int, default=0, help="seed for corpus order, init and sampling")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch CPU threads (default: OMP_NUM_THREADS or all cores)")
    parser.add_argument("--robotics-steps", type=int, default=None,
                        help="tiny: stage-2 robotics fine-tuning schedule length (default: the recipe's; 0 = stage 1 only)")
    parser.add_argument("--robotics-stop-at", type=int, default=None, metavar="N",
                        help="tiny: ship stage 2 at step N of its schedule (default: the recipe's, 150 of 300)")
    parser.add_argument("--stage1", default=None, metavar="DIR",
                        help="tiny: run stage 2 only, from this stage-1 build of the same recipe (a --robotics-steps 0 build)")
    parser.add_argument("--recipe", choices=("multitask", "tiny"), default="multitask",
                        help="multitask: the shipped five-task model (default); tiny: the robotics-only model (--out DIR)")
    parser.add_argument("--mbpp", default=None, metavar="PATH",
                        help="multitask: MBPP's mbpp.jsonl (its train split, ids 601-974, joins the corpus; default "
                             "../shared/data/mbpp/mbpp.jsonl beside the repository)")
    parser.add_argument("--no-mbpp", action="store_true", help="multitask: leave MBPP out")
    parser.add_argument("--size", choices=sorted(SIZES), default="default",
                        help="multitask: model shape (small/base are meant for --device cuda)")
    parser.add_argument("--device", default="cpu", help="multitask: torch device to train on (cpu, cuda)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="multitask: override one field of the recipe (YAML value), e.g. --set n_layer=6 "
                             "--set select_steps=[500,1000]; repeatable")
    parser.add_argument("--force", action="store_true", help="overwrite a non-empty --out that is not a previous build")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def run(args: argparse.Namespace) -> int:
    import torch

    if args.threads is not None:
        if args.threads < 1:
            raise DensecodeError(f"--threads must be >= 1 (got {args.threads})")
        torch.set_num_threads(args.threads)
    if args.toy and Path(args.out).expanduser().resolve() == ASSET_DIR.resolve():
        raise DensecodeError("--toy builds a model for tests; it never replaces the shipped asset: pass --out DIR")
    if args.recipe == "multitask":
        return _run_multitask(args)
    multitask_only = [flag for flag, used in (("--mbpp", args.mbpp), ("--no-mbpp", args.no_mbpp),
                                              ("--size", args.size != "default"), ("--device", args.device != "cpu"),
                                              ("--set", args.overrides))
                      if used]
    if multitask_only:
        raise DensecodeError(f"{', '.join(multitask_only)} apply to --recipe multitask only")
    out = Path(args.out).expanduser().resolve()
    if out == ASSET_DIR.resolve():
        raise DensecodeError("--recipe tiny builds the robotics-only model; the shipped asset is the five-task "
                             "recipe's: pass --out DIR")
    recipe = BuildRecipe(**TOY) if args.toy else BuildRecipe()
    if args.steps is not None:
        if args.steps < 1:
            raise DensecodeError(f"--steps must be >= 1 (got {args.steps})")
        recipe.steps = args.steps
        recipe.stop_at = None
        recipe.warmup = min(recipe.warmup, max(1, args.steps // 10))
    if args.robotics_steps is not None:
        if args.robotics_steps < 0:
            raise DensecodeError(f"--robotics-steps must be >= 0 (got {args.robotics_steps})")
        recipe.robotics_steps = args.robotics_steps
        recipe.robotics_stop_at = None
    if args.robotics_stop_at is not None:
        if not 1 <= args.robotics_stop_at <= recipe.robotics_steps:
            raise DensecodeError(f"--robotics-stop-at must be between 1 and the robotics schedule "
                                 f"({recipe.robotics_steps} steps); got {args.robotics_stop_at}")
        recipe.robotics_stop_at = args.robotics_stop_at
    stage1 = Path(args.stage1).expanduser().resolve() if args.stage1 else None
    if stage1 is not None and recipe.robotics_steps == 0:
        raise DensecodeError("--stage1 runs the robotics stage only; it needs --robotics-steps > 0")
    if stage1 is not None and stage1 == out:
        raise DensecodeError("--stage1 and --out must be different directories")
    _prepare_out(out, args.force)
    if stage1 is not None:
        info = _build_atomically(out, lambda tmp: build_from_stage1(recipe, stage1, tmp, seed=args.seed,
                                                                    progress=not args.no_progress))
    else:
        info = _build_atomically(out, lambda tmp: build(recipe, tmp, seed=args.seed, progress=not args.no_progress))
    stage2 = info.get("robotics_stage")
    print(f"wrote {out}: {info['params'] / 1e6:.2f}M params, stage 1 {info['recipe']['steps']} steps "
          f"({info['tokens_per_s']:.0f} tokens/s, {info['build_seconds']:.0f} s, final train loss "
          f"{info['final_train_loss_avg50']})"
          + (f", robotics stage {stage2['steps_run']} steps ({stage2['train_seconds']:.0f} s, held-out robotics loss "
             f"{stage2['eval_losses'].get('robotics')})" if stage2 else ""))
    return 0


def _build_atomically(out: Path, build_into) -> dict:
    """Run `build_into(tmp)` into a sibling temp dir and swap it in at the end: an interrupted build never leaves a
    half-written model behind. Returns the build info."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    try:
        info = build_into(tmp)
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
        # mkdtemp makes the directory private; the asset must be readable by every user.
        out.chmod(0o755)
        for path in out.iterdir():
            path.chmod(0o644)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return info


def _mbpp_path(args: argparse.Namespace) -> Path | None:
    if args.mbpp:
        path = Path(args.mbpp).expanduser()
        if not path.is_file():
            raise DensecodeError(f"--mbpp {args.mbpp}: no such file (pass MBPP's mbpp.jsonl, or --no-mbpp)")
        return path.resolve()
    return next((p.resolve() for p in MBPP_DEFAULTS if p.is_file()), None)


def _apply_overrides(recipe, overrides: list[str]) -> None:
    """`--set KEY=VALUE` on a recipe dataclass: VALUE is read as YAML and checked against the field's declared type
    (the same coercion as training configs' `--set`, so `null` sets an optional field back to None)."""
    import dataclasses

    from densecode.config import apply_mapping, parse_override

    names = [f.name for f in dataclasses.fields(recipe)]
    for item in overrides:
        key, value = parse_override(item)
        if key not in names:
            raise DensecodeError(f"--set {item}: expected KEY=VALUE with KEY one of the recipe's fields "
                                 f"({', '.join(names)})")
        apply_mapping(recipe, {key: value}, f"--set {item}")


def _run_multitask(args: argparse.Namespace) -> int:
    import torch

    from densecode.embedded.build_multitask import (
        MULTITASK_TOY,
        MultitaskRecipe,
        build_multitask,
    )

    out = Path(args.out).expanduser().resolve()
    for flag, value in (("--robotics-steps", args.robotics_steps), ("--robotics-stop-at", args.robotics_stop_at),
                        ("--stage1", args.stage1)):
        if value is not None:
            raise DensecodeError(f"{flag} belongs to the tiny recipe's robotics stage; the multitask recipe has one stage")
    if args.device != "cpu":
        try:
            torch.zeros(1, device=args.device)
        except (RuntimeError, AssertionError) as exc:
            raise DensecodeError(f"--device {args.device}: not usable here ({exc}); use --device cpu") from None
    recipe = MultitaskRecipe(**MULTITASK_TOY) if args.toy else MultitaskRecipe(**SIZES[args.size])
    if args.device != "cpu":
        recipe.processes = 1  # data-parallel processes are a CPU build's; one GPU trains the whole batch
    if args.no_mbpp:
        recipe.mbpp = False
    _apply_overrides(recipe, args.overrides)
    if args.steps is not None:
        if args.steps < 1:
            raise DensecodeError(f"--steps must be >= 1 (got {args.steps})")
        old = recipe.steps
        recipe.steps = args.steps
        recipe.warmup = min(recipe.warmup, max(1, args.steps // 10))
        # The selection points keep their place in the schedule.
        recipe.select_steps = sorted({max(1, round(s * args.steps / old)) for s in recipe.select_steps})
    mbpp = _mbpp_path(args) if recipe.mbpp else None
    if recipe.mbpp and mbpp is None:
        raise DensecodeError("MBPP's file not found at ../shared/data/mbpp/mbpp.jsonl: pass --mbpp PATH, or --no-mbpp "
                             "for a build without it")
    _prepare_out(out, args.force)
    info = _build_atomically(out, lambda tmp: build_multitask(recipe, tmp, seed=args.seed, progress=not args.no_progress,
                                                              mbpp_path=mbpp, device=args.device))
    print(f"wrote {out}: {info['params'] / 1e6:.2f}M params, {info['recipe']['steps']} steps "
          f"({info['tokens_per_s']:.0f} tokens/s, {info['build_seconds']:.0f} s); kept the step-{info['shipped_step']} "
          f"checkpoint (validation success {info['selection']})")
    return 0
