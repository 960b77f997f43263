"""`densecode` command line: a thin dispatcher.

Each subcommand lives in its own module of this package (densecode/cli/<command>.py) exposing
`configure(parser)` and `run(args) -> int`; modules are imported lazily so `densecode --help` stays fast
and a broken optional dependency only affects its own command.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

from densecode.errors import DensecodeError

# command name -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "train": ("densecode.cli.train", "fine-tune a policy with PPO or GRPO on dense rewards"),
    "generate": ("densecode.cli.generate", "sample completions (optionally SynCode-checked) to JSONL"),
    "eval": ("densecode.cli.eval", "evaluate a model on mbpp, mbppplus, roboeval, robotics or any domain"),
    "check": ("densecode.cli.check", "run a domain's reference programs and check a simulator plug-in's binding"),
    "explain": ("densecode.cli.explain", "render per-token rewards of rollouts as an HTML page"),
    "compare": ("densecode.cli.compare", "side-by-side table and chart of two eval or train runs"),
    "build-model": ("densecode.cli.build_model", "rebuild the embedded densecode-tiny model offline"),
    "config": ("densecode.cli.config", "print the resolved configuration (YAML + overrides)"),
}


def build_parser() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    parser = argparse.ArgumentParser(prog="densecode", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers = {}
    for name, (_, help_text) in COMMANDS.items():
        subparsers[name] = sub.add_parser(name, help=help_text, description=help_text)
    return parser, subparsers


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser, subparsers = build_parser()
    # Parse only the command name first, then let that command's module add its options.
    if not argv or argv[0] in ("-h", "--help"):
        parser.print_help()
        return 0
    if argv[0] == "--version":
        from densecode import __version__

        print(__version__)
        return 0
    name = argv[0]
    if name not in COMMANDS:
        parser.print_usage(sys.stderr)
        print(f"densecode: unknown command {name!r}; choose one of: {', '.join(COMMANDS)}", file=sys.stderr)
        return 2
    module = importlib.import_module(COMMANDS[name][0])
    sub = subparsers[name]
    module.configure(sub)
    args = sub.parse_args(argv[1:])
    try:
        return int(module.run(args) or 0)
    except DensecodeError as exc:
        logging.getLogger("densecode").debug("error", exc_info=True)
        print(f"densecode {name}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"densecode {name}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
