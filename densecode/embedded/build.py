"""`densecode build-model`: rebuild the embedded densecode-tiny model offline.

    densecode build-model                      # the shipped model, into densecode/assets/densecode-tiny
    densecode build-model --out /tmp/tiny      # the same build elsewhere
    densecode build-model --toy --out /tmp/t   # a 1-minute toy build (CI): loadable, not useful

Everything comes from this machine: the interpreter's stdlib sources, the RoboSim
generator's training split, synthetic function tasks. Fixed seeds; the result
(fp16 safetensors, tokenizer, build_info.json, SHA256SUMS) is written atomically
into `--out`.
"""

from __future__ import annotations

import hashlib
import json
import platform
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from densecode.embedded import MODEL_NAME
from densecode.errors import DensecodeError


@dataclass
class BuildRecipe:
    vocab_size: int = 2048
    n_layer: int = 4
    n_embd: int = 192
    n_head: int = 4
    n_inner: int = 768
    n_positions: int = 384
    ctx: int = 256
    steps: int = 600  # learning-rate schedule length
    stop_at: int | None = None  # ship the model at this step of the schedule (None: at the end)
    batch_size: int = 16
    lr: float = 2e-3
    warmup: int = 50
    robotics_tasks: int | None = 3000
    synthetic_tasks: int = 4000
    stdlib_max: int | None = None  # None: every filtered stdlib function
    # Row mixture (probability that a training row comes from each source).
    p_robotics: float = 0.7
    p_code: float = 0.2
    p_stdlib: float = 0.1
    eval_every: int = 200
    # Stage 2: supervised fine-tuning on the robotics rows only, starting from the stage-1 model as
    # saved (fp16, reloaded in fp32) with a fresh optimizer. 0 steps = no stage 2.
    # Measured (held-out robotics, 200 tasks, greedy): stage 1 alone 0.20 success, copying rooms from the
    # instruction at chance (p 0.05 for the right room); stage-2 steps 100 / 150 / 200 of this 300-step
    # schedule: 0.32 / 0.42 / 0.585. Shipped at 150: rooms half learned (right room is the argmax 39% of
    # the time), which leaves RL a skill to sharpen, and success inside the 10-60% target.
    robotics_steps: int = 300  # its learning-rate schedule length
    robotics_stop_at: int | None = 150
    robotics_lr: float = 1e-3
    robotics_warmup: int = 10


TOY = {"vocab_size": 512, "n_layer": 2, "n_embd": 64, "n_head": 2, "n_inner": 256, "n_positions": 256, "ctx": 128,
       "steps": 30, "batch_size": 8, "warmup": 5, "robotics_tasks": 200, "synthetic_tasks": 200, "stdlib_max": 200,
       "eval_every": 30}


def sha256sums(directory: Path) -> str:
    lines = []
    for path in sorted(directory.iterdir()):
        if path.is_file() and path.name != "SHA256SUMS":
            lines.append(f"{hashlib.sha256(path.read_bytes()).hexdigest()}  {path.name}")
    return "\n".join(lines) + "\n"


def verify_sha256sums(directory: Path) -> list[str]:
    """Names of files whose checksum differs from SHA256SUMS (missing files included)."""
    sums = (directory / "SHA256SUMS").read_text().splitlines()
    bad = []
    for line in sums:
        digest, name = line.split(maxsplit=1)
        path = directory / name
        if not path.is_file() or hashlib.sha256(path.read_bytes()).hexdigest() != digest:
            bad.append(name)
    return bad


def _save(model, tokenizer, out: Path, info: dict) -> None:
    import copy

    import torch

    out.mkdir(parents=True, exist_ok=True)
    # A copy: casting the live model would round the weights training continues from.
    half = copy.deepcopy(model).to(torch.float16)
    half.generation_config.eos_token_id = tokenizer.eos_token_id
    half.generation_config.pad_token_id = tokenizer.eos_token_id
    half.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    (out / "build_info.json").write_text(json.dumps(info, indent=1) + "\n")
    (out / "SHA256SUMS").write_text(sha256sums(out))


STAGE2_FIELDS = ("robotics_steps", "robotics_stop_at", "robotics_lr", "robotics_warmup")


