"""The five-task recipe of the embedded model: `densecode build-model` builds the shipped densecode-tiny with it.

One stage on a mixed corpus: the train splits of the five task domains (robotics, codegen, codeio, testgen,
commitmsg) with their canonical answers, MBPP's train split (task ids 601-974) from its local file, and the
interpreter's stdlib sources; a full learning-rate schedule; at a few steps the model answers validation tasks of
every domain, and the checkpoint with the best average validation success is written. Fixed seeds; with
`--threads 1` bit-for-bit reproducible on a platform (docs/embedded-model.md).
"""

from __future__ import annotations

import hashlib
import platform
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from densecode.embedded import MODEL_NAME
from densecode.embedded.build import _save
from densecode.embedded.corpus import TASK_DOMAINS
from densecode.embedded.tokenizer import PRETOKENIZERS
from densecode.errors import DensecodeError


@dataclass
class MultitaskRecipe:
    vocab_size: int = 2048
    # "gpt2": densecode-tiny's splits; "code": a name is the same token after a space, a bracket or a quote, digits
    # one by one (densecode/embedded/tokenizer.py). Measured: "code" did not help at this budget (docs/embedded-model.md).
    pretokenizer: str = "gpt2"
    n_layer: int = 4
    n_embd: int = 192
    n_head: int = 4
    n_inner: int = 768
    n_positions: int = 512  # room for a long prompt plus its answer at generation time
    ctx: int = 320  # training rows (the longest task prompt + answer is ~300 tokens)
    steps: int = 2700  # learning-rate schedule length
    batch_size: int = 16
    lr: float = 2e-3
    warmup: int = 50
    # Data-parallel CPU processes (each with the build's --threads): every process takes its share of each batch and
    # the gradients are summed, so 2 processes on 2 cores run about twice the steps per hour of one. The weights
    # depend on the count (float summation order), so it is part of the recipe; bit-for-bit reproducible at a count.
    processes: int = 2
    # Loss weight of prompt tokens (the response's is 1): the code in the prompts is signal the forward pass computes
    # anyway (measured: lower held-out answer loss on every task at the same step; docs/embedded-model.md).
    prompt_loss_weight: float = 1.0
    tasks_per_domain: int = 4000  # distinct train-split tasks of each of the five domains
    # codeio's own count (None: tasks_per_domain). Its answers are computed values, so a skill that generalises needs
    # more distinct examples than the others (measured: docs/embedded-model.md).
    codeio_tasks: int | None = 12000
    # testgen answers: the shortest asserts that reach the canonical coverage (True) or the canonical asserts. Short
    # inputs make the expected values computable for a small model (measured: docs/embedded-model.md).
    simple_testgen: bool = True
    stdlib_max: int | None = None  # None: every filtered stdlib function
    mbpp: bool = True  # MBPP's train split (ids 601-974) from the local file (`--mbpp PATH`)
    # Row mixture: the probability that a training row comes from each source. Robotics success is a cliff in its
    # share (measured at step 2,700: 12% of rows 17% greedy, 16% 85%, 20% 82%); 14% lands inside the 42-70% band.
    p_robotics: float = 0.14
    p_codegen: float = 0.24
    p_codeio: float = 0.33
    p_testgen: float = 0.17
    p_commitmsg: float = 0.07
    p_mbpp: float = 0.02
    p_stdlib: float = 0.03
    eval_every: int = 250  # validation losses
    # Steps at which the model answers `select_tasks` validation tasks of each domain (greedy); the checkpoint with
    # the best average success ships (ties: the later one).
    select_steps: list[int] = field(default_factory=lambda: [1350, 2025, 2700])
    select_tasks: int = 48


MULTITASK_TOY = {"vocab_size": 512, "n_layer": 2, "n_embd": 64, "n_head": 2, "n_inner": 256, "n_positions": 512,
                 "ctx": 320, "steps": 30, "batch_size": 8, "warmup": 5, "tasks_per_domain": 40, "codeio_tasks": 40,
                 "stdlib_max": 200, "mbpp": False, "eval_every": 30, "select_steps": [15, 30], "select_tasks": 3,
                 "processes": 1}


def _sources(recipe: MultitaskRecipe) -> dict[str, float]:
    probs = {name: float(getattr(recipe, f"p_{name}")) for name in (*TASK_DOMAINS, "mbpp", "stdlib")}
    if not recipe.mbpp:
        probs["mbpp"] = 0.0
    if any(p < 0 for p in probs.values()) or sum(probs.values()) <= 0:
        raise DensecodeError(f"the recipe's row mixture must be >= 0 with a positive sum (got {probs})")
    return probs


