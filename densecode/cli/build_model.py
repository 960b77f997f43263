"""`densecode build-model`: rebuild the embedded densecode-tiny model offline (atomically: a build interrupted midway
never leaves a half-written asset)."""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
from pathlib import Path

from densecode.embedded import ASSET_DIR
from densecode.embedded.build import TOY, BuildRecipe, _prepare_out, build
from densecode.errors import DensecodeError

# Where a checkout finds MBPP's file by default: ../shared/data beside the repository (or the working directory).
MBPP_DEFAULTS = (Path(__file__).resolve().parents[2].parent / "shared" / "data" / "mbpp" / "mbpp.jsonl",
                 Path("../shared/data/mbpp/mbpp.jsonl"))
# Larger shapes of the same recipe, for a GPU (`--device cuda`); the shipped asset is `tiny`.
SIZES = {"tiny": {}, "small": {"n_layer": 8, "n_embd": 384, "n_head": 8, "n_inner": 1536},
         "base": {"n_layer": 12, "n_embd": 512, "n_head": 8, "n_inner": 2048}}


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", default=str(ASSET_DIR),
                        help=f"output directory (default: the packaged asset, {ASSET_DIR})")
    parser.add_argument("--steps", type=int, default=None,
                        help="optimiser steps = schedule length (default: the shipped recipe, 700)")
    parser.add_argument("--toy", action="store_true",
                        help="tiny model, few steps (about a minute): for tests, produces a loadable model")
    parser.add_argument("--size", choices=sorted(SIZES), default="tiny",
                        help="model shape (default tiny = the shipped asset; small/base are for --device cuda)")
    parser.add_argument("--device", default="cpu", help="torch device to train on (cpu, cuda); default cpu")
    parser.add_argument("--mbpp", default=None, metavar="PATH",
                        help="MBPP's mbpp.jsonl (its train split, ids 601-974, is in the corpus; default: "
                             "../shared/data/mbpp/mbpp.jsonl beside the repository)")
    parser.add_argument("--no-mbpp", action="store_true", help="leave MBPP out (a model that differs from the shipped one)")
    parser.add_argument("--seed", type=int, default=0, help="seed for corpus order, init and sampling")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch CPU threads (default: OMP_NUM_THREADS or all cores; 1 = bit-for-bit reproducible)")
    parser.add_argument("--force", action="store_true", help="overwrite a non-empty --out that is not a previous build")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def _mbpp_path(args: argparse.Namespace) -> Path | None:
    if args.mbpp:
        path = Path(args.mbpp).expanduser()
        if not path.is_file():
            raise DensecodeError(f"--mbpp {args.mbpp}: no such file (pass MBPP's mbpp.jsonl, or --no-mbpp)")
        return path.resolve()
    return next((p.resolve() for p in MBPP_DEFAULTS if p.is_file()), None)


def run(args: argparse.Namespace) -> int:
    import torch

    if args.threads is not None:
        if args.threads < 1:
            raise DensecodeError(f"--threads must be >= 1 (got {args.threads})")
        torch.set_num_threads(args.threads)
    if args.device != "cpu":
        try:
            torch.zeros(1, device=args.device)
        except (RuntimeError, AssertionError) as exc:
            raise DensecodeError(f"--device {args.device}: not usable here ({exc}); use --device cpu") from None
    recipe = BuildRecipe(**TOY) if args.toy else BuildRecipe(**SIZES[args.size])
    if args.no_mbpp:
        recipe.mbpp = False
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
                             "for a build without it (not the shipped recipe)")
    out = Path(args.out).expanduser().resolve()
    _prepare_out(out, args.force)
    # Build into a sibling temp dir and swap at the end: an interrupted build never
    # leaves a half-written asset behind.
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    try:
        info = build(recipe, tmp, seed=args.seed, progress=not args.no_progress, mbpp_path=mbpp, device=args.device)
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
    print(f"wrote {out}: {info['params'] / 1e6:.2f}M params, {info['recipe']['steps']} steps "
          f"({info['tokens_per_s']:.0f} tokens/s, {info['build_seconds']:.0f} s); shipped the step-{info['shipped_step']} "
          f"checkpoint (validation success {info['selection']})")
    return 0
