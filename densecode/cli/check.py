"""`densecode check --config FILE`: run every task's reference through the domain's judge and check a simulator
plug-in's binding against its env, before training. One line per problem; exit code 2 when there is any."""

from __future__ import annotations

import sys

from densecode.errors import DensecodeError


def configure(parser) -> None:
    from densecode.config import add_config_arguments

    parser.add_argument("--tasks", type=int, default=20,
                        help="tasks drawn per split (default 20; a JSONL task file's split is checked whole when smaller)")
    parser.add_argument("--split", action="append", choices=("train", "validation", "test"), default=None,
                        help="split to check (repeatable; default: train, validation and test)")
    parser.add_argument("--seed", type=int, default=0, help="seed the tasks are drawn with (default 0)")
    parser.add_argument("--write-tasks", default=None, metavar="FILE",
                        help="also write the drawn tasks (with their prompts) as JSONL: `densecode generate --prompts "
                             "FILE` carries each task into its output, so `densecode explain --config` scores it there")
    add_config_arguments(parser)


def run(args) -> int:
    from densecode.config import load_config
    from densecode.simulators.check import SPLITS, check_domain

    if not args.config:
        raise DensecodeError("name the config to check: densecode check --config my_sim.yaml")
    if args.tasks < 1:
        raise DensecodeError(f"--tasks must be >= 1 (got {args.tasks})")
    cfg = load_config(args.config, args.overrides)
    report = check_domain(cfg, n=args.tasks, seed=args.seed, splits=tuple(args.split or SPLITS))
    if args.write_tasks:
        import json
        from pathlib import Path

        out = Path(args.write_tasks)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("".join(json.dumps(t, ensure_ascii=False, default=str) + "\n" for t in report.tasks))
        print(f"  wrote {len(report.tasks)} tasks to {out}")
    outcomes = ", ".join(f"{k} {v}" for k, v in sorted(report.outcomes.items())) or "none run"
    print(f"densecode check: domain {report.domain!r} ({args.config}): {report.n_tasks} tasks; reference runs: {outcomes}")
    for note in report.notes:
        print(f"  {note}")
    for problem in report.problems:
        print(f"problem: {problem}", file=sys.stderr)
    if report.problems:
        print(f"{len(report.problems)} problem(s) in {args.config}", file=sys.stderr)
        return DensecodeError.exit_code
    print("no problems found")
    return 0
