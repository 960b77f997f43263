"""What SynCode costs and how often it is wrong, side by side.

    python -m benchmarks.speed.syncode_overhead [--model DIR] [--mbpp ../shared/data/mbpp/mbpp.jsonl]

Prints
1. generation tokens/s with grammar off / check / constrain (check-first, densecode's
   default) / constrain (full mask every step, SynCode's way), same model, same
   prompts, same seed, at 64 and 256 new tokens: slowdown vs `off`, and constrain's
   time per token vs check's (goal <= 1.3x), and the grammar's own CPU time per
   emitted token (parser checks, masks, redraws; the model and the plain draw
   excluded), since constrain also changes what is generated (EOS only once the
   code parses, so rows run longer). "unchecked" counts check-mode tokens
   after a row's first rejected token (its code is no longer a valid prefix, so
   later tokens get no verdict) and rows that fell back; a random or weak model
   writes invalid code early, hence many unchecked tokens with 0 fallbacks;
   with --realistic also on a randomly initialised GPT-2-small-shaped model
   (12 layers x 768, built offline from a config; goals check <= 1.15x off and
   constrain <= 1.3x off);
2. per-token check cost by position in the output, teacher-forced on real code
   (MBPP reference solutions concatenated), densecode's incremental parser vs the
   previous densecode parser (re-lexes the code each step) vs syncode's own
   (goal: <= 0.3 ms per row-token at every position, no growth);
3. mask-store build and load times (and size) for the model's tokenizer;
4. MBPP false rejections: of the reference solutions Python accepts, how many a
   token-by-token check rejects somewhere, syncode as shipped ("before": its
   grammar, its terminal simplifications, no indentation masks) vs densecode
   ("after"). `check` counts syncode's parser verdict (`is_valid`); `mask` counts
   a reference token that constrain mode's mask would have blocked.

Without --model it uses the tiny random test model (random weights: its output is
mostly invalid, so check mode stops checking a row after its first error and
constrain mode resamples often; a trained model such as densecode-tiny is the
realistic case).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import MBPP as DEFAULT_MBPP

PROMPTS = [
    "# Instruction: go to the kitchen and pick up the apple\ndef task_program():\n",
    "# Instruction: ask Alice if she wants tea, and bring her a cup if yes\ndef task_program():\n",
    "# Instruction: say hello in every room\ndef task_program():\n",
    "# Instruction: find the red ball and place it in the office\ndef task_program():\n",
    '"""Return the sum of a and b."""\ndef add(a, b):\n',
    '"""Return the reverse of the string s."""\ndef reverse_string(s):\n',
    '"""Return True when n is even."""\ndef is_even(n):\n',
    '"""Return the largest element of the list xs."""\ndef largest(xs):\n',
]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default=None, help="model dir (default: tiny random test model)")
    p.add_argument("--new-tokens", type=int, nargs="+", default=[64, 256])
    p.add_argument("--n", type=int, default=2, help="samples per prompt")
    p.add_argument("--temperature", type=float, default=0.8)
    p.add_argument("--prompts", choices=("fixed", "tasks"), default="fixed",
                   help="fixed: the script's 8 prompts (comparable across runs); tasks: 4 robotics + 4 codegen "
                        "held-out prompts, the formats the embedded model was trained on")
    p.add_argument("--mbpp", default=str(DEFAULT_MBPP))
    p.add_argument("--mbpp-limit", type=int, default=None, help="first N solutions only (default: all)")
    p.add_argument("--mask-limit", type=int, default=None, help="solutions for the (slower) mask count (default: all)")
    p.add_argument("--position-tokens", type=int, default=512, help="tokens in the per-position cost scan")
    p.add_argument("--baseline-tokens", type=int, default=128,
                   help="tokens the slow baseline parsers are timed on (syncode's grows to ~1 s/token by 512)")
    p.add_argument("--realistic", action="store_true",
                   help="also time generation on a random GPT-2-small-shaped model (12x768; ~1 min per mode)")
    p.add_argument("--mbpp-configs", nargs="+", default=["before", "after"], choices=["before", "after"],
                   help="MBPP section: syncode as shipped (before) and/or densecode (after)")
    p.add_argument("--skip", nargs="*", default=[], choices=["generation", "position", "maskstore", "mbpp"])
    p.add_argument("--quick", action="store_true",
                   help="small budget for benchmarks/run_all.py --quick (32 tokens, 30 MBPP solutions, no fresh build)")
    p.add_argument("--json", default=None, help="also write machine-readable figures here (run_all convention)")
    args = p.parse_args(argv)
    if args.quick:
        args.new_tokens, args.n, args.mask_limit, args.position_tokens = [32], 1, 10, 64
        args.baseline_tokens = 64
        args.mbpp_limit = args.mbpp_limit or 30
        args.skip = list(set(args.skip) | {"maskstore"})
    return args


def load(model_dir):
    from densecode.config import ModelConfig
    from densecode.models import load_model_and_tokenizer

    return load_model_and_tokenizer(ModelConfig(name_or_path=str(model_dir)))


MODES = (("off", "off", {}), ("check", "check", {}), ("constrain", "constrain", {"constrain_by": "check_first"}),
         ("constrain-mask", "constrain", {"constrain_by": "mask"}))


def task_prompts(per_domain: int = 4) -> list[str]:
    """The first held-out prompts (test split, seed 0) of robotics and codegen: the embedded model's own formats, so
    its rows stay valid code and check has something to check (the fixed code prompts are not codegen's format)."""
    from densecode.config import load_config, resolve_config_path
    from densecode.domains import build_domain

    out = []
    for name in ("robotics", "codegen"):
        domain = build_domain(load_config(resolve_config_path(name), []))
        domain.prepare()
        out += [t["prompt"] for t in domain.tasks("test", per_domain, 0)]
    return out


def bench_generation(model, tok, args, label="embedded"):
    from densecode.eval.bench_records import figure
    from densecode.generation import generate

    records = []
    import densecode.grammar as G

    prompts = args.prompt_list
    # Figures from the task prompts are other figures (other rows in RESULTS.md) than the fixed prompts' ones.
    model_label = f"{label} model" + (", task prompts" if args.prompts == "tasks" else "")
    start = time.perf_counter()
    G.syncode_processor(tok, G.load_grammar())  # build/load outside the timed runs
    # Warm the LALR accepts() cache the way a long run does, untimed.
    generate(model, tok, prompts, n=args.n, max_new_tokens=8, grammar="constrain", seed=1, progress=False)
    print(f"\n(grammar processor ready in {time.perf_counter() - start:.1f} s, DENSECODE_CACHE={G.cache_root()})")
    print(f"\n== 1. generation throughput, {model_label} (tokens/s; slowdown = off tok/s / mode tok/s) ==")
    print(f"prompts={len(prompts)} ({args.prompts}) n={args.n} temperature={args.temperature} "
          f"batch={len(prompts) * args.n}")
    print("(seconds = CPU seconds of this process, time.process_time: the 2 cores are shared with other work, so "
          "wall-clock, the last column, is noisy; torch runs 1 thread)")
    print("(grammar ms/tok: the grammar's own CPU time per emitted token; other ms/tok: the rest (model, "
          "plain draw, loop) per token, which grows when fewer rows share each forward pass; rows/step: "
          "emitted tokens per decoding step, the batch's mean occupancy; longest: the longest row)")
    print(f"{'new tokens':>10} {'mode':>15} {'tokens':>7} {'seconds':>8} {'tok/s':>8} {'slowdown':>9} "
          f"{'s/tok vs check':>15} {'accepted':>9} {'unchecked':>9} {'fallbacks':>9} {'wall s':>8} "
          f"{'grammar ms/tok':>11} {'other ms/tok':>12} {'rows/step':>9} {'longest':>7}")
    for budget in args.new_tokens:
        rates, grammar_ms = {}, {}
        for name, mode, options in MODES:
            grammar_stats: dict = {}
            start, wall = time.process_time(), time.perf_counter()
            out = generate(model, tok, prompts, n=args.n, max_new_tokens=budget, temperature=args.temperature,
                           grammar=mode, seed=0, batch_size=len(prompts) * args.n, progress=False,
                           grammar_options={**options, "stats": grammar_stats} if mode != "off" else None)
            secs, wall = time.process_time() - start, time.perf_counter() - wall
            tokens = sum(len(g.token_ids) for g in out)
            rate = rates[name] = tokens / secs
            grammar_ms[name] = 1000 * grammar_stats.get("cpu_s", 0.0) / max(tokens, 1)
            other_ms = 1000 * secs / max(tokens, 1) - grammar_ms[name]
            # One batch: a step per token of the longest row (its EOS included).
            steps = max(len(g.token_ids) + (g.finish_reason == "eos") for g in out)
            row_steps = sum(len(g.token_ids) + (g.finish_reason == "eos") for g in out)
            verdicts = [v for g in out for v in (g.grammar_verdicts or [])]
            accepted = sum(v is True for v in verdicts)
            unchecked = sum(v is None for v in verdicts)
            fallbacks = sum(g.grammar_fallbacks for g in out)
            vs_check = f"{rates['check'] / rate:>14.2f}x" if name.startswith("constrain") else f"{'-':>15}"
            extra = (f"{accepted:>9} {unchecked:>9} {fallbacks:>9}" if mode != "off" else f"{'-':>9} {'-':>9} {'-':>9}")
            print(f"{budget:>10} {name:>15} {tokens:>7} {secs:>8.2f} {rate:>8.1f} {rates['off'] / rate:>8.2f}x "
                  f"{vs_check} {extra} {wall:>8.2f} {grammar_ms[name]:>11.3f} {other_ms:>12.3f} "
                  f"{row_steps / max(steps, 1):>9.1f} {steps:>7}")
            if mode != "off":
                records.append(figure(f"tok/s, grammar {name}, {budget} new tokens, {model_label}", rate, "tok/s",
                                      baseline="grammar off", baseline_value=rates["off"],
                                      note=f"fallbacks {fallbacks}, unchecked {unchecked}/{len(verdicts)}"))
        records.append(figure(f"grammar CPU ms per emitted token, constrain, {budget} new tokens, {model_label}",
                              grammar_ms["constrain"], "ms/token", baseline="check",
                              baseline_value=grammar_ms["check"]))
        records.append(figure(f"constrain time per token vs check, {budget} new tokens, {model_label}",
                              rates["check"] / rates["constrain"], "x", baseline="constrain by full mask",
                              baseline_value=rates["check"] / rates["constrain-mask"], note="goal <= 1.3x"))
    return records


def realistic_model(tok):
    """A randomly initialised GPT-2-small-shaped model (12 layers, 768 wide, 12 heads), built offline."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(vocab_size=len(tok), n_positions=1024, n_embd=768, n_layer=12, n_head=12,
                        bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
    model = GPT2LMHeadModel(config).eval()
    return model


def _mbpp_solutions(path):
    solutions = []
    for line in Path(path).read_text().splitlines():
        code = json.loads(line)["code"]
        try:
            ast.parse(code)
        except SyntaxError:
            continue
        # MBPP stores CRLF line endings; models emit "\n". (syncode's shipped newline
        # pattern also rejects a lone "\r" token, which would dominate the count.)
        solutions.append(code.replace("\r\n", "\n"))
    return solutions


def bench_position(tok, solutions, args):
    from densecode.grammar import GrammarProcessor

    print("\n== 2. per-token check cost by output position (teacher-forced real code) ==")
    # Concatenate reference solutions into one long valid program.
    program, ids = "", []
    for code in solutions:
        program += code.rstrip() + "\n\n"
        ids = tok(program)["input_ids"]
        if len(ids) >= args.position_tokens:
            break
    ids = ids[: args.position_tokens]
    buckets = [(0, 32), (32, 64), (64, 128), (128, 256), (256, 512), (512, 1024)]
    buckets = [(a, min(b, len(ids))) for a, b in buckets if a < len(ids)]
    rows = {}
    parsers = (("incremental", "densecode (incremental)", len(ids)),
               ("warm", "incremental, caches warm", len(ids)),
               ("fast", "densecode before (re-lex)", min(len(ids), args.baseline_tokens)),
               ("syncode", "syncode's parser", min(len(ids), args.baseline_tokens)))
    for kind, _, n_tokens in parsers:
        # "warm": a second pass, after the first filled the grammar-wide caches (LALR accepts per
        # state stack, accept sequences, remainder DFA states), as they are after a run's first batches.
        proc = GrammarProcessor(tok, "check", code_prefix="none",
                                fast_parser="incremental" if kind == "warm" else kind)
        proc.begin([""])
        times = []
        for tok_id in ids[:n_tokens]:
            start = time.process_time()
            proc.observe([0], [tok_id])
            times.append(time.process_time() - start)
        rows[kind] = times
    from densecode.eval.bench_records import figure

    records = []
    print(f"(row-token = one check of one sampled token of one row, CPU time; baselines timed on the first "
          f"{args.baseline_tokens} tokens)")
    print(f"{'tokens':>10} " + " ".join(f"{label + ' ms/tok':>27}" for _, label, _ in parsers))

    def mean_ms(kind, a, b):
        times = rows[kind][a:b]
        return 1000 * sum(times) / len(times) if len(times) == b - a else None

    for a, b in buckets:
        cells = []
        for kind, _, _ in parsers:
            value = mean_ms(kind, a, b)
            cells.append(f"{value:>27.3f}" if value is not None else f"{'-':>27}")
        print(f"{f'{a}-{b}':>10} " + " ".join(cells))
    for a, b in buckets:
        d = mean_ms("warm", a, b)
        records.append(figure(f"check ms/row-token at output tokens {a}-{b} (caches warm)", d, "ms/token",
                              baseline="densecode before (re-lex), tokens 0-32", baseline_value=mean_ms("fast", 0, 32),
                              note="goal <= 0.3 ms at every position"))
    for a, b in buckets:
        # The first pass of a fresh process: the grammar-wide caches are filled as it goes.
        records.append(figure(f"check ms/row-token at output tokens {a}-{b} (first pass, fresh process)",
                              mean_ms("incremental", a, b), "ms/token", note="goal <= 0.3 ms at every position"))
    a, b = buckets[0][0], min(args.baseline_tokens, len(ids))
    records.append(figure(f"check ms/row-token, tokens {a}-{b}", mean_ms("incremental", a, b), "ms/token",
                          baseline="syncode's incremental parser", baseline_value=mean_ms("syncode", a, b)))
    return records


def bench_maskstore(tok):
    import densecode.grammar as G

    print("\n== 3. mask store for this tokenizer (fresh cache dir) ==")
    cache = Path(tempfile.mkdtemp(prefix="densecode-maskstore-"))
    old = os.environ.get("DENSECODE_CACHE")
    os.environ["DENSECODE_CACHE"] = str(cache)
    try:
        G.clear_processor_cache()
        start = time.perf_counter()
        G.syncode_processor(tok, G.load_grammar())
        build = time.perf_counter() - start
        G.clear_processor_cache()
        start = time.perf_counter()
        G.syncode_processor(tok, G.load_grammar())
        load_time = time.perf_counter() - start
        size = sum(f.stat().st_size for f in cache.rglob("*") if f.is_file())
        print(f"vocab {len(tok)}: build {build:.1f} s, load {load_time:.1f} s, on disk {size / 2**20:.1f} MiB")
        from densecode.eval.bench_records import figure

        return [figure(f"mask store build, vocab {len(tok)}", build, "s", note=f"{size / 2**20:.1f} MiB"),
                figure(f"mask store load, vocab {len(tok)}", load_time, "s")]
    finally:
        G.clear_processor_cache()
        if old is None:
            os.environ.pop("DENSECODE_CACHE", None)
        else:
            os.environ["DENSECODE_CACHE"] = old
        shutil.rmtree(cache, ignore_errors=True)


def _first_rejection(proc, ids, use_mask: bool, vocab: int):
    proc.begin([""])
    row = proc.rows[0]
    for i, tok_id in enumerate(ids):
        if use_mask:
            mask = proc._accept_mask(row, vocab)
            if mask is None or not bool(mask[tok_id]):
                return i
        if proc.observe([0], [tok_id])[0] is not True:
            return i
    return None


def bench_mbpp(tok, solutions, args):
    from tqdm.auto import tqdm

    from densecode.grammar import GrammarProcessor

    solutions = solutions[: args.mbpp_limit] if args.mbpp_limit else solutions
    print(f"\n== 4. MBPP false rejections ({len(solutions)} reference solutions Python accepts) ==")
    configs = {
        "before (syncode as shipped)": {"corrected_grammar": False, "indent": False, "syncode_fixes": False},
        "after (densecode)": {"corrected_grammar": True, "indent": True, "syncode_fixes": True},
    }
    configs = {k: v for k, v in configs.items() if k.split()[0] in args.mbpp_configs}
    vocab = len(tok)
    results = {}
    for name, options in configs.items():
        proc = GrammarProcessor(tok, "check", code_prefix="none", **options)
        rejected, masked, examples, mask_examples = 0, 0, [], []
        for k, code in enumerate(tqdm(solutions, desc=name, unit="sol", file=sys.stderr)):
            ids = tok(code)["input_ids"]
            where = _first_rejection(proc, ids, False, vocab)
            if where is not None:
                rejected += 1
                if len(examples) < 5:
                    examples.append(repr(tok.decode(ids[max(0, where - 6): where]) + " >>" + tok.decode(ids[where:where + 1])))
            if k < (args.mask_limit or len(solutions)):
                where = _first_rejection(proc, ids, True, vocab)
                if where is not None:
                    masked += 1
                    if len(mask_examples) < 5:
                        mask_examples.append(repr(tok.decode(ids[max(0, where - 6): where]) + " >>"
                                                  + tok.decode(ids[where:where + 1])))
        results[name] = (rejected, masked, examples + [f"mask: {e}" for e in mask_examples])
    mask_n = min(args.mask_limit or len(solutions), len(solutions))
    print(f"{'':>28} {'check rejects':>14} {f'mask blocks (first {mask_n})':>26}")
    for name, (rejected, masked, _) in results.items():
        print(f"{name:>28} {rejected:>8}/{len(solutions):<5} {masked:>15}/{mask_n:<5}")
    for name, (_, _, examples) in results.items():
        print(f"examples {name}: " + "; ".join(examples))
    from densecode.eval.bench_records import figure

    after, after_mask, _ = results.get("after (densecode)", (None, None, None))
    before, before_mask, _ = results.get("before (syncode as shipped)", (None, None, None))
    return [figure("MBPP references rejected by the check", after, "solutions", baseline="syncode as shipped",
                   baseline_value=before, note=f"of {len(solutions)}"),
            figure("MBPP references a constrain mask blocks", after_mask, "solutions", baseline="syncode as shipped",
                   baseline_value=before_mask, note=f"of {mask_n}")]


def main(argv=None) -> int:
    args = parse_args(argv)
    args.prompt_list = PROMPTS if args.prompts == "fixed" else task_prompts()
    import logging

    import torch

    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    model_dir = args.model
    tmp = None
    if model_dir is None:
        from densecode.testing import make_tiny_model

        tmp = tempfile.mkdtemp(prefix="densecode-tiny-")
        model_dir = make_tiny_model(tmp)
        print(f"model: tiny random GPT-2 test model ({model_dir})")
    else:
        print(f"model: {model_dir}")
    model, tok = load(model_dir)
    print(f"vocab {len(tok)}, torch threads {torch.get_num_threads()}")
    records = []
    if "maskstore" not in args.skip:
        records += bench_maskstore(tok)
    if "generation" not in args.skip:
        records += bench_generation(model, tok, args)
        if args.realistic:
            print("\nGPT-2-small-shaped random model: 12 layers x 768, 12 heads, vocab of this tokenizer "
                  f"({len(tok)}), {sum(p.numel() for p in realistic_model(tok).parameters()) / 1e6:.0f}M parameters")
            records += bench_generation(realistic_model(tok), tok, args, label="GPT-2-small-shaped")
    solutions = _mbpp_solutions(args.mbpp) if Path(args.mbpp).is_file() else []
    if not solutions and ("position" not in args.skip or "mbpp" not in args.skip):
        print(f"\n(MBPP not found at {args.mbpp}: skipping sections 2 and 4)")
    if solutions and "position" not in args.skip:
        records += bench_position(tok, solutions, args)
    if solutions and "mbpp" not in args.skip:
        records += bench_mbpp(tok, solutions, args)
    from densecode.eval.bench_records import emit

    emit(records, args.json)
    if tmp:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
