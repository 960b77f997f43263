"""`densecode compare`: side-by-side table and chart of two eval or train runs."""

from __future__ import annotations

from densecode.eval.compare import compare_runs


def configure(parser) -> None:
    parser.add_argument("run_a", metavar="RUN_A", help="eval dir (results.json) or train dir (metrics.jsonl)")
    parser.add_argument("run_b", metavar="RUN_B", help="second run of the same kind")
    parser.add_argument("--out", default=".", help="directory for compare.md and compare.png (default: .)")
    parser.add_argument("--label-a", default=None, help="column name for RUN_A (default: its directory name)")
    parser.add_argument("--label-b", default=None, help="column name for RUN_B")


def run(args) -> int:
    text, paths = compare_runs(args.run_a, args.run_b, args.out, args.label_a, args.label_b)
    print(text)
    print(f"wrote {paths['markdown']} and {paths['chart']}")
    return 0
