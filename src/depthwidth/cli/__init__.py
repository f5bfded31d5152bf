"""`depthwidth` command line: each subcommand is a thin module that parses, calls one library
function and prints (a rich table by default, one JSON object with --json).

Errors a user can cause (bad flags, bad files, impossible budgets) are `depthwidth.errors.UserError`
(or an operating-system error naming a file): they print one line to stderr and exit with status 2,
never a traceback. Any other exception is a defect of depthwidth: it keeps its traceback, followed by
one line asking to report it.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import traceback

from depthwidth import __version__
from depthwidth.errors import UserError

# name -> module under depthwidth.cli; each module has add_parser(subparsers) and run(args) -> int.
COMMANDS = ("calc", "plan", "compare", "hw", "train", "bench", "study", "demo", "report", "recommend", "probe")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="depthwidth",
        description="Depth versus width for Transformer LMs: analytic, planned and measured.",
    )
    parser.add_argument("--version", action="version", version=f"depthwidth {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"depthwidth.cli.{name}").add_parser(sub)
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
    except (UserError, FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError) as exc:
        print(f"depthwidth {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"depthwidth {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (`depthwidth calc --json | head`): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except Exception:
        traceback.print_exc()
        print(f"depthwidth {args.command}: internal error (a defect of depthwidth {__version__}, not of your "
              f"input); please report it with the traceback above", file=sys.stderr)
        return 1


def print_json(obj) -> None:
    json.dump(obj, sys.stdout, indent=2, sort_keys=False, default=_json_default)
    sys.stdout.write("\n")


def _json_default(value):
    if hasattr(value, "to_dict"):
        return value.to_dict()
    raise TypeError(f"cannot serialise {type(value).__name__}")


if __name__ == "__main__":
    sys.exit(main())
