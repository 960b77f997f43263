"""Reward assembler throughput on MBPP workloads, and Ruff batched vs once per sample.

    .venv/bin/python -m benchmarks.speed.reward_throughput [--n 256] [--repeats 3] [--model M]
    .venv/bin/python -m benchmarks.speed.reward_throughput --n 64 --repeats 1      # quick size (what run_all passes in quick mode)

Samples: MBPP reference solutions and mutated variants (syntax errors, lint
errors, wrong answers, runtime exceptions), half chat-style (fenced), half
completion-style, tokenized with the tiny test tokenizer (or --model's).
Prints: samples/s of make_sample and of the whole code-domain assembler (syntax,
lint, dfg, sandboxed tests, kl from synthetic log-probs), each component's share
of the assembler time, and the lint component with Ruff run once per batch vs
once per sample, side by side with the ratio (same diagnostics checked).
Machine-readable figures (benchmarks/run_all.py convention) go to --json PATH or
$DENSECODE_BENCH_JSON when either is set.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np
from tqdm import tqdm

from benchmarks.common import MBPP, load_tokenizer


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--model", default=None, help="tokenizer source (default: the tiny test tokenizer)")
    parser.add_argument("--per-sample-limit", type=int, default=0,
                        help="time Ruff-per-sample on only this many samples and scale (0: all)")
    parser.add_argument("--json", default=None, help="also write machine-readable figures here (run_all convention)")
    args = parser.parse_args()
    if not MBPP.is_file():
        sys.exit(f"MBPP not found at {MBPP} (expected ../shared/data beside the repo)")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from densecode.config import RewardConfig
    from densecode.rewards import build_assembler, make_sample
    from densecode.rewards.lint import LintComponent
    from densecode.rewards.mutations import load_mbpp, mbpp_workload

    tok = load_tokenizer(args.model)
    items = mbpp_workload(load_mbpp(MBPP), args.n, seed=0)
    encoded = [tok(it["response"], add_special_tokens=False)["input_ids"] for it in items]
    make_walls = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        samples = [make_sample(it["prompt"], ids, tok, it["task"]) for it, ids in zip(items, encoded)]
        make_walls.append(time.perf_counter() - t0)
    make_s = statistics.median(make_walls)
    rng = np.random.default_rng(0)
    for s in samples:
        s.logprobs = rng.normal(-1.5, 0.5, s.n_tokens).astype(np.float32)
        s.ref_logprobs = (s.logprobs + rng.normal(0, 0.1, s.n_tokens)).astype(np.float32)
    n_tok = sum(s.n_tokens for s in samples)
    print(f"{len(samples)} samples, {n_tok} tokens ({n_tok / len(samples):.0f}/sample); "
          f"kinds: {', '.join(sorted({it['kind'] for it in items}))}")
    print(f"make_sample (median of {args.repeats}): {make_s:.3f} s = {len(samples) / make_s:.0f} samples/s "
          f"(first run, filling the token-bytes cache: {make_walls[0]:.3f} s)")

    assembler = build_assembler(RewardConfig(), "code")
    assembler([samples[0]])  # warm the sandbox pool, Ruff binary, tree-sitter
    walls, shares = [], {}
    for _ in tqdm(range(args.repeats), desc="assembler", unit="batch"):
        t0 = time.perf_counter()
        batch = assembler(samples)
        walls.append(time.perf_counter() - t0)
        for name in batch.raw:
            shares.setdefault(name, []).append(batch.stats[f"time/reward_{name}_s"])
    wall = statistics.median(walls)
    print(f"\nassembler (code domain: {', '.join(batch.raw)}), median of {args.repeats}: "
          f"{wall:.2f} s/batch = {len(samples) / wall:.1f} samples/s = {n_tok / wall:.0f} tokens/s")
    print(f"{'component':<10} {'s/batch':>8} {'share':>7}")
    share_note = []
    for name, ts in sorted(shares.items(), key=lambda kv: -statistics.median(kv[1])):
        t = statistics.median(ts)
        print(f"{name:<10} {t:>8.3f} {100 * t / wall:>6.1f}%")
        share_note.append(f"{name} {100 * t / wall:.0f}%")
    st = batch.stats
    print(f"(pass_rate {st.get('reward/tests/pass_rate', 0):.2f}, syntax_ok {st.get('reward/syntax/syntax_ok', 0):.2f}, "
          f"lint violations/sample {st.get('reward/lint/n_violations', 0):.1f})")

    lint = LintComponent()
    batched_walls = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        batched = lint(samples)
        batched_walls.append(time.perf_counter() - t0)
    t_batched = statistics.median(batched_walls)
    subset = samples[: args.per_sample_limit] if args.per_sample_limit else samples
    t0 = time.perf_counter()
    single = [lint([s])[0] for s in tqdm(subset, desc="ruff per sample", unit="sample")]
    t_single = (time.perf_counter() - t0) * len(samples) / len(subset)
    same = all(np.array_equal(a.values, b.values) for a, b in zip(batched, single))
    print(f"\nlint component over {len(samples)} samples (Ruff + tree-sitter mapping):")
    print(f"{'Ruff once per batch':<24} {t_batched:>8.3f} s   {len(samples) / t_batched:>8.0f} samples/s")
    print(f"{'Ruff once per sample':<24} {t_single:>8.3f} s   {len(samples) / t_single:>8.0f} samples/s"
          + ("" if subset is samples else f"   (timed on {len(subset)}, scaled)"))
    print(f"speed-up batched / per-sample: {t_single / t_batched:.1f}x; identical token values: {same}")

    from densecode.eval.bench_records import emit, figure

    emit([
        figure(f"reward assembler (code domain: {', '.join(batch.raw)}), {len(samples)} MBPP samples", len(samples) / wall,
               "samples/s", note=f"time share: {', '.join(share_note)}; {n_tok / wall:.0f} tokens/s"),
        figure("make_sample (response tokens -> sample)", len(samples) / make_s, "samples/s",
               note=f"{n_tok / len(samples):.0f} tokens/sample"),
        figure(f"lint component time (Ruff + tree-sitter) on {len(samples)} samples, Ruff once per batch", t_batched,
               "s", baseline="Ruff once per sample", baseline_value=t_single, ratio=t_single / t_batched,
               note="ratio = speed-up; identical token values: " + str(same)
                    + ("" if subset is samples else f"; per-sample timed on {len(subset)}, scaled")),
    ], args.json)
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