def _stage1_corpus(recipe: BuildRecipe, seed: int):
    from densecode.embedded.corpus import (
        robotics_pairs,
        stdlib_functions,
        synthetic_function_pairs,
    )

    stdlib = stdlib_functions()
    if recipe.stdlib_max is not None:
        stdlib = stdlib[:recipe.stdlib_max]
    robo_train = robotics_pairs("train", n=recipe.robotics_tasks, seed=seed)
    robo_val = robotics_pairs("validation", n=200, seed=seed)
    code = synthetic_function_pairs(recipe.synthetic_tasks, seed=seed)
    code_val = synthetic_function_pairs(200, seed=seed + 10_000)
    if not stdlib or not robo_train:
        raise DensecodeError("empty training corpus (no stdlib functions or no RoboSim training tasks found)")
    # Hold out every 50th stdlib function for the eval loss.
    stdlib_val, stdlib_train = stdlib[::50], [s for i, s in enumerate(stdlib) if i % 50]
    return stdlib_train, stdlib_val, robo_train, robo_val, code, code_val


def build_from_stage1(recipe: BuildRecipe, stage1: Path, out: Path, *, seed: int = 0, progress: bool = True) -> dict:
    """Stage 2 only, from a saved stage-1 build of the same recipe (e.g. a previous `--robotics-steps 0` build)."""
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    transformers.logging.set_verbosity_error()
    t0 = time.perf_counter()
    info_path = stage1 / "build_info.json"
    if not info_path.is_file():
        raise DensecodeError(f"--stage1 {stage1}: no build_info.json there (pass the directory of a stage-1 build)")
    info = json.loads(info_path.read_text())
    if "robotics_stage" in info:
        raise DensecodeError(f"--stage1 {stage1}: that build already ran the robotics stage; pass a stage-1 build")
    want = {k: v for k, v in asdict(recipe).items() if k not in STAGE2_FIELDS}
    have = {k: v for k, v in info.get("recipe", {}).items() if k not in STAGE2_FIELDS}
    if want != have or int(info.get("seed", -1)) != seed:
        diff = sorted(k for k in set(want) | set(have) if want.get(k) != have.get(k))
        raise DensecodeError(f"--stage1 {stage1}: built with another stage-1 recipe or seed (differs in: "
                             f"{', '.join(diff) or 'seed'}); rebuild without --stage1")
    _, stdlib_val, robo_train, robo_val, _, code_val = _stage1_corpus(recipe, seed)
    model = AutoModelForCausalLM.from_pretrained(stage1)
    tokenizer = AutoTokenizer.from_pretrained(stage1)
    info["recipe"] = asdict(recipe)
    model, tokenizer, stage2 = _robotics_stage(recipe, model, tokenizer, info, out, robo_train, robo_val, code_val,
                                               stdlib_val, seed, progress)
    info["robotics_stage"] = {**stage2, "from_stage1": str(stage1), "seconds": round(time.perf_counter() - t0, 1)}
    _save(model, tokenizer, out, info)
    return info


