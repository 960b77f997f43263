"""Reward-explorer pages for the testgen and commitmsg domains, screenshotted in headless Chromium.

    python -m benchmarks.figures.explain_testgen_commitmsg --out-dir docs/figures [--model densecode-tiny]

For each domain: three test-split tasks with hand-made responses that show each token reward (testgen: the
canonical asserts; one holding assert + one that fails on the reference + one outside the test language; an assert
repeated (it adds nothing). commitmsg: the reference message; a paraphrase; an unrelated message), scored by the
domain's own reward recipe (sandboxed judge), written with `write_rollouts`, rendered by `densecode explain`, and
shot to <domain>_explain.png (chromium from `apt-get install -y chromium`, as benchmarks/figures/explain_screenshot.py).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from benchmarks.common import load_tokenizer, screenshot


def testgen_responses(tasks: list[dict]) -> list[str]:
    a, b, c = tasks
    first = b["canonical"].splitlines()[0]
    one = c["canonical"].splitlines()[0]
    return [a["canonical"],
            f"{first}\nassert {b['entry_point']}(0) == 'wrong'\nassert {b['entry_point']}.__globals__\n",
            f"{one}\n{one}\n"]


def commitmsg_responses(tasks: list[dict]) -> list[str]:
    from densecode.domains.commitmsg.edits import MESSAGES

    a, b, _ = tasks
    paraphrases = [p for p in MESSAGES[b["op"]][1] if p]
    other = next((p for p in paraphrases if p.split()[0] not in b["reference"]), paraphrases[-1])
    fn = b["diff"].split("\n")[3].split("def ", 1)[-1].split("(")[0].strip(" +-") or "f"
    try:
        para = other.format(fn=fn, old="x", new="y", arg="xs", param="p", value=1, name="N")
    except (KeyError, IndexError):
        para = b["reference"]
    return [a["canonical"], " " + para, " Update README formatting"]


def render(domain_name: str, out_dir: Path, tok) -> Path:
    from densecode.api import explain
    from densecode.config import load_config
    from densecode.domains import build_domain, build_reward_fn
    from densecode.rewards import make_sample
    from densecode.rewards.explain import write_rollouts

    cfg = load_config(domain_name, ["reward.weights.kl=0"])
    domain = build_domain(cfg)
    tasks = domain.tasks("test", 3, seed=7)
    responses = (testgen_responses if domain_name == "testgen" else commitmsg_responses)(tasks)
    samples = [make_sample(t["prompt"], tok(r, add_special_tokens=False)["input_ids"], tok, t,
                           code_regions=cfg.reward.code_regions) for t, r in zip(tasks, responses)]
    batch = build_reward_fn(cfg, domain)(samples)
    rollouts = write_rollouts(out_dir / f"{domain_name}_rollouts.jsonl", samples, batch, step=0, append=False)
    html = out_dir / f"{domain_name}_explain.html"
    explain(rollouts, html, title=f"densecode reward explorer — {domain_name}")
    for i, s in enumerate(samples):
        total = float(batch.total[i].sum())
        print(f"{domain_name} sample {i}: total reward {total:+.3f}; response {s.response[:70]!r}")
    return html


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out-dir", default="runs/explain-codetasks")
    ap.add_argument("--model", default=None, help="tokenizer source (default: a tiny test tokenizer)")
    ap.add_argument("--domains", default="testgen,commitmsg")
    ap.add_argument("--width", type=int, default=1280)
    ap.add_argument("--height", type=int, default=1100)
    ap.add_argument("--no-png", action="store_true", help="write the HTML pages only")
    args = ap.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tok = load_tokenizer(args.model)
    for name in args.domains.split(","):
        html = render(name, out, tok)
        if not args.no_png:
            png = out / f"{name}_explain.png"
            screenshot(html, png, args.width, args.height)
            print(f"wrote {html} and {png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