def _corpus(recipe: MultitaskRecipe, seed: int, mbpp_path: Path | None):
    """Train pools (pairs or texts per source) and validation pairs per source."""
    from densecode.embedded.corpus import domain_pairs, mbpp_pairs, stdlib_functions

    train: dict[str, list] = {}
    val: dict[str, list] = {}
    for name in TASK_DOMAINS:
        count = recipe.codeio_tasks if name == "codeio" and recipe.codeio_tasks is not None else recipe.tasks_per_domain
        train[name] = domain_pairs(name, "train", count, seed, recipe.simple_testgen)
        val[name] = domain_pairs(name, "validation", 200, seed, recipe.simple_testgen)
    if recipe.mbpp:
        if mbpp_path is None or not Path(mbpp_path).is_file():
            raise DensecodeError(f"MBPP's file not found ({mbpp_path}): pass --mbpp PATH to mbpp.jsonl (e.g. "
                                 "../shared/data/mbpp/mbpp.jsonl), or --no-mbpp for a build without it (not the "
                                 "shipped recipe)")
        train["mbpp"] = mbpp_pairs(mbpp_path, "train")
        val["mbpp"] = mbpp_pairs(mbpp_path, "validation")
    stdlib = stdlib_functions()
    if recipe.stdlib_max is not None:
        stdlib = stdlib[:recipe.stdlib_max]
    # Every 50th stdlib function is held out for the eval loss.
    train["stdlib"], val["stdlib"] = [s for i, s in enumerate(stdlib) if i % 50], stdlib[::50]
    empty = sorted(k for k, v in train.items() if not v)
    if empty:
        raise DensecodeError(f"empty training corpus for {', '.join(empty)}")
    return train, val


def _rows(tokenizer, material: dict[str, list], ctx: int, seed: int) -> dict[str, list]:
    from densecode.embedded.train import pretrain_rows, supervised_rows

    return {name: (pretrain_rows(tokenizer, items, ctx) if name == "stdlib" else
                   supervised_rows(tokenizer, items, ctx, seed)) for name, items in material.items()}


def file_sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def build_multitask(recipe: MultitaskRecipe, out: Path, *, seed: int = 0, progress: bool = True, mbpp_path: Path | None = None,
          device: str = "cpu", checkpoint_steps: list[int] | None = None) -> dict:
    """Run the whole build into `out`; return the build info written to build_info.json."""
    import torch
    import transformers

    from densecode.embedded.tokenizer import train_tokenizer
    from densecode.embedded.train import ModelShape, TrainSettings, build_model, train

    transformers.logging.set_verbosity_error()  # padded-rows warnings: labels mask them
    t0 = time.perf_counter()
    probs = _sources(recipe)
    if recipe.processes < 1 or (recipe.processes > 1 and device != "cpu"):
        raise DensecodeError(f"recipe.processes {recipe.processes}: use >= 1 processes on the CPU, 1 on {device}")
    if recipe.pretokenizer not in PRETOKENIZERS:
        raise DensecodeError(f"recipe.pretokenizer {recipe.pretokenizer!r}: use one of {', '.join(PRETOKENIZERS)}")
    if recipe.codeio_tasks is not None and recipe.codeio_tasks < 1:
        raise DensecodeError(f"recipe.codeio_tasks {recipe.codeio_tasks}: use >= 1, or null for tasks_per_domain")
    bad = [s for s in recipe.select_steps if not 1 <= s <= recipe.steps]
    if bad or not recipe.select_steps:
        raise DensecodeError(f"select_steps {recipe.select_steps} must be non-empty steps within 1..{recipe.steps}")
    train_material, val_material = _corpus(recipe, seed, mbpp_path)
    tok_texts = train_material["stdlib"] + [p.prompt + p.response for name, pairs in train_material.items()
                                            if name != "stdlib" for p in pairs]
    tokenizer = train_tokenizer(tok_texts, recipe.vocab_size, recipe.pretokenizer)
    t_tok = time.perf_counter()
    pools = _rows(tokenizer, train_material, recipe.ctx, seed)
    val_pools = _rows(tokenizer, val_material, recipe.ctx, seed)
    shape = ModelShape(recipe.n_layer, recipe.n_embd, recipe.n_head, recipe.n_inner, recipe.n_positions)
    model = build_model(tokenizer, shape, seed).to(device)
    select = sorted(set(recipe.select_steps))
    settings = TrainSettings(steps=recipe.steps, batch_size=recipe.batch_size, ctx=recipe.ctx, lr=recipe.lr,
                             warmup=recipe.warmup, seed=seed, eval_every=recipe.eval_every,
                             prompt_loss_weight=recipe.prompt_loss_weight,
                             checkpoint_steps=sorted(set(select) | set(checkpoint_steps or [])))
    info = {
        "name": MODEL_NAME,
        "recipe": asdict(recipe),
        "seed": seed,
        "params": sum(p.numel() for p in model.parameters()),
        "corpus": {
            "items": {k: len(v) for k, v in train_material.items()},
            "stdlib_chars": sum(map(len, train_material["stdlib"])),
            "rows": {k: len(v) for k, v in pools.items()},
            "tokens": {k: sum(len(r[0]) for r in v) for k, v in pools.items()},
            "mbpp_sha256": file_sha256(mbpp_path) if recipe.mbpp else None,
        },
        "environment": {"python": platform.python_version(), "torch": torch.__version__,
                        "transformers": transformers.__version__, "threads": torch.get_num_threads(),
                        "machine": platform.machine(), "device": device,
                        "processes": recipe.processes},
    }
    selector = _Selector(tokenizer, select, recipe.select_tasks, seed, list(checkpoint_steps or []), out, info,
                         progress)
    if recipe.processes > 1:
        log, selector = train_in_processes(recipe.processes, model, tokenizer, pools, probs, settings,
                                           val_pools=val_pools, on_checkpoint=selector, progress=progress)
    else:
        log = train(model, tokenizer, pools, probs, settings, val_pools=val_pools, on_checkpoint=selector,
                    progress=progress)
    selection, best = selector.selection, selector.best
    model.load_state_dict(best.pop("state"))
    info.update({
        "tokenizer_seconds": round(t_tok - t0, 1),
        "train_seconds": log["seconds"],
        "tokens_per_s": log["tokens_per_s"],
        "tokens_seen": log["tokens"],
        "final_train_loss_avg50": round(sum(log["loss"][-50:]) / len(log["loss"][-50:]), 4),
        "eval_losses": log["eval"],
        "selection": selection,
        "shipped_step": best["step"],
        "build_seconds": round(time.perf_counter() - t0, 1),
    })
    _save(model.to("cpu"), tokenizer, out, info)
    return info


