"""Building a training run from a config: the config a run uses (a file, a domain's shipped YAML, `--set`, a run to
resume), the optimiser, the trainer with its domain, models and reward. `densecode train`
(densecode/cli/train.py), `densecode.api` and the benchmarks build runs with these functions, so they share
one set of defaults.
"""

from __future__ import annotations

import logging
from pathlib import Path

from densecode.config import dump_yaml, load_config, resolve_config_path
from densecode.errors import DensecodeError

logger = logging.getLogger("densecode.train")


def resolve_config(args):
    """`densecode train`'s parsed flags -> resolve_run_config."""
    return resolve_run_config(config=args.config, domain=args.domain, overrides=args.overrides, model=args.model,
                              algo=args.algo, output_dir=args.output_dir, steps=args.steps, resume=args.resume)


def resolve_run_config(*, config=None, domain: str | None = None, overrides=(), model: str | None = None,
                       algo: str | None = None, output_dir=None, steps: int | None = None, resume=None):
    """(cfg, config path, checkpoint to resume or None): `config`, else configs/<domain>.yaml (or the resumed run's
    config.yaml), then `overrides` (--set KEY=VALUE) and the named settings (model, algo, output_dir, steps)."""
    overrides = list(overrides or [])
    config_path = config
    resume_ckpt = None
    if resume:
        resume_ckpt, run_dir = resume_point(resume)
        run_cfg = run_dir / "config.yaml"
        if config_path is None and run_cfg.is_file():
            config_path = run_cfg
    if config_path is None:
        name = domain or "robotics"
        # `--algo grpo` starts from the domain's GRPO config (<domain>-grpo.yaml: no KL term), not the PPO one.
        name = f"{name}-grpo" if algo == "grpo" else name
        config_path = resolve_config_path(name)
        if not Path(config_path).is_file():
            from densecode.domains import get_domain_class

            # A registered domain without a shipped YAML trains from the dataclass defaults (+ --set).
            get_domain_class(domain or "robotics")
            config_path = None
    if domain:
        overrides.insert(0, f"domain={domain}")
    if model:
        overrides.append(f"model.name_or_path={model}")
    if algo:
        overrides.append(f"algo.name={algo}")
    if output_dir:
        overrides.append(f"train.output_dir={output_dir}")
    if steps is not None:
        overrides.append(f"train.steps={steps}")
    cfg = load_config(config_path, overrides)
    if resume_ckpt is not None:
        import json

        from densecode.rl.trainer import check_resumable

        # Before anything is built or written: the run's config.yaml stays the one it was trained with.
        check_resumable(resume_ckpt, json.loads((resume_ckpt / "trainer_state.json").read_text()), cfg)
    return cfg, config_path, resume_ckpt


def resume_point(path) -> tuple[Path | None, Path]:
    """(checkpoint to load, run directory) for `--resume PATH`.

    A run directory that has its config.yaml but no checkpoint yet (killed during its first save_every
    steps) restarts from step 0 with that config: (None, run_dir)."""
    from densecode.rl.trainer import resolve_checkpoint

    path = Path(path)
    try:
        ckpt = resolve_checkpoint(path)
    except DensecodeError:
        if (path / "config.yaml").is_file() and not (path / "trainer_state.json").exists():
            logger.warning("%s has no checkpoint yet: restarting that run from step 0 with its config.yaml", path)
            return None, path
        raise
    return ckpt, ckpt.parent.parent


def holds_a_run(run_dir: Path) -> bool:
    """A checkpoint, or the metrics of a run killed before its first checkpoint (--resume restarts it)."""
    return (run_dir / "checkpoints" / "latest").is_file() or any((run_dir / "checkpoints").glob("step-*")) or (
        (run_dir / "config.yaml").is_file() and (run_dir / "metrics.jsonl").is_file())


def write_atomic(path: Path, text: str) -> None:
    import os

    tmp = path.with_name(f".tmp-{path.name}")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def build_reward_fn(cfg, domain=None):
    """The domain's reward assembler (kept for callers that have only a config)."""
    from densecode.domains import build_domain
    from densecode.domains import build_reward_fn as _build

    return _build(cfg, domain if domain is not None else build_domain(cfg))


def build_algorithm(cfg):
    if cfg.algo.name == "ppo":
        from densecode.rl.ppo import PPOAlgorithm

        try:
            return PPOAlgorithm.from_config(cfg.algo, cfg.generation)
        except ValueError as exc:
            raise DensecodeError(f"PPO settings (algo.ppo.*): {exc}") from None
    if cfg.algo.name == "rft":
        from densecode.rl.rft import RFTAlgorithm

        return RFTAlgorithm.from_config(cfg.algo, cfg.generation)
    if cfg.algo.name == "grpo":
        from densecode.rl.grpo import GRPOAlgorithm

        return GRPOAlgorithm.from_config(cfg.algo, cfg.generation, seed=cfg.train.seed)
    raise DensecodeError(f"unknown algo {cfg.algo.name!r}: choose ppo, grpo or rft")


