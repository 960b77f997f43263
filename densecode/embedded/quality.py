"""Held-out robotics quality of a model (the numbers the README reports for densecode-tiny).

    python -m densecode.embedded.quality --model densecode-tiny --tasks 300

Generates one program per task of the RoboSim generator's fixed `test` split (never
trained on: the splits are disjoint by program text), greedily and at the training
temperature, runs every program in the sandbox against the task's worlds and
reports the cumulative shares: parses, no Python error, no robot error, success.
"""

from __future__ import annotations

import argparse
import json
import time

# (label, temperature, top_p): greedy, and the sampling `densecode train` uses by
# default (configs: generation.temperature 1.0, top_p 0.95).
SETTINGS = (("greedy", 0.0, 1.0), ("T=1.0 top_p=0.95", 1.0, 0.95))


def measure(model, tokenizer, *, n_tasks: int = 300, seed: int = 0, max_new_tokens: int = 128,
            batch_size: int = 32, settings=SETTINGS, progress: bool = True) -> dict:
    """{label: robosim.summarize(...) + seconds} for each generation setting."""
    from densecode.simulators.robosim import evaluate, summarize
    from densecode_robosim.tasks import STOP_STRINGS, generate_tasks

    from densecode.generation import generate

    tasks = generate_tasks("test", n=n_tasks, seed=0)
    prompts = [t.prompt for t in tasks]
    results = {}
    for label, temperature, top_p in settings:
        t0 = time.perf_counter()
        gens = generate(model, tokenizer, prompts, n=1, max_new_tokens=max_new_tokens, temperature=temperature,
                        top_p=top_p, stop=list(STOP_STRINGS), batch_size=batch_size, seed=seed, progress=progress)
        t_gen = time.perf_counter() - t0
        outcomes = evaluate([g.completion for g in gens], tasks, seed=seed)
        summary = summarize(outcomes)
        summary.update(generate_seconds=round(t_gen, 1), judge_seconds=round(time.perf_counter() - t0 - t_gen, 1),
                       temperature=temperature, top_p=top_p)
        results[label] = summary
    return results


def markdown_table(results: dict) -> str:
    rows = ["| decoding | n | parses | no Python error | no robot error | success |",
            "|---|---|---|---|---|---|"]
    for label, s in results.items():
        rows.append(f"| {label} | {s['n']} | {s['parses']:.1%} | {s['no_python_error']:.1%} | "
                    f"{s['no_robot_error']:.1%} | {s['success']:.1%} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    import torch

    from densecode.config import ModelConfig
    from densecode.models import load_model_and_tokenizer

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="densecode-tiny")
    parser.add_argument("--tasks", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--json", default=None, help="also write the results here")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    model, tokenizer = load_model_and_tokenizer(ModelConfig(name_or_path=args.model, dtype="float32"))
    model.eval()
    results = measure(model, tokenizer, n_tasks=args.tasks, seed=args.seed)
    print(markdown_table(results))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
