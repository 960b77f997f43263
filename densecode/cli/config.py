"""`densecode config`: print the resolved configuration."""

from densecode.config import add_config_arguments, dump_yaml
from densecode.domains import load_config  # `tasks:` typed by the domain: every default shown, every key checked


def configure(parser) -> None:
    add_config_arguments(parser)


def run(args) -> int:
    print(dump_yaml(load_config(args.config, args.overrides)), end="")
    return 0
