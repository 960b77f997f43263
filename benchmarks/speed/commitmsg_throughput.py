"""commitmsg judging throughput: messages scored per second (ROUGE-L + chrF + the LCS token reward) vs one fresh
python per message.

    python -m benchmarks.speed.commitmsg_throughput [--tasks 1000] [--naive-limit 30] [--json PATH]

A commit message is text: nothing of it runs, so it is judged in this process (no sandbox). Responses are other
paraphrases of each task's message (so every score is between 0 and 1). The baseline scores the first
`--naive-limit` messages one after another, each in a fresh `python -c` (the naive harness pattern of
sandbox_throughput.py); both sides must give the same scores.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time

from densecode.domains.commitmsg.edits import MESSAGES
from densecode.domains.commitmsg.generator import generate_tasks
from densecode.domains.commitmsg.reward import CommitmsgComponent
from densecode.eval.bench_records import emit, figure
from densecode.rewards import Sample

NAIVE = ("import json, sys\nfrom densecode.domains.commitmsg.reward import judge_message\n"
         "r, ref = json.loads(sys.argv[1])\nj = judge_message(r, ref)\nprint(json.dumps(0.5 * j['rouge_l'] + 0.5 * j['chrf']))\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tasks", type=int, default=1000)
    ap.add_argument("--naive-limit", type=int, default=30)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    from tqdm import tqdm

    tasks = generate_tasks("test", args.tasks, seed=0)
    rng = random.Random(0)
    responses = [" " + rng.choice(MESSAGES[t["op"]][1]).format(fn="f", old="a", new="b", arg="xs", param="p",
                                                                 value=1, name="N") for t in tasks]
    samples = []
    for t, r in zip(tasks, responses):
        words = r.split(" ")
        pieces = [(" " if i else "") + w for i, w in enumerate(words)]
        spans, pos = [], 0
        for p in pieces:
            spans.append((pos, pos + len(p)))
            pos += len(p)
        samples.append(Sample(prompt=t["prompt"], response=r, token_ids=list(range(len(pieces))), token_spans=spans,
                              code_regions=[], task=t))
    comp = CommitmsgComponent()
    comp(samples[:2])
    start = time.perf_counter()
    outs = comp(samples)
    rate = len(samples) / (time.perf_counter() - start)
    print(f"in process: {len(samples)} messages, {rate:.0f} messages/s")
    n = min(args.naive_limit, len(samples))
    same = 0
    start = time.perf_counter()
    for s, o in tqdm(list(zip(samples, outs))[:n], desc="naive", unit="msg"):
        proc = subprocess.run([sys.executable, "-c", NAIVE, json.dumps([s.response, s.task["reference"]])],
                              capture_output=True, text=True, check=True)
        same += abs(float(proc.stdout) - float(o.info["score"])) < 1e-9
    naive_rate = n / (time.perf_counter() - start)
    print(f"naive: {n} messages, {naive_rate:.1f} messages/s; same scores: {same}/{n}; ratio {rate / naive_rate:.0f}x")
    emit([figure(f"messages/s, commitmsg ROUGE-L + chrF + token reward, {len(samples)} messages", rate, "messages/s",
                 baseline=f"one fresh python per message (first {n})", baseline_value=naive_rate,
                 note=f"same scores {same}/{n}; text only, judged in process (no code runs)")], args.json)
    return 0 if same == n else 1


if __name__ == "__main__":
    sys.exit(main())
