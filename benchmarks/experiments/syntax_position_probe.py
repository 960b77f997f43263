"""Where the syntax reward puts its -1: the "append ` $` to a middle line" probe over MBPP references.

    .venv/bin/python -m benchmarks.experiments.syntax_position_probe [--data ../shared/data/mbpp/mbpp.jsonl] [--limit N]

Each MBPP reference solution gets ` $` appended to the code line nearest its middle
(`densecode.rewards.mutations.position_probe`), so the first character no
continuation can accept is known exactly. Each probe is tokenized with the tiny test
tokenizer (or --model's) as a completion after an opened ```python fence, and scored
by the syntax component with each locator:
- exact: the only -1 is on the token holding the `$`;
- early / late: the -1 is on a token before / after it (or missing);
- negative before: some token before the `$` token is below 0 (valid code punished);
- positive after: some token after it is above 0 (code after the error rewarded).
Cost: CPU seconds per sample of the syntax component, on the probes and on the
unbroken references, for `locate: prefix` (default) against `locate: cpython`.
A second, harder probe (`insertion_probes`: `$` or `?` inserted before 3 random
tokens of each reference, so mid-line, inside brackets, after keywords) is scored at
the character level: `first_invalid_char` against CPython's reported position.
Machine-readable figures (benchmarks/run_all.py convention) go to --json PATH or
$DENSECODE_BENCH_JSON when either is set.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time

from tqdm import tqdm

from benchmarks.common import MBPP as DEFAULT_DATA, load_tokenizer
PROMPT = '"""{text}"""\n```python\n'


def score(component, samples, targets) -> dict:
    """Counts of exact/early/late placements and of misplaced signs, and CPU s per sample."""
    counts = {"exact": 0, "early": 0, "late": 0, "negative_before": 0, "positive_after": 0}
    t0 = time.process_time()
    outs = [component([s])[0] for s in tqdm(samples, desc=f"locate={component.locate}", unit="sample")]
    cpu = time.process_time() - t0
    for out, target in zip(outs, targets):
        v = out.values
        negative = [i for i in range(len(v)) if v[i] < 0]
        if negative == [target]:
            counts["exact"] += 1
        elif negative and negative[0] < target:
            counts["early"] += 1
        else:
            counts["late"] += 1
        counts["negative_before"] += int((v[:target] < 0).any())
        counts["positive_after"] += int((v[target + 1:] > 0).any())
    counts["cpu_s_per_sample"] = cpu / max(len(samples), 1)
    return counts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(DEFAULT_DATA), help="path to mbpp.jsonl")
    parser.add_argument("--limit", type=int, default=0, help="only the first N references (0: all)")
    parser.add_argument("--model", default=None, help="tokenizer source (default: the tiny test tokenizer)")
    parser.add_argument("--json", default=None, help="also write machine-readable figures here (run_all convention)")
    args = parser.parse_args()
    if not os.path.isfile(args.data):
        print(f"SKIP: MBPP data not found at {os.path.abspath(args.data)} (expected ../shared/data/mbpp/mbpp.jsonl "
              "beside the repo; pass --data)")
        return 0
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from densecode.eval.bench_records import emit, figure
    from densecode.rewards import make_sample
    from densecode.rewards.mutations import insertion_probes, load_mbpp, position_probe
    from densecode.rewards.syntax import SyntaxComponent, first_invalid_char, parse_error

    rows = load_mbpp(args.data)
    if args.limit:
        rows = rows[: args.limit]
    tok = load_tokenizer(args.model)
    probes, references, targets = [], [], []
    for row in rows:
        case = position_probe(row["code"])
        if case is None:
            continue
        program, pos = case
        prompt = PROMPT.format(text=row["text"])
        sample = make_sample(prompt, tok(program, add_special_tokens=False)["input_ids"], tok)
        target = sample.token_at(pos)
        if target is None or not sample.code_regions:
            continue
        probes.append(sample)
        targets.append(target)
        reference = row["code"].replace("\r\n", "\n")
        references.append(make_sample(prompt, tok(reference, add_special_tokens=False)["input_ids"], tok))
    n = len(probes)
    print(f"{n} probes from {len(rows)} MBPP references ({args.data})")

    results = {}
    for locate in ("prefix", "cpython"):
        comp = SyntaxComponent(locate=locate)
        results[locate] = score(comp, probes, targets)
        t0 = time.process_time()
        clean = comp(references)
        results[locate]["cpu_s_per_reference"] = (time.process_time() - t0) / max(n, 1)
        results[locate]["negative_on_references"] = sum(int((o.values < 0).any()) for o in clean)

    print(f"\n{'locate':<8} {'exact':>7} {'early':>6} {'late':>5} {'neg.before':>10} {'pos.after':>9} "
          f"{'ms/probe':>9} {'ms/reference':>12} {'neg. on refs':>12}")
    for locate, r in results.items():
        print(f"{locate:<8} {r['exact']:>7} {r['early']:>6} {r['late']:>5} {r['negative_before']:>10} "
              f"{r['positive_after']:>9} {1000 * r['cpu_s_per_sample']:>9.2f} {1000 * r['cpu_s_per_reference']:>12.2f} "
              f"{r['negative_on_references']:>12}")
    rng = random.Random(0)
    inserted = [case for row in rows for case in insertion_probes(row["code"], rng, n=3)]
    char_counts = {"prefix": [0, 0, 0], "cpython": [0, 0, 0]}  # exact, early, late
    for program, pos in tqdm(inserted, desc="insertion probes", unit="program"):
        for locate, k in (("prefix", first_invalid_char(program)), ("cpython", parse_error(program)[0])):
            char_counts[locate][0 if k == pos else 1 if k < pos else 2] += 1
    m = len(inserted)
    print(f"\n{m} insertion probes (`$`/`?` before a random token), character level:")
    for locate, (ex, early, late) in char_counts.items():
        print(f"{locate:<8} exact {ex}/{m} ({100 * ex / m:.1f}%), early {early}, late {late}")

    pre, cpy = results["prefix"], results["cpython"]
    cost_ratio = pre["cpu_s_per_sample"] / cpy["cpu_s_per_sample"] if cpy["cpu_s_per_sample"] else None
    print(f"\nexact, locate=prefix: {100 * pre['exact'] / n:.1f}% ({pre['exact']}/{n}); "
          f"cost per broken sample {cost_ratio:.1f}x locate=cpython's")

    def note(r):
        return (f"{r['exact']}/{n} exact, {r['early']} early, {r['late']} late; negative before the error in "
                f"{r['negative_before']}, positive after it in {r['positive_after']}")

    emit([
        figure("syntax -1 exactly on the offending token (` $` appended to a middle line), locate=prefix",
               100 * pre["exact"] / n, "% exact", baseline="locate=cpython (CPython's reported position)",
               baseline_value=100 * cpy["exact"] / n, note=note(pre) + f"; cpython: {note(cpy)}"),
        figure("syntax error position exact, `$`/`?` before random tokens (character level), locate=prefix",
               100 * char_counts["prefix"][0] / m, "% exact", baseline="CPython's reported position",
               baseline_value=100 * char_counts["cpython"][0] / m,
               note=f"{m} programs; prefix early/late {char_counts['prefix'][1]}/{char_counts['prefix'][2]}, "
                    f"cpython early/late {char_counts['cpython'][1]}/{char_counts['cpython'][2]}"),
        figure("syntax component CPU time per broken sample, locate=prefix", 1000 * pre["cpu_s_per_sample"],
               "ms/sample", baseline="locate=cpython", baseline_value=1000 * cpy["cpu_s_per_sample"],
               note=f"ratio = cost multiple; on valid references {1000 * pre['cpu_s_per_reference']:.2f} ms/sample "
                    f"(no search: nothing to locate)"),
    ], args.json)
    return 0 if pre["exact"] >= 0.99 * n and char_counts["prefix"][0] >= 0.99 * m else 1


if __name__ == "__main__":
    sys.exit(main())
