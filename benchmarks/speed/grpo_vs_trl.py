"""densecode GRPO vs TRL's GRPOTrainer: wall time per step and tokens/s, same work.

Same tiny model (densecode.testing.make_tiny_model, or --model DIR), same prompts,
same group size G, completion length, learning rate, steps, one optimizer update
per step (densecode grpo.num_iterations=1 / num_minibatches=1; TRL num_iterations=1,
per_device_train_batch_size = prompts×G), no KL (beta 0), clip-higher 0.2/0.28,
token-level loss (TRL "bnpo" = DAPO token mean), temperature 1.0, top-p 0.95,
and the same reward (fraction of even token ids in the completion). The first
step of each is a warm-up and is left out of the means. Tokens/s counts the
completion tokens actually generated (EOS can end a completion early).

    .venv/bin/python -m benchmarks.speed.grpo_vs_trl                       # defaults below
    .venv/bin/python -m benchmarks.speed.grpo_vs_trl --steps 6 --prompts 4 --group-size 8 --max-new-tokens 64 --repeats 3

Each run happens in a fresh process, so the peak RSS printed beside its times is
its own. `--model smollm2-135m-instruct` (or any model dir / .gguf file) times a
real model.

densecode runs twice per repeat: as configured by default (log pi_old from the
sampling pass, no score pass) and with `algo.score_pass=true` (a separate no-grad
forward pass for log pi_old, the behaviour before), alternating with TRL.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np

PROMPTS = [
    "# Instruction: go to the kitchen and pick up the apple\ndef task_program():\n",
    "# Instruction: say hello in every room\ndef task_program():\n",
    "def add(a, b):\n",
    "# Instruction: ask Alice if she wants tea\ndef task_program():\n",
    "for room in get_all_rooms():\n",
    "class Point:\n",
    "x = [i * 2 for i in range(10)]\n",
    "import math\n",
]


def even_fraction(token_ids) -> float:
    ids = list(token_ids)
    return float(np.mean([i % 2 == 0 for i in ids])) if ids else 0.0


def fresh_accelerate_state() -> None:
    """Both trainers build an Accelerator with their own settings; start each run from a clean state."""
    from accelerate.state import AcceleratorState

    AcceleratorState._reset_state(reset_partial_state=True)


def run_densecode(model_dir: str, args, run_dir: Path, score_pass: bool = False) -> dict:
    fresh_accelerate_state()
    import torch

    torch.set_num_threads(args.threads)  # a fresh process (measured): the parent's setting is not inherited
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from densecode.config import load_config
    from densecode.rewards.assembler import RewardBatch
    from densecode.rl.grpo import GRPOAlgorithm
    from densecode.rl.trainer import Trainer

    class Prompts:
        def train_batch(self, n, seed):
            return [PROMPTS[i % len(PROMPTS)] for i in range(n)], [{} for _ in range(n)]

        def evaluate(self, *a, **k):
            return {}

    def reward_fn(samples):
        total = []
        for s in samples:
            t = np.zeros(s.n_tokens, dtype=np.float32)
            if s.n_tokens:
                t[-1] = even_fraction(s.token_ids)
            total.append(t)
        return RewardBatch(total, {}, {}, {}, {})

    torch.manual_seed(args.seed)
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    cfg = load_config(None, [
        "algo.name=grpo", f"train.batch_size={args.prompts}", f"algo.grpo.group_size={args.group_size}",
        f"generation.max_new_tokens={args.max_new_tokens}", f"train.lr={args.lr}", "train.eval_every=0",
        "train.save_every=0", "algo.grpo.num_iterations=1", "algo.num_minibatches=1", "generation.top_p=0.95",
        f"generation.batch_size={args.prompts * args.group_size}", "algo.grpo.temperature_schedule={stages: [1.0]}",
        "algo.grpo.truncation_masking=none", "algo.grpo.sequence_reward=mean", f"train.seed={args.seed}", f"algo.score_pass={str(score_pass).lower()}",
    ])
    cfg.reward.weights = {"kl": 0.0}  # as TRL's beta=0.0: no KL, no reference forward
    algo = GRPOAlgorithm.from_config(cfg.algo, cfg.generation, seed=args.seed)
    trainer = Trainer(cfg, model=model, tokenizer=tok, task_source=Prompts(), reward_fn=reward_fn, algo=algo,
                      run_dir=run_dir, progress=False)
    times, tokens, rewards, parts = [], [], [], []
    for step in range(args.steps):
        t0 = time.perf_counter()
        st = trainer.train_step(step)
        times.append(time.perf_counter() - t0)
        tokens.append(float(trainer._last_batch.response_mask.sum()))
        rewards.append(st["reward/sequence_mean"])
        parts.append({k: st[k] for k in ("time/generate_s", "time/score_s", "time/reward_s", "time/update_s")})
    return {"step_s": times, "tokens": tokens, "reward": rewards, "parts": parts}


def run_trl(model_dir: str, args, run_dir: Path) -> dict:
    fresh_accelerate_state()
    import torch

    torch.set_num_threads(args.threads)  # a fresh process (measured): the parent's setting is not inherited
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    torch.manual_seed(args.seed)
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    tokens: list[float] = []
    rewards: list[float] = []

    def reward_func(prompts, completions, completion_ids, **kwargs):
        r = [even_fraction(ids) for ids in completion_ids]
        tokens.append(float(sum(len(ids) for ids in completion_ids)))
        rewards.append(float(np.mean(r)))
        return r

    class Timer(TrainerCallback):
        def __init__(self):
            self.times, self._t0 = [], None

        def on_step_begin(self, a, state, control, **kw):
            self._t0 = time.perf_counter()

        def on_step_end(self, a, state, control, **kw):
            self.times.append(time.perf_counter() - self._t0)

    n_rows = args.prompts * args.steps
    data = Dataset.from_dict({"prompt": [PROMPTS[i % len(PROMPTS)] for i in range(n_rows)]})
    config = GRPOConfig(
        output_dir=str(run_dir), max_steps=args.steps, learning_rate=args.lr, lr_scheduler_type="constant",
        warmup_steps=0, per_device_train_batch_size=args.prompts * args.group_size, gradient_accumulation_steps=1,
        num_generations=args.group_size, max_completion_length=args.max_new_tokens, max_prompt_length=128,
        num_iterations=1, beta=0.0, epsilon=0.2, epsilon_high=0.28, loss_type="bnpo", temperature=1.0, top_p=0.95,
        use_cpu=True, report_to="none", save_strategy="no", logging_steps=1, disable_dropout=True, seed=args.seed,
        shuffle_dataset=False, dataloader_num_workers=0, max_grad_norm=1.0, adam_epsilon=1e-5, disable_tqdm=True,
        log_level="warning",
    )
    timer = Timer()
    trainer = GRPOTrainer(model=model, reward_funcs=reward_func, args=config, train_dataset=data,
                          processing_class=tok, callbacks=[timer])
    from transformers.trainer_callback import PrinterCallback

    trainer.remove_callback(PrinterCallback)  # its per-step dict printing is not part of the work compared
    trainer.train()
    return {"step_s": timer.times, "tokens": tokens, "reward": rewards}


def measured(fn, model_dir: str, args, run_dir: Path, **kw) -> dict:
    """fn's result with its process's peak RSS: each run in a fresh process, so each peak is its own."""
    from densecode.eval.bench_records import in_child_process

    res, rss = in_child_process(fn, model_dir, args, run_dir, *kw.values())
    return {**res, "peak_rss_mb": rss}


def summarize(res: dict) -> dict:
    times, toks = res["step_s"][1:], res["tokens"][1:len(res["step_s"])]  # drop the warm-up step
    parts = res.get("parts", [])[1:]
    breakdown = {k.split("/")[1]: float(np.mean([p[k] for p in parts])) for k in (parts[0] if parts else {})}
    return {
        "breakdown_s": breakdown,
        "step_s": float(np.mean(times)),
        "tokens_per_step": float(np.mean(toks)),
        "tokens_per_s": float(np.sum(toks) / np.sum(times)),
        "reward_first": float(res["reward"][0]),
        "reward_last": float(res["reward"][-1]),
        "peak_rss_mb": float(res["peak_rss_mb"]),
    }


def median_of(runs: list[dict]) -> dict:
    out = {k: float(np.median([r[k] for r in runs])) for k in runs[0] if k != "breakdown_s"}
    out["breakdown_s"] = {k: float(np.median([r["breakdown_s"][k] for r in runs])) for k in runs[0]["breakdown_s"]}
    out["step_s_all"] = [r["step_s"] for r in runs]
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default=None, help="model dir, .gguf file or name such as smollm2-135m-instruct "
                   "(default: a fresh tiny GPT-2 from densecode.testing)")
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--prompts", type=int, default=4, help="prompts per step")
    p.add_argument("--group-size", type=int, default=8)
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repeats", type=int, default=3, help="alternating densecode/TRL runs; medians reported")
    p.add_argument("--out", default="runs/bench/grpo_vs_trl.json")
    args = p.parse_args(argv)
    if args.steps < 2:
        p.error("--steps must be >= 2 (the first step is a warm-up)")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import torch

    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        model_dir = args.model
        if model_dir is None:
            from densecode.testing import make_tiny_model

            model_dir = str(make_tiny_model(tmp / "tiny"))
        else:
            from densecode.models import resolve_model_path

            model_dir = resolve_model_path(model_dir)  # a name such as smollm2-135m-instruct, or a .gguf file
        # Alternate the two, repeated: on a shared machine the load drifts; medians over repeats.
        dense_runs, pass_runs, trl_runs = [], [], []
        for rep in range(args.repeats):
            dense_runs.append(summarize(measured(run_densecode, model_dir, args, tmp / f"densecode-{rep}")))
            pass_runs.append(summarize(measured(run_densecode, model_dir, args, tmp / f"densecode-pass-{rep}",
                                                score_pass=True)))
            trl_runs.append(summarize(measured(run_trl, model_dir, args, tmp / f"trl-{rep}")))
            print(f"repeat {rep + 1}/{args.repeats}: densecode {dense_runs[-1]['step_s']:.3f} s/step, "
                  f"densecode with score pass {pass_runs[-1]['step_s']:.3f} s/step, "
                  f"TRL {trl_runs[-1]['step_s']:.3f} s/step", flush=True)
        dense, with_pass, trl = median_of(dense_runs), median_of(pass_runs), median_of(trl_runs)
    import trl as trl_pkg

    rows = [("wall s / step", "step_s", "{:.3f}"), ("completion tokens / step", "tokens_per_step", "{:.0f}"),
            ("tokens / s", "tokens_per_s", "{:.0f}"), ("peak RSS, MiB (its own process)", "peak_rss_mb", "{:.0f}")]
    model_name = Path(args.model).name if args.model else "tiny random GPT-2"
    print(f"\nGRPO step, {model_name}: {args.prompts} prompts x G={args.group_size}, {args.max_new_tokens} new tokens, "
          f"{args.steps} steps (first = warm-up), {args.threads} thread(s), median of {args.repeats} alternating "
          f"runs; TRL {trl_pkg.__version__}")
    print("| metric | densecode (score once) | densecode (algo.score_pass=true) | TRL GRPOTrainer "
          "| score once / TRL | score pass / TRL |")
    print("|---|---|---|---|---|---|")
    for label, key, fmt in rows:
        ratio = dense[key] / trl[key] if trl[key] else float("nan")
        ratio_pass = with_pass[key] / trl[key] if trl[key] else float("nan")
        print(f"| {label} | {fmt.format(dense[key])} | {fmt.format(with_pass[key])} | {fmt.format(trl[key])} "
              f"| {ratio:.2f} | {ratio_pass:.2f} |")
    speedup = trl["step_s"] / dense["step_s"]
    print("densecode step breakdown (s): " + ", ".join(f"{k} {v:.3f}" for k, v in dense["breakdown_s"].items()))
    print("with score pass (s):          " + ", ".join(f"{k} {v:.3f}" for k, v in with_pass["breakdown_s"].items()))
    print(f"\ndensecode step is {speedup:.2f}x {'faster' if speedup >= 1 else 'slower'} than TRL's "
          f"(tokens/s ratio {dense['tokens_per_s'] / trl['tokens_per_s']:.2f})")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"args": vars(args), "trl_version": trl_pkg.__version__, "densecode": dense,
                               "densecode_score_pass": with_pass, "trl": trl}, indent=2))
    print(f"wrote {out}")
    from densecode.eval.bench_records import emit, figure

    shape = f"{args.prompts} prompts x G={args.group_size}, {args.max_new_tokens} new tokens"
    if args.model:
        shape = f"{model_name}, {shape}"
    emit([figure(f"GRPO wall s/step ({shape})", dense["step_s"], "s/step", baseline=f"TRL {trl_pkg.__version__} GRPOTrainer",
                 baseline_value=trl["step_s"], ratio=speedup, note="ratio = speed-up (TRL s/step / densecode s/step)"),
          figure(f"GRPO tokens/s ({shape})", dense["tokens_per_s"], "tokens/s",
                 baseline=f"TRL {trl_pkg.__version__} GRPOTrainer", baseline_value=trl["tokens_per_s"],
                 note="goal >= 1.0x"),
          figure(f"GRPO tokens/s with algo.score_pass=true ({shape})", with_pass["tokens_per_s"], "tokens/s",
                 baseline=f"TRL {trl_pkg.__version__} GRPOTrainer", baseline_value=trl["tokens_per_s"]),
          figure(f"GRPO peak RSS, MiB ({shape})", dense["peak_rss_mb"], "MiB",
                 baseline=f"TRL {trl_pkg.__version__} GRPOTrainer", baseline_value=trl["peak_rss_mb"],
                 note="each run in its own process; ratio < 1 = less memory")])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
