"""`depthwidth` command line: each subcommand is a thin module that parses, calls one library
function and prints (a rich table by default, one JSON object with --json).

Errors a user can cause (bad flags, bad files, impossible budgets) are `depthwidth.errors.UserError`,
an operating-system error (`OSError`: a file or folder that is missing, unreadable, not a folder, a
full disk, an address that does not answer) or a SQLite error of a study store: they print one line to
stderr and exit with status 2, never a traceback. Any other exception is a defect of depthwidth: it keeps
its traceback, followed by one line asking to report it. Usage errors are one line too, and a value
such as `-5M` or `-1e19` reaches its flag's type (which says what is wrong with it) instead of being
taken for an option.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import sqlite3
import sys
import traceback

from depthwidth import __version__
from depthwidth.cli.common import one_line_errors, printable
from depthwidth.errors import UserError

# name -> module under depthwidth.cli; each module has add_parser(subparsers) and run(args) -> int.
COMMANDS = ("calc", "plan", "compare", "hw", "train", "bench", "study", "demo", "report", "recommend", "probe",
            "export", "check", "inspect", "explore")
#: What argparse should read as a value, not an option: a negative number in any spelling the types
#: accept (-5, -5M, -1e19, -1e-3, -.5, -5%, -inf, -nan). argparse's own pattern knows only -5 and -.5.
NEGATIVE_NUMBER = re.compile(r"^-(\d|\.\d|inf|nan)", re.IGNORECASE)
#: sqlite3 errors that are a misuse of the API by depthwidth itself (a bug), not a damaged store
SQLITE_BUGS = (sqlite3.ProgrammingError, sqlite3.InterfaceError)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="depthwidth",
        description="Depth versus width for Transformer LMs: analytic, planned and measured.",
    )
    parser.add_argument("--version", action="version", version=f"depthwidth {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"depthwidth.cli.{name}").add_parser(sub)
    _harden(parser)
    return parser


def _harden(parser: argparse.ArgumentParser) -> None:
    """`parser` and every sub-command parser below it: usage errors as one line, negative numbers
    read as values (argparse keeps its pattern and its sub-parsers in private attributes)."""
    one_line_errors(parser)
    parser._negative_number_matcher = NEGATIVE_NUMBER
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in set(action.choices.values()):
                _harden(child)


def error_line(exc: BaseException) -> str:
    """The one line printed for a user's error: the message, or for an operating-system error the
    file and the system's reason; a line break or control character inside it is written as its escape."""
    text = str(exc)
    if isinstance(exc, OSError) and exc.strerror and exc.filename is not None:
        where = f"{exc.filename} -> {exc.filename2}" if exc.filename2 is not None else f"{exc.filename}"
        text = f"{where}: {exc.strerror}"
    elif isinstance(exc, sqlite3.Error):
        from depthwidth.study.store_errors import SQLITE_CORRUPT, SQLITE_NOTADB, sqlite_code

        text = f"study store: {type(exc).__name__}: {exc}"
        if sqlite_code(exc) in (SQLITE_CORRUPT, SQLITE_NOTADB):  # only damage is repaired
            text += " (a damaged study.sqlite is rebuilt by `depthwidth study repair DIR`)"
    return printable(text.strip()) or type(exc).__name__


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # one line, like every other usage error (argparse would also print the usage)
        where = f"depthwidth {args.command}" if getattr(args, "command", None) else "depthwidth"
        print(f"{where}: error: unrecognized arguments: {printable(' '.join(unknown))}", file=sys.stderr)
        return 2
    if not getattr(args, "run", None):
        parser.print_help()
        return 2
    try:
        return int(args.run(args) or 0)
    except BrokenPipeError:  # the reader went away (`depthwidth calc --json | head`): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except (UserError, OSError) as exc:
        print(f"depthwidth {args.command}: error: {error_line(exc)}", file=sys.stderr)
        return 2
    except sqlite3.Error as exc:
        if isinstance(exc, SQLITE_BUGS):
            return _internal_error(args.command)
        print(f"depthwidth {args.command}: error: {error_line(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"depthwidth {args.command}: interrupted", file=sys.stderr)
        return 130
    except Exception:
        return _internal_error(args.command)


def _internal_error(command: str) -> int:
    traceback.print_exc()
    print(f"depthwidth {command}: internal error (a defect of depthwidth {__version__}, not of your "
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
