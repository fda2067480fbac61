"""The ``ragen-rllib`` console command.

Subcommands:
  demo   play every built-in environment with its oracle and a random policy (CPU, seconds)
  envs   list the registered environments with their config keys and defaults
"""

from __future__ import annotations

import argparse
import sys


def _cmd_demo(args: argparse.Namespace) -> int:
    from ragen_rllib.demo import run_env_demo

    run_env_demo(episodes=args.episodes, seed=args.seed)
    return 0


def _cmd_envs(args: argparse.Namespace) -> int:
    from ragen_rllib.envs.catalog import describe_envs

    print(describe_envs())
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ragen-rllib", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="play every built-in env with oracle and random policies")
    demo.add_argument("--episodes", type=int, default=20, help="episodes per env and policy")
    demo.add_argument("--seed", type=int, default=0, help="first reset seed")
    demo.set_defaults(func=_cmd_demo)
    envs = sub.add_parser("envs", help="list the built-in environments and their config keys")
    envs.set_defaults(func=_cmd_envs)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