def build(recipe: BuildRecipe, out: Path, *, seed: int = 0, progress: bool = True,
          checkpoint_steps: list[int] | None = None) -> dict:
    """Run the whole build into `out`; return the build info written to build_info.json."""
    import torch
    import transformers

    from densecode.embedded.tokenizer import train_tokenizer
    from densecode.embedded.train import (
        ModelShape,
        TrainSettings,
        build_model,
        pretrain_rows,
        supervised_rows,
        train,
    )

    transformers.logging.set_verbosity_error()  # padded-rows warnings: labels mask them
    t0 = time.perf_counter()
    stdlib_train, stdlib_val, robo_train, robo_val, code, code_val = _stage1_corpus(recipe, seed)

    tok_texts = stdlib_train + [p.prompt + p.response for p in robo_train + code]
    tokenizer = train_tokenizer(tok_texts, recipe.vocab_size)
    t_tok = time.perf_counter()

    ctx = recipe.ctx
    pools = {
        "robotics": supervised_rows(tokenizer, robo_train, ctx, seed),
        "code": supervised_rows(tokenizer, code, ctx, seed),
        "stdlib": pretrain_rows(tokenizer, stdlib_train, ctx),
    }
    val_pools = {
        "robotics": supervised_rows(tokenizer, robo_val, ctx, seed),
        "code": supervised_rows(tokenizer, code_val, ctx, seed),
        "stdlib": pretrain_rows(tokenizer, stdlib_val, ctx),
    }
    probs = {"robotics": recipe.p_robotics, "code": recipe.p_code, "stdlib": recipe.p_stdlib}
    shape = ModelShape(recipe.n_layer, recipe.n_embd, recipe.n_head, recipe.n_inner, recipe.n_positions)
    model = build_model(tokenizer, shape, seed)
    settings = TrainSettings(steps=recipe.steps, stop_at=recipe.stop_at, batch_size=recipe.batch_size, ctx=ctx, lr=recipe.lr,
                             warmup=recipe.warmup, seed=seed, eval_every=recipe.eval_every,
                             checkpoint_steps=list(checkpoint_steps or []))
    n_params = sum(p.numel() for p in model.parameters())
    info = {
        "name": MODEL_NAME,
        "recipe": asdict(recipe),
        "seed": seed,
        "params": n_params,
        "corpus": {
            "stdlib_functions": len(stdlib_train), "stdlib_chars": sum(map(len, stdlib_train)),
            "robotics_train_tasks": len(robo_train), "synthetic_code_tasks": len(code),
            "rows": {k: len(v) for k, v in pools.items()},
            "tokens": {k: sum(len(r[0]) for r in v) for k, v in pools.items()},
        },
        "environment": {"python": platform.python_version(), "torch": torch.__version__,
                        "transformers": transformers.__version__, "threads": torch.get_num_threads(),
                        "machine": platform.machine()},
    }

    def on_checkpoint(step, m):
        _save(m, tokenizer, out.parent / f"{out.name}-step{step}", {**info, "checkpoint_step": step})

    log = train(model, tokenizer, pools, probs, settings, val_pools=val_pools, on_checkpoint=on_checkpoint,
                progress=progress)
    stage2 = None
    if recipe.robotics_steps > 0:
        model, tokenizer, stage2 = _robotics_stage(recipe, model, tokenizer, info, out, robo_train, robo_val, code_val,
                                                   stdlib_val, seed, progress)
    info.update({
        "tokenizer_seconds": round(t_tok - t0, 1),
        "train_seconds": log["seconds"],
        "tokens_per_s": log["tokens_per_s"],
        "tokens_seen": log["tokens"],
        "final_train_loss_avg50": round(sum(log["loss"][-50:]) / len(log["loss"][-50:]), 4),
        "eval_losses": log["eval"],
        "build_seconds": round(time.perf_counter() - t0, 1),
    })
    if stage2 is not None:
        info["robotics_stage"] = stage2
    _save(model, tokenizer, out, info)
    return info


def _robotics_stage(recipe: BuildRecipe, model, tokenizer, info: dict, out: Path, robo_train, robo_val, code_val,
                    stdlib_val, seed: int, progress: bool):
    """Stage 2 from the stage-1 model exactly as it is saved, so that running it on a shipped stage-1
    asset and running the whole build give the same weights."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from densecode.embedded.train import (
        TrainSettings,
        evaluate_loss,
        pretrain_rows,
        supervised_rows,
        train,
    )

    stage1 = out / "_stage1"
    _save(model, tokenizer, stage1, {**info, "stage": 1})
    model = AutoModelForCausalLM.from_pretrained(stage1, torch_dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(stage1)
    shutil.rmtree(stage1)
    ctx = recipe.ctx
    rows = supervised_rows(tokenizer, robo_train, ctx, seed)
    if not rows:
        raise DensecodeError(f"the robotics stage has no training rows: no RoboSim example fits ctx={ctx} tokens "
                             "(raise ctx or set robotics_steps=0)")
    settings = TrainSettings(steps=recipe.robotics_steps, stop_at=recipe.robotics_stop_at, batch_size=recipe.batch_size,
                             ctx=ctx, lr=recipe.robotics_lr, warmup=recipe.robotics_warmup, seed=seed + 1,
                             eval_every=10**9)
    log = train(model, tokenizer, {"robotics": rows}, {"robotics": 1.0}, settings, progress=progress)
    val = {"robotics": supervised_rows(tokenizer, robo_val, ctx, seed),
           "code": supervised_rows(tokenizer, code_val, ctx, seed),
           "stdlib": pretrain_rows(tokenizer, stdlib_val, ctx)}
    losses = {k: round(evaluate_loss(model, v, tokenizer.pad_token_id, ctx), 4) for k, v in val.items() if v}
    return model, tokenizer, {"steps_run": len(log["loss"]), "train_seconds": log["seconds"],
                              "tokens_seen": log["tokens"], "eval_losses": losses,
                              "final_train_loss_avg20": round(sum(log["loss"][-20:]) / max(len(log["loss"][-20:]), 1), 4)}


def _prepare_out(out: Path, force: bool) -> None:
    if out.exists() and not out.is_dir():
        raise DensecodeError(f"--out {out} is a file; pass a directory")
    if out.is_dir() and any(out.iterdir()) and not (out / "build_info.json").exists() and not force:
        raise DensecodeError(f"--out {out} is not empty and holds no previous build; pass an empty directory or --force")
