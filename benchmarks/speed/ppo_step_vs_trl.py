"""densecode's PPO step vs TRL's `PPOTrainer` (the installed 0.20.x), side by side.

Same tiny GPT-2 (densecode.testing.make_tiny_model), same prompts, batch size,
response length, PPO epochs and minibatches; rounds alternate densecode / TRL in
one process so machine load hits both alike. Reported: wall time per PPO step
(rollout + scoring + update; the first step of each round is warm-up and dropped),
response tokens/s, and the ratio.

What differs by design (printed with the results):
- TRL scores a finished sequence with a reward *model* (here a tiny GPT-2
  sequence classifier) and always generates exactly `response_length` tokens;
  densecode calls a per-token reward function (here a trivial one that costs
  ~nothing) and stops a row at EOS (rare for a random tiny model: tokens are counted).
- Value model: TRL always runs a separate critic backbone; densecode is timed with
  its default shared-backbone head AND with `model.value_model=separate`.

    .venv/bin/python -m benchmarks.speed.ppo_step_vs_trl [--rounds 3 --steps 4 --batch 16 --length 64]
    .venv/bin/python -m benchmarks.speed.ppo_step_vs_trl --model smollm2-135m-instruct --threads 2 ...

Each run happens in a fresh process, so the peak RSS printed beside its times is its own.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
warnings.filterwarnings("ignore")

import numpy as np
import torch

PROMPTS = ["def add(a, b):\n", "for room in get_all_rooms():\n", "x = [i * 2 for i in", "class Point:\n",
           "import math\n", "answer = ask('Alice',", "while True:\n", "d = {'k': 1,"]


def trl_steps(model_dir: str, args, out_dir: str) -> dict:
    from datasets import Dataset
    from transformers import (
        AutoModelForCausalLM,
        AutoModelForSequenceClassification,
        AutoTokenizer,
        TrainerCallback,
    )
    from trl import PPOConfig, PPOTrainer

    torch.set_num_threads(args.threads)  # a fresh process (in_child_process): the parent's setting is not inherited
    tok = AutoTokenizer.from_pretrained(model_dir)
    tok.padding_side = "left"
    if tok.pad_token is None:  # TRL pads batches; a tokenizer without a pad token pads with EOS
        tok.pad_token = tok.eos_token
    torch.manual_seed(0)
    policy = AutoModelForCausalLM.from_pretrained(model_dir)
    ref = AutoModelForCausalLM.from_pretrained(model_dir)
    reward = AutoModelForSequenceClassification.from_pretrained(model_dir, num_labels=1)
    value = AutoModelForSequenceClassification.from_pretrained(model_dir, num_labels=1)
    for m in (reward, value):
        m.config.pad_token_id = tok.pad_token_id
    prompts = [PROMPTS[i % len(PROMPTS)] for i in range(args.batch * (args.steps + 1))]
    ds = Dataset.from_dict({"input_ids": [tok(p)["input_ids"] for p in prompts]})
    cfg = PPOConfig(
        output_dir=out_dir, per_device_train_batch_size=args.batch, gradient_accumulation_steps=1,
        num_mini_batches=args.minibatches, num_ppo_epochs=args.epochs, response_length=args.length,
        total_episodes=args.batch * args.steps, local_rollout_forward_batch_size=args.batch, temperature=1.0,
        learning_rate=1e-5, report_to="none", save_strategy="no", logging_steps=1, num_sample_generations=0,
        stop_token=None, missing_eos_penalty=None, kl_coef=0.05, seed=0, use_cpu=True, bf16=False, fp16=False,
        dataloader_num_workers=0, disable_tqdm=True,
    )
    stamps: list[float] = []

    class Clock(TrainerCallback):
        def on_step_end(self, a, state, control, **kw):
            stamps.append(time.perf_counter())

    trainer = PPOTrainer(args=cfg, processing_class=tok, model=policy, ref_model=ref, reward_model=reward,
                         train_dataset=ds, value_model=value, callbacks=[Clock()])
    start = time.perf_counter()
    with open(os.devnull, "w") as devnull, contextlib.redirect_stdout(devnull):  # TRL prints its log dicts
        trainer.train()
    times = np.diff([start] + stamps).tolist()
    # TRL generates exactly response_length tokens per row.
    return {"times": times, "tokens": [args.batch * args.length] * len(times)}


SCORE = {}  # name -> per-step score-phase seconds and step seconds; "dlogp" -> max |delta log p| per run


def densecode_steps(model_dir: str, args, out_dir: str, value_model: str, score_pass: bool = False) -> dict:
    """Step times and tokens, and the score phase's (seconds, step seconds) per timed step; for the shared
    head without a score pass also the largest |log pi_old| difference between the sampling and a forward pass."""
    from densecode.config import load_config
    from densecode.models import load_model_and_tokenizer
    from densecode.rewards import RewardBatch
    from densecode.rl.ppo import PPOAlgorithm
    from densecode.rl.trainer import Trainer

    torch.set_num_threads(args.threads)
    cfg = load_config(None, [
        f"model.name_or_path={model_dir}", f"model.value_model={value_model}", "reward.weights={kl: 0.05}",
        "reward.code_regions=completion", f"generation.max_new_tokens={args.length}", "generation.top_p=1.0",
        f"generation.batch_size={args.batch}", f"train.batch_size={args.batch}", "train.lr=1e-5",
        f"algo.ppo.epochs={args.epochs}", f"algo.num_minibatches={args.minibatches}", "train.eval_every=0",
        "train.save_every=0", f"train.output_dir={out_dir}", f"algo.score_pass={str(score_pass).lower()}",
    ])
    torch.manual_seed(0)
    model, tok = load_model_and_tokenizer(cfg.model, None, device="cpu", for_training=True)
    critic = None
    if value_model == "separate":
        critic, _ = load_model_and_tokenizer(cfg.model, None, device="cpu", for_training=True)

    class Prompts:
        def train_batch(self, n, seed):
            return [PROMPTS[i % len(PROMPTS)] for i in range(n)], [{}] * n

    def reward_fn(samples):  # trivial per-token reward + the KL term, like densecode's kl component
        total = [np.full(len(s.token_ids), 0.01, np.float32) - 0.05 * (s.logprobs - s.ref_logprobs) for s in samples]
        return RewardBatch(total, {}, {}, {}, {})

    tr = Trainer(cfg, model=model, tokenizer=tok, task_source=Prompts(), reward_fn=reward_fn,
                 algo=PPOAlgorithm.from_config(cfg.algo, cfg.generation), run_dir=out_dir, critic=critic,
                 progress=False)
    times, tokens, score_rows, dlogp = [], [], [], None
    for step in range(args.steps):
        t0 = time.perf_counter()
        stats = tr.train_step(step)
        times.append(time.perf_counter() - t0)
        tokens.append(round(stats["rollout/response_length"] * args.batch))
        if step:
            score_rows.append((stats.get("time/score_s", float("nan")), times[-1]))
    if not score_pass and value_model == "shared":
        # How far the sampling pass's log pi_old is from a separate forward pass (what it replaces).
        batch, _ = tr.rollout(args.steps)
        with torch.no_grad():
            out = tr.unwrapped(batch.input_ids, batch.attention_mask, batch.position_ids, batch.response_ids,
                               temperature=batch.temperature)
        dlogp = ((out.logprobs - batch.logprobs) * batch.response_mask).abs().max().item()
    return {"times": times, "tokens": tokens, "score_rows": score_rows, "dlogp": dlogp}


def measured(name: str, fn, *args) -> tuple[list[float], list[int], float]:
    """Run fn in a fresh process (its peak RSS its own); keep its score-phase rows in SCORE."""
    from densecode.eval.bench_records import in_child_process

    res, rss = in_child_process(fn, *args)
    if res.get("score_rows"):
        SCORE.setdefault(name, []).extend(res["score_rows"])
    if res.get("dlogp") is not None:
        SCORE.setdefault("dlogp", []).append(res["dlogp"])
    return res["times"], res["tokens"], rss


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=4, help="PPO steps per round (first one is warm-up)")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--length", type=int, default=64, help="response tokens")
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--minibatches", type=int, default=1)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--model", default=None, help="model dir, .gguf file or name such as smollm2-135m-instruct "
                   "(default: a tiny random GPT-2, 4 layers x 128)")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    import trl

    from densecode.testing import make_tiny_model

    results: dict[str, tuple[list[float], list[int]]] = {k: ([], []) for k in
                                                         ("densecode (shared value head)",
                                                          "densecode (shared, algo.score_pass=true)",
                                                          "densecode (separate critic)", f"TRL {trl.__version__} PPOTrainer")}
    peak_rss: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        if args.model:
            from densecode.models import resolve_model_path

            model_dir = resolve_model_path(args.model)
        else:
            model_dir = str(make_tiny_model(Path(tmp) / "tiny", n_layer=4, n_embd=128, n_head=4))
        shared, with_pass = "densecode (shared value head)", "densecode (shared, algo.score_pass=true)"
        separate, trl_label = "densecode (separate critic)", f"TRL {trl.__version__} PPOTrainer"
        runners = [(shared, densecode_steps, ("shared",)), (with_pass, densecode_steps, ("shared", True)),
                   (separate, densecode_steps, ("separate",)), (trl_label, trl_steps, ())]
        for r in range(args.rounds):
            for name, fn, extra in (runners if r % 2 == 0 else runners[::-1]):
                with tempfile.TemporaryDirectory(dir=tmp) as out:
                    times, tokens, rss = measured(name, fn, model_dir, args, out, *extra)
                results[name][0].extend(times[1:])
                results[name][1].extend(tokens[1:])
                peak_rss[name] = max(rss, peak_rss.get(name, 0.0))
                print(f"round {r + 1}: {name}: {statistics.median(times[1:]):.3f} s/step, peak RSS {rss:.0f} MiB",
                      file=sys.stderr, flush=True)
    trl_name = next(k for k in results if k.startswith("TRL"))
    base = statistics.median(results[trl_name][0])
    model_name = Path(args.model).name if args.model else "tiny GPT-2 (4 layers, d=128)"
    print(f"\nPPO step, {model_name}, batch {args.batch}, {args.length} response tokens, "
          f"{args.epochs} epochs x {args.minibatches} minibatch(es), {args.threads} thread(s), "
          f"{args.rounds} alternating rounds x {args.steps - 1} timed steps")
    print(f"{'implementation':<42} {'s/step (median)':>16} {'tokens/s':>10} {'speed vs TRL':>13} {'peak RSS MiB':>13}")
    for name, (times, tokens) in results.items():
        med = statistics.median(times)
        tps = sum(tokens) / sum(times)
        print(f"{name:<42} {med:>16.3f} {tps:>10.0f} {base / med:>12.2f}x {peak_rss[name]:>13.0f}")
    print("\nscore phase (log pi_old, V, log pi_ref; no grad) as a share of the step, median over steps:")
    shares = {}
    for name in (shared, with_pass):
        rows = SCORE.get(name, [])
        shares[name] = statistics.median([a / b for a, b in rows]) if rows else float("nan")
        print(f"  {name:<42} {100 * shares[name]:5.1f}%  ({statistics.median([a for a, _ in rows]):.3f} s)")
    dlogp = max(SCORE.get("dlogp", [float("nan")]))
    print(f"max |log pi_old(sampling pass) - log pi_old(forward pass)| over all response tokens: {dlogp:.2e} "
          f"(first-epoch ratio off 1 by at most {math.expm1(dlogp):.1e})")
    print("\nnotes: TRL scores with a reward model and always generates the full length; densecode uses a trivial "
          "per-token reward and stops at EOS (tokens counted as generated).")
    from densecode.eval.bench_records import emit, figure

    records = [figure("PPO score-phase share of the step (shared value head)", 100 * shares[shared], "%",
                      baseline="algo.score_pass=true", baseline_value=100 * shares[with_pass], note="goal <= 10%"),
               figure("max |delta log pi_old|, sampling pass vs forward pass", dlogp, "nats",
                      note=f"first-epoch ratio within {math.expm1(dlogp):.1e} of 1")]
    for name, (times, tokens) in results.items():
        if name == trl_name:
            continue
        med = statistics.median(times)
        shape = f"batch {args.batch}, {args.length} tokens, {args.epochs} epochs"
        if args.model:
            shape = f"{model_name}, {shape}"
        records.append(figure(f"PPO peak RSS, MiB, {name} ({shape})", peak_rss[name], "MiB", baseline=trl_name,
                              baseline_value=peak_rss[trl_name], note="each run in its own process"))
        records.append(figure(f"PPO s/step, {name} ({shape})",
                              med, "s/step", baseline=trl_name, baseline_value=base, ratio=base / med,
                              note=f"ratio = speed-up; tokens/s {sum(tokens) / sum(times):.0f} vs "
                                   f"{sum(results[trl_name][1]) / sum(results[trl_name][0]):.0f}; TRL always "
                                   "generates the full length"))
    emit(records)
    return 0


if __name__ == "__main__":
    sys.exit(main())
