"""densecode's `generate` vs HF `model.generate`, side by side on one model and one prompt set.

Equal settings for both: the same chat prompts (MBPP validation problems in
densecode eval's chat format, from ../shared/data/mbpp), the same batch of
rows, `--new-tokens`, sampling at `--temperature` / `--top-p`, the model's end
tokens as the only stop (no stop strings: HF's stop-string criteria cost
differs). Rounds alternate densecode / HF in one process so machine load hits
both alike; the first round is warm-up and dropped. Reported per arm: generated
tokens (up to and including each row's end token) per second of wall time, and
the ratio densecode / HF.

What differs by design: densecode drops a row and its KV-cache entries when it
ends, HF keeps computing padded rows until the batch's longest row ends; the HF
arm runs transformers' own SDPA attention (densecode's loader switches models
with grouped KV heads to densecode.attention's copy-free path).

    .venv/bin/python -m benchmarks.speed.generation_vs_hf --model smollm2-135m-instruct [--rows 16 --samples 1 --new-tokens 128]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
warnings.filterwarnings("ignore")

import torch

from benchmarks.common import MBPP  # noqa: E402


def chat_prompts(tokenizer, n: int) -> list[str]:
    """MBPP validation problems as densecode eval's chat prompts (pre-filled opened code block)."""
    from densecode.eval.mbpp import chat_prompt, load_tasks

    return [chat_prompt(t, [], tokenizer) for t in load_tasks("mbpp", MBPP, split="validation")[:n]]


def densecode_round(model, tokenizer, prompts, args, seed) -> tuple[float, int]:
    from densecode.generation import generate

    start = time.perf_counter()
    gens = generate(model, tokenizer, prompts, n=args.samples, max_new_tokens=args.new_tokens,
                    temperature=args.temperature, top_p=args.top_p, batch_size=len(prompts) * args.samples, seed=seed,
                    progress=False)
    wall = time.perf_counter() - start
    return wall, sum(len(g.token_ids) + (g.finish_reason == "eos") for g in gens)


def hf_round(model, tokenizer, prompts, args, seed, eos_ids) -> tuple[float, int]:
    # HF as its users run it: transformers' own SDPA attention, not the grouped path densecode's loader installs.
    densecode_attention = model.config._attn_implementation
    model.config._attn_implementation = "sdpa"
    try:
        return _hf_generate(model, tokenizer, prompts, args, seed, eos_ids)
    finally:
        model.config._attn_implementation = densecode_attention


def _hf_generate(model, tokenizer, prompts, args, seed, eos_ids) -> tuple[float, int]:
    enc = tokenizer(prompts, return_tensors="pt", padding=True)
    torch.manual_seed(seed)
    start = time.perf_counter()
    with torch.inference_mode():
        out = model.generate(**enc, do_sample=args.temperature > 0, temperature=args.temperature, top_p=args.top_p,
                             top_k=0, max_new_tokens=args.new_tokens, num_return_sequences=args.samples,
                             eos_token_id=sorted(eos_ids),
                             pad_token_id=tokenizer.pad_token_id)
    wall = time.perf_counter() - start
    new = out[:, enc["input_ids"].shape[1]:].tolist()
    tokens = 0
    for row in new:
        ends = [i for i, t in enumerate(row) if t in eos_ids]
        tokens += ends[0] + 1 if ends else len(row)
    return wall, tokens


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--rows", type=int, default=16, help="rows of one batch (prompts x samples)")
    parser.add_argument("--samples", type=int, default=1, help="samples per prompt (RL draws several: 4 in the configs)")
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--top-p", type=float, default=0.95)
    parser.add_argument("--rounds", type=int, default=3, help="measured rounds per arm (plus one warm-up)")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: leave torch's default)")
    parser.add_argument("--json", type=Path, help="also write the figure here (run_all's record format)")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)

    from densecode.config import ModelConfig
    from densecode.generation import eos_token_ids
    from densecode.models import load_model_and_tokenizer

    if not MBPP.exists():
        print(f"error: {MBPP} not found: this benchmark reads MBPP's problems from ../shared/data "
              "(see ../shared/data/README.md)", file=sys.stderr)
        return 2
    from densecode.errors import DensecodeError

    try:
        model, tokenizer = load_model_and_tokenizer(ModelConfig(name_or_path=args.model, dtype="float32"))
    except DensecodeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    tokenizer.padding_side = "left"
    model.eval()
    if args.rows % args.samples:
        parser.error(f"--rows {args.rows} is not a multiple of --samples {args.samples}")
    prompts, source = chat_prompts(tokenizer, args.rows // args.samples), "MBPP validation chat prompts"
    eos_ids = eos_token_ids(model, tokenizer)
    lengths = [len(tokenizer(p)["input_ids"]) for p in prompts]
    print(f"model {args.model}: {sum(p.numel() for p in model.parameters()) / 1e6:.1f}M parameters, "
          f"vocabulary {model.config.vocab_size}; {len(prompts)} {source} x {args.samples} samples, prompt tokens "
          f"{min(lengths)}-{max(lengths)}; {args.new_tokens} new tokens, T={args.temperature}, top_p={args.top_p}; "
          f"torch threads {torch.get_num_threads()}", flush=True)
    rates: dict[str, list[float]] = {"densecode": [], "hf": []}
    for r in range(args.rounds + 1):
        for arm in ("densecode", "hf"):
            if arm == "densecode":
                wall, tokens = densecode_round(model, tokenizer, prompts, args, seed=r)
            else:
                wall, tokens = hf_round(model, tokenizer, prompts, args, seed=r, eos_ids=eos_ids)
            label = "warm-up" if r == 0 else f"round {r}"
            print(f"  {label:8s} {arm:9s} {tokens:5d} tokens in {wall:6.2f} s = {tokens / wall:6.1f} tok/s", flush=True)
            if r:
                rates[arm].append(tokens / wall)
    dc, hf = statistics.median(rates["densecode"]), statistics.median(rates["hf"])
    print(f"median tok/s: densecode {dc:.1f}, HF generate {hf:.1f}; ratio densecode/HF {dc / hf:.2f}x")
    from densecode.eval.bench_records import emit, figure

    emit([figure(f"generation tok/s, {args.model}, {len(prompts)} prompts x {args.samples} samples, "
                 f"{args.new_tokens} new tokens, T={args.temperature} top_p={args.top_p}", dc, "tok/s",
                 baseline="HF generate (transformers' SDPA), same model, prompts and settings", baseline_value=hf,
                 note=f"median of {args.rounds} alternating rounds")], args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
