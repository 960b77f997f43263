"""What training changed in a model's greedy answers: the same held-out tasks answered greedily by two models.

Prints each model's success rate, the outcome transitions (before -> after, for the tasks whose outcome changed),
how many of the changed answers differ only inside string literals (the same program with another location,
object or message), and where in the answer the change starts (the first differing character's position as a
share of the before answer's length, by fifth): credit that reaches the end of a response weakly shows as changes
there. Several --after models are compared with the same --before, one block each. Used to read why RL can raise
success at the training temperature while greedy success falls (docs/results.md): on robotics the greedy losses
are answers that name another room than the instruction.

    python -m benchmarks.experiments.greedy_changes --domain robotics --before densecode-tiny \\
        --after runs/robotics/checkpoints/step-000040/model [MORE_MODELS ...] --tasks 300 [--show 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import collections
import io
import json
import os
import tokenize
from pathlib import Path

from benchmarks.common import checkout_first

os.environ.setdefault("OMP_NUM_THREADS", "1")
checkout_first()


def literal_shape(code: str) -> str:
    """The code with every string literal's content blanked (`"kitchen"` -> `""`), so two answers that differ
    only in strings have the same shape. Code that does not tokenize is returned as it is."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return code
    out = [(tok.type, '""' if tok.type == tokenize.STRING else tok.string) for tok in tokens]
    return tokenize.untokenize(out)


def answers(domain, model_path: str, tasks: list[dict]) -> tuple[list[str], list[dict]]:
    import torch

    from densecode.config import ModelConfig
    from densecode.models import load_model_and_tokenizer

    torch.set_num_threads(1)
    model, tokenizer = load_model_and_tokenizer(ModelConfig(name_or_path=model_path), None, for_training=False)
    model.eval()
    responses = domain.generate(model, tokenizer, [t["prompt"] for t in tasks], temperature=0.0, seed=0)
    return responses, domain.score(tasks, responses)


def first_change_position(before: str, after: str) -> float:
    """Where `after` starts to differ from `before`: the length of their common prefix as a share of `before`'s
    length (0 = the first character already differs; 1 = `before` is a prefix of `after`)."""
    n = 0
    for x, y in zip(before, after):
        if x != y:
            break
        n += 1
    return n / max(1, len(before))


def fifths(positions: list[float]) -> list[int]:
    """How many positions fall into each fifth of [0, 1] (1.0 counts in the last)."""
    counts = [0] * 5
    for q in positions:
        counts[min(4, int(q * 5))] += 1
    return counts


def compare(before: tuple[list[str], list[dict]], after: tuple[list[str], list[dict]]) -> dict:
    """Transitions and string-only changes between two models' answers to the same tasks."""
    (rb, sb), (ra, sa) = before, after
    ok_b = [s.get("outcome") == "success" for s in sb]
    ok_a = [s.get("outcome") == "success" for s in sa]
    changed = [i for i in range(len(rb)) if rb[i] != ra[i]]
    strings_only = [i for i in changed if literal_shape(rb[i]) == literal_shape(ra[i])]
    lost = [i for i in range(len(rb)) if ok_b[i] and not ok_a[i]]
    gained = [i for i in range(len(rb)) if ok_a[i] and not ok_b[i]]
    transitions = collections.Counter(f"{sb[i].get('outcome')} -> {sa[i].get('outcome')}"
                                      for i in range(len(rb)) if sb[i].get("outcome") != sa[i].get("outcome"))
    position = {i: first_change_position(rb[i], ra[i]) for i in changed}
    return {"n": len(rb), "success_before": sum(ok_b) / max(1, len(rb)), "success_after": sum(ok_a) / max(1, len(rb)),
            "changed": len(changed), "changed_strings_only": len(strings_only),
            "lost": len(lost), "lost_strings_only": len(set(lost) & set(strings_only)),
            "gained": len(gained), "gained_strings_only": len(set(gained) & set(strings_only)),
            "transitions": dict(transitions.most_common()), "lost_tasks": lost,
            "first_change_fifths": fifths(list(position.values())),
            "first_change_fifths_lost": fifths([position[i] for i in lost if i in position]),
            "first_change_fifths_gained": fifths([position[i] for i in gained if i in position])}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--domain", default="robotics")
    p.add_argument("--before", required=True, help="model before training (dir or densecode-tiny)")
    p.add_argument("--after", required=True, nargs="+",
                   help="model(s) after training (e.g. RUN/checkpoints/step-N/model), each compared with --before")
    p.add_argument("--tasks", type=int, default=300, help="held-out tasks (the first N of the split at seed 0)")
    p.add_argument("--split", default="test")
    p.add_argument("--show", type=int, default=0, help="print the first N lost tasks' two answers")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)

    from densecode.config import load_config, resolve_config_path
    from densecode.domains import build_domain

    cfg = load_config(resolve_config_path(args.domain), [])
    domain = build_domain(cfg)
    domain.prepare()
    tasks = domain.tasks(args.split, args.tasks, 0)
    before = answers(domain, args.before, tasks)
    runs = []
    for after_path in args.after:
        after = answers(domain, after_path, tasks)
        res = compare(before, after)
        runs.append({**res, "after": after_path})
        print(f"\n{args.domain}, {res['n']} {args.split} tasks, greedy: success {res['success_before']:.3f} -> "
              f"{res['success_after']:.3f} ({after_path})")
        print(f"answers changed: {res['changed']} ({res['changed_strings_only']} only inside string literals)")
        print(f"successes lost: {res['lost']} ({res['lost_strings_only']} only inside string literals); "
              f"gained: {res['gained']} ({res['gained_strings_only']})")
        print("outcome transitions: " + ", ".join(f"{k} {v}" for k, v in res["transitions"].items()))
        print("first change by fifth of the answer (first to last): all changed "
              f"{res['first_change_fifths']}, lost {res['first_change_fifths_lost']}, "
              f"gained {res['first_change_fifths_gained']}")
        for i in res["lost_tasks"][:args.show]:
            print(f"\n=== {tasks[i].get('instruction') or tasks[i]['prompt'][:200]}\n--- before\n{before[0][i]}"
                  f"--- after ({after[1][i].get('outcome')})\n{after[0][i]}")
    if len(runs) > 1:
        total = [sum(r["first_change_fifths"][k] for r in runs) for k in range(5)]
        lost = [sum(r["first_change_fifths_lost"][k] for r in runs) for k in range(5)]
        print(f"\nall {len(runs)} models: first change by fifth: all changed {total}, lost {lost}")
    if args.json:
        Path(args.json).write_text(json.dumps({"domain": args.domain, "before": args.before, "split": args.split,
                                               "runs": runs}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