def use_prompt_style(cfg, domain, tokenizer) -> str:
    """Resolve tasks.prompt_style for the model's tokenizer (docs/prompts.md). Chat answers end at the model's
    end-of-turn token (or the closing fence of a pre-filled code block), so completion stop strings ("\\n#",
    "\\n```", ...) are replaced in the run's generation.stop (config.yaml then records what the rollouts used)."""
    style = domain.use_tokenizer(tokenizer, cfg.model.name_or_path)
    logger.info("prompts: %s style (tasks.prompt_style: %s)", style, cfg.tasks.prompt_style)
    if style == "chat":
        stop = domain.stop_strings(list(cfg.generation.stop))
        if stop != list(cfg.generation.stop):
            logger.info("chat prompts: generation.stop %s, not %s (a chat turn ends at the end-of-turn token%s)",
                        stop, cfg.generation.stop,
                        ", or at the closing fence of the block tasks.chat_answer_prefix opens" if stop else "")
        cfg.generation.stop = stop
    elif domain.options.chat_answer_prefix:
        logger.info("completion prompts: tasks.chat_answer_prefix not used")
    return style


def build_trainer(cfg, run_dir: Path, *, progress: bool = True, accelerator=None, reward_fn=None, task_source=None):
    import os

    from accelerate import Accelerator
    from accelerate.utils import set_seed

    from densecode.domains import build_domain
    from densecode.domains import build_reward_fn as domain_reward_fn
    from densecode.models import load_model_and_tokenizer
    from densecode.rl.trainer import Trainer

    accelerator = accelerator or Accelerator(mixed_precision=cfg.train.mixed_precision)
    if int(os.environ.get("WORLD_SIZE", "1")) > 1 and accelerator.num_processes == 1:
        # torchrun started several processes but accelerate did not join them: each would
        # train alone and write the same run directory.
        raise DensecodeError("launched as one of several processes but accelerate is not distributed: "
                             "on CPUs use `ACCELERATE_USE_CPU=1 accelerate launch --multi_gpu --num_processes N "
                             "-m densecode.cli train ...`")
    set_seed(cfg.train.seed)
    domain = build_domain(cfg) if task_source is None or reward_fn is None else None
    if task_source is None:
        domain.prepare()
    task_source = task_source or domain
    lora = cfg.lora if cfg.lora.enabled else None
    model, tokenizer = load_model_and_tokenizer(cfg.model, lora, device=accelerator.device, for_training=True)
    if domain is not None and task_source is domain:
        use_prompt_style(cfg, domain, tokenizer)
    algo = build_algorithm(cfg)
    critic = None
    if algo.needs_value_head and cfg.model.value_model == "separate":
        critic, _ = load_model_and_tokenizer(cfg.model, lora, device=accelerator.device, for_training=True)
    reward_fn = reward_fn or domain_reward_fn(cfg, domain)
    return Trainer(cfg, model=model, tokenizer=tokenizer, task_source=task_source, reward_fn=reward_fn, algo=algo,
                   run_dir=run_dir, critic=critic, accelerator=accelerator, progress=progress)


def run_training(cfg, run_dir: Path, *, resume_ckpt: Path | None = None, resuming: bool = False,
                 progress: bool = True) -> dict:
    """Train `cfg` into `run_dir` (resuming `resume_ckpt` if given): refuses a folder that already holds a run
    unless resuming, writes config.yaml atomically, then runs the loop. The trainer's result dict (step,
    interrupted) with is_main added."""
    run_dir = Path(run_dir)
    if not resuming and holds_a_run(run_dir):
        raise DensecodeError(f"{run_dir} already holds a run: continue it with --resume {run_dir}, "
                             "or pass another --output-dir")
    trainer = build_trainer(cfg, run_dir, progress=progress)
    if cfg.train.num_threads > 0:
        import torch

        torch.set_num_threads(cfg.train.num_threads)
    if resume_ckpt is not None:
        trainer.load_checkpoint(resume_ckpt)  # validates before the run directory is touched
    if trainer.is_main:
        run_dir.mkdir(parents=True, exist_ok=True)
        write_atomic(run_dir / "config.yaml", dump_yaml(cfg))
    result = dict(trainer.train())
    result["is_main"] = trainer.is_main
    return result
