"""Reward-explorer pages (and PNG screenshots) for the codegen and codeio domains on hand-made responses.

    python -m benchmarks.figures.code_tasks_explain --domain codegen --out-dir runs/explain-codegen
    python -m benchmarks.figures.code_tasks_explain --domain codeio --png benchmarks/figures/codeio_explain.png

Picks generated test tasks, writes for them the canonical answer and hand-made faulty ones (codegen: a line that
raises, a syntax error, an off-by-one; codeio: a wrong item, an unfinished literal, a tuple for a list), tokenizes
them with the tiny test tokenizer, scores them with the domain's own reward recipe (its config, KL off: no policy
here), writes rollouts.jsonl and runs `densecode explain`; with chromium installed, screenshots the page
(benchmarks/common.py's helpers). Look at the PNG: the offending tokens must be the red ones.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from benchmarks.common import load_tokenizer, screenshot


def codegen_items(domain) -> list[tuple[dict, str, str]]:
    pool = domain.tasks("test", 200, seed=0)
    t = next(x for x in pool if x["family"] == "run_length")
    t2 = next(x for x in pool if x["family"] == "filter_threshold")
    body, body2 = domain.canonical_response(t), domain.canonical_response(t2)
    faulty = [(t, body.replace("parts.append(", "parts.add(", 1), "raises AttributeError on its line"),
              (t, body.replace("j += 1", "j += (1", 1), "syntax error"),
              (t2, body2.replace("if x", "if x + 1", 1), "wrong logic (no exception)")]
    assert all(r != domain.canonical_response(x) for x, r, _ in faulty)
    return [(t, body, "canonical"), (t2, body2, "canonical"), *faulty]


def codeio_items(domain) -> list[tuple[dict, str, str]]:
    tasks = [t for t in domain.tasks("test", 30, seed=0) if t["expected"].startswith("[[")][:1]
    tasks += [t for t in domain.tasks("test", 30, seed=0) if t["expected"].startswith("'")][:1]
    lst, txt = tasks
    canon = lst["canonical"]
    digit = next(i for i, c in enumerate(canon) if c.isdigit() and i > 4)
    return [
        (lst, canon, "correct"),
        (lst, canon[:digit] + str((int(canon[digit]) + 1) % 10) + canon[digit + 1:], "a wrong item"),
        (lst, canon[: len(canon) // 2], "unfinished literal"),
        (lst, " [(" + canon[3:], "a tuple where a list is"),
        (txt, txt["canonical"], "correct"),
        (txt, txt["canonical"][:-3] + "zz'", "wrong end of a string"),
    ]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--domain", choices=("codegen", "codeio"), required=True)
    ap.add_argument("--out-dir", default=None)
    ap.add_argument("--png", default=None, help="also screenshot the page to this PNG (needs chromium)")
    ap.add_argument("--width", type=int, default=1280)
    ap.add_argument("--height", type=int, default=1600)
    args = ap.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")

    from densecode.api import explain
    from densecode.config import load_config
    from densecode.domains import build_domain, build_reward_fn
    from densecode.rewards import make_sample
    from densecode.rewards.explain import write_rollouts

    out = Path(args.out_dir or f"runs/explain-{args.domain}")
    out.mkdir(parents=True, exist_ok=True)
    tok = load_tokenizer(None)
    cfg = load_config(args.domain, ["reward.weights.kl=0"])
    domain = build_domain(cfg)
    items = codegen_items(domain) if args.domain == "codegen" else codeio_items(domain)
    samples = [make_sample(t["prompt"], tok(r, add_special_tokens=False)["input_ids"], tok, t,
                           code_regions=cfg.reward.code_regions) for t, r, _ in items]
    batch = build_reward_fn(cfg, domain)(samples)
    rollouts = write_rollouts(out / "rollouts.jsonl", samples, batch, step=0, append=False)
    html = out / "report.html"
    explain(rollouts, html, title=f"densecode reward explorer — {args.domain}: " +
            "; ".join(f"{i}: {kind}" for i, (_, _, kind) in enumerate(items)))
    for i, (s, (_, _, kind)) in enumerate(zip(samples, items)):
        worst = int(batch.total[i].argmin()) if s.n_tokens else None
        shown = s.response[slice(*s.token_spans[worst])] if worst is not None else ""
        print(f"{i}: {kind:34s} total {float(batch.total[i].sum()):+.3f}; most negative token {worst} {shown!r}")
    if args.png:
        screenshot(html, Path(args.png), args.width, args.height)
        print(f"wrote {args.png}")
    print(f"wrote {html}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