class _Selector:
    """The build's checkpoint hook (rank 0's in a data-parallel build): writes requested intermediate checkpoints and,
    at the selection steps, answers validation tasks of every domain and keeps the best state."""

    def __init__(self, tokenizer, select, select_tasks, seed, checkpoint_steps, out, info, progress):
        self.tokenizer, self.select, self.select_tasks, self.seed = tokenizer, select, select_tasks, seed
        self.checkpoint_steps, self.out, self.info, self.progress = checkpoint_steps, out, info, progress
        self.selection: list[dict] = []
        self.best: dict = {}

    def __call__(self, step, m):
        import torch

        from densecode.embedded.quality import mean_success, measure

        if step in self.checkpoint_steps:
            _save(m, self.tokenizer, self.out.parent / f"{self.out.name}-step{step}", {**self.info, "checkpoint_step": step})
        if step not in self.select:
            return
        # Generation must not move the training RNG: the build stays bit-for-bit reproducible.
        rng = torch.get_rng_state()
        m.eval()
        res = measure(m, self.tokenizer, split="validation", n_tasks=self.select_tasks, seed=self.seed,
                      settings=(("greedy", 0.0),), progress=False)
        m.train()
        torch.set_rng_state(rng)
        row = {"step": step, **{k: round(v["greedy"]["success"], 4) for k, v in res.items()},
               "mean": round(mean_success(res), 4)}
        self.selection.append(row)
        if self.progress:
            print(f"step {step}: validation success {row}", flush=True)
        if not self.best or row["mean"] >= self.best["mean"]:
            self.best.update(row, state={k: v.detach().clone() for k, v in m.state_dict().items()})


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def train_in_processes(processes: int, model, tokenizer, pools, probs, settings, *, val_pools=None,
                       on_checkpoint=None, progress: bool = True):
    """`train(...)` data-parallel in `processes` spawned CPU processes joined by a gloo group (each with this process's
    torch thread count; densecode/embedded/train.py splits every batch among them). Rank 0 validates and calls
    `on_checkpoint` (a picklable callable); `model` ends with the trained weights. Returns (log, rank 0's
    on_checkpoint after training)."""
    import tempfile

    import torch
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory(prefix="densecode-build-") as tmp:
        job = Path(tmp) / "job.pt"
        torch.save({"config": model.config, "state": model.state_dict(), "tokenizer": tokenizer, "pools": pools,
                    "probs": probs, "settings": settings, "val_pools": val_pools, "on_checkpoint": on_checkpoint,
                    "progress": progress}, job)
        mp.spawn(_train_worker, args=(processes, str(job), _free_port(), torch.get_num_threads()), nprocs=processes,
                 join=True)
        result = torch.load(Path(tmp) / "result.pt", weights_only=False)
    model.load_state_dict(result["state"])
    return result["log"], result["on_checkpoint"]


def _train_worker(rank: int, processes: int, job: str, port: int, threads: int) -> None:
    from datetime import timedelta

    import torch
    import torch.distributed as dist
    import transformers
    from transformers import GPT2LMHeadModel

    from densecode.embedded.train import train

    torch.set_num_threads(threads)
    transformers.logging.set_verbosity_error()
    # rank 0 validates for minutes at the selection steps while the others wait at their next all-reduce.
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=processes,
                            timeout=timedelta(hours=2))
    try:
        payload = torch.load(job, weights_only=False)
        model = GPT2LMHeadModel(payload["config"])
        model.load_state_dict(payload["state"])
        hook = payload["on_checkpoint"]
        log = train(model, payload["tokenizer"], payload["pools"], payload["probs"], payload["settings"],
                    val_pools=payload["val_pools"], on_checkpoint=hook, progress=payload["progress"])
        if rank == 0:
            torch.save({"log": log, "on_checkpoint": hook, "state": model.state_dict()}, Path(job).parent / "result.pt")
    finally:
        dist.destroy_process_group()
