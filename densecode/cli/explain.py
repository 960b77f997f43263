"""`densecode explain`: render per-token rewards of rollouts (or scored `densecode generate` output) as HTML.

The command line only: the work is densecode.eval.explain.explain (also densecode.api.explain)."""

from __future__ import annotations

from densecode.eval.explain import explain


def configure(parser) -> None:
    from densecode.config import add_config_arguments

    parser.add_argument("--in", dest="input", required=True,
                        help="rollouts JSONL (from training) or a `densecode generate` output (then pass --model)")
    parser.add_argument("--out", required=True, help="HTML file to write")
    parser.add_argument("--model", default=None, help="model whose tokenizer scores a generate output")
    parser.add_argument("--limit", type=int, default=0, help="render only the first N samples (0: all)")
    parser.add_argument("--step", default="last",
                        help="training step to show: a number, 'last' (default: the newest step in the file) or 'all'")
    parser.add_argument("--title", default="densecode reward explorer")
    add_config_arguments(parser)


def run(args) -> int:
    out, n = explain(args.input, args.out, model=args.model, config=args.config, overrides=args.overrides,
                     limit=args.limit, step=args.step, title=args.title)
    print(f"wrote {out} ({n} samples)")
    return 0
