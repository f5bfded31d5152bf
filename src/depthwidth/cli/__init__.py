"""`depthwidth` command line: each subcommand is a thin module that parses, calls one library
function and prints (a rich table by default, one JSON object with --json).

Errors a user can cause (bad flags, bad files, impossible budgets) print one line to stderr and
exit with status 2; they never show a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys

from depthwidth import __version__

# name -> module under depthwidth.cli; each module has add_parser(subparsers) and run(args) -> int.
COMMANDS = ("calc", "plan", "compare", "hw", "train", "bench", "study", "demo", "report", "recommend", "probe")


class UsageError(Exception):
    """A problem with what the user asked for; printed as one line, exit status 2."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="depthwidth",
        description="Depth versus width for Transformer LMs: analytic, planned and measured.",
    )
    parser.add_argument("--version", action="version", version=f"depthwidth {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"depthwidth.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"depthwidth.cli.{name}":
                continue  # command not built yet
            raise
        module.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # one line, like every other usage error (argparse would also print the usage)
        where = f"depthwidth {args.command}" if getattr(args, "command", None) else "depthwidth"
        print(f"{where}: error: unrecognized arguments: {' '.join(unknown)}", file=sys.stderr)
        return 2
    if not getattr(args, "run", None):
        parser.print_help()
        return 2
    try:
        return int(args.run(args) or 0)
    except (UsageError, ValueError, FileNotFoundError, IsADirectoryError, PermissionError) as exc:
        print(f"depthwidth {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"depthwidth {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (`depthwidth calc --json | head`): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


def print_json(obj) -> None:
    json.dump(obj, sys.stdout, indent=2, sort_keys=False, default=_json_default)
    sys.stdout.write("\n")


def _json_default(value):
    if hasattr(value, "to_dict"):
        return value.to_dict()
    raise TypeError(f"cannot serialise {type(value).__name__}")


if __name__ == "__main__":
    sys.exit(main())
