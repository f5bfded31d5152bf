"""`depthwidth explore [STUDY ...]`: the planner and the studies' evidence in an interactive page on this machine.

    depthwidth explore
    depthwidth explore demo-study --open
    depthwidth explore demo-study studies/ladder --port 0 --max-decode-ms 20
    depthwidth explore --profile other-machine.json

The page (`depthwidth.explore`) asks a JSON API served here; every number it shows is what `plan --json`,
`calc --json` and `recommend --json` print for the command lines it also shows, because `CliCommands`
reads the page's inputs with those commands' own parsers and calls the functions their `run` calls.
"""

from __future__ import annotations

import argparse
import errno
import sqlite3
import sys
import threading
from typing import Any

from depthwidth.cli.common import nonneg_int, one_line_errors, positive_float
from depthwidth.errors import UserError

LIMIT_FLAGS = ("max_decode_ms", "max_prefill_ms", "max_memory_gb")
HELP = "the planner and the studies' evidence in an interactive local web page"


def port_number(text: str) -> int:
    value = nonneg_int(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"{text} is not a TCP port (0 to 65535; 0 picks a free one)")
    return value


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "explore", help=HELP,
        description=HELP + ": the iso-parameter or iso-compute family of any inputs of `plan` as a chart and a "
        "table, each shape's `calc` detail, two shapes side by side, and each STUDY's measured points, "
        "recommendation and prescription on the same axes. The address holds the inputs: share it to share the view.",
    )
    one_line_errors(p)
    p.add_argument("studies", nargs="*", metavar="STUDY", help="study folders whose measured shapes the page shows")
    p.add_argument("--port", type=port_number, default=8765, help="TCP port (default 8765; 0: any free port)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1: this machine only; whoever reaches the address "
                        "can use the page)")
    p.add_argument("--profile", action="append", default=[], metavar="PATH",
                   help="a hardware profile .json (from `depthwidth hw measure --out`) that the page's hardware "
                        "may name, besides the table's rows, 'measured' and the profiles in the cache folder; "
                        "repeat for more. The page reads no other file")
    p.add_argument("--open", action="store_true", help="open the page in the default web browser")
    lim = p.add_argument_group("limits (the page's starting values; each can be changed on the page)")
    lim.add_argument("--max-decode-ms", type=positive_float, metavar="MS",
                     help="limit on batch-1 decode latency per token, in ms")
    lim.add_argument("--max-prefill-ms", type=positive_float, metavar="MS",
                     help="limit on batch-1 prefill latency of seq_len tokens, in ms")
    lim.add_argument("--max-memory-gb", type=positive_float, metavar="GB",
                     help="limit on training memory per device, in GB (1e9 bytes)")
    p.set_defaults(run=run)


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:  # argparse keeps its sub-parsers in a private attribute
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise RuntimeError("the depthwidth parser has no sub-commands")


class CliCommands:
    """`depthwidth.explore.api.Commands` on the command line's own parsers (a private copy of them, whose
    usage errors raise `BadRequest` with the line the command line prints) and the functions their `run` calls."""

    PARSERS = {"plan": "plan", "calc": "calc", "limits": "explore", "recommend": "recommend", "prescribe": "recommend"}

    def __init__(self) -> None:
        from depthwidth.cli import build_parser

        subs = _subparsers(build_parser())
        self._parsers = {name: subs[sub] for name, sub in self.PARSERS.items()}
        for parser in set(self._parsers.values()):
            parser.exit = self._exit  # one_line_errors' error() calls parser.exit(2, line)
        self._lock = threading.Lock()

    @staticmethod
    def _exit(status: int = 0, message: str | None = None):
        from depthwidth.explore.fields import BadRequest, field_of

        line = (message or "").strip()
        raise BadRequest(line, field=field_of(line))

    def _parse(self, command: str, argv: list[str]) -> argparse.Namespace:
        with self._lock:  # argparse is not documented as thread-safe
            return self._parsers[command].parse_args(argv)

    def describe(self) -> list[dict[str, Any]]:
        from depthwidth.explore.fields import FIELDS

        out = []
        for f in FIELDS:
            parser = self._parsers[f.command]
            action = parser._option_string_actions["--tied" if f.kind == "tied" else f.flag]
            help_text = (action.help or "").replace("%%", "%")
            default = action.default if f.kind == "value" else None
            if f.name == "hardware":  # the page reads only the profiles it was given (`Explorer.hardware`)
                help_text += ("; on this page a profile is one in the cache folder or named by `depthwidth explore "
                              "--profile`, and 'study' is a study's own measurements (its panel only)")
            if f.command == "recommend":
                from depthwidth.explore.fields import STUDY_DEFAULTS

                help_text += f"; the page's default is {STUDY_DEFAULTS[f.name]}, to stay interactive"
                default = STUDY_DEFAULTS[f.name]
            out.append({"name": f.name, "help": help_text, "metavar": action.metavar,
                        "default": default if isinstance(default, (str, int, float)) else None,
                        "choices": [str(c) for c in action.choices] if action.choices else None})
        return out

    def check(self, command: str, argv: list[str]) -> None:
        self._parse(command, ["STUDY", *argv] if command == "recommend" else argv)

    def run(self, command: str, argv: list[str], *, study: Any = None) -> dict[str, Any]:
        from depthwidth.cli import SQLITE_BUGS, error_line
        from depthwidth.explore.fields import BadRequest, field_of

        args = self._parse(command, argv)
        try:
            return self._call(command, args, study)
        except BadRequest:
            raise
        except (UserError, OSError, sqlite3.Error) as exc:
            if isinstance(exc, SQLITE_BUGS):
                raise
            line = f"depthwidth {self.PARSERS[command]}: error: {error_line(exc)}"
            raise BadRequest(line, field=field_of(line)) from None

    @staticmethod
    def _call(command: str, args: argparse.Namespace, study: Any) -> dict[str, Any]:
        if command == "plan":
            from depthwidth.cli.plan import plan_json, plan_result

            return plan_json(plan_result(args))
        if command == "calc":
            from depthwidth.cli.calc import calc_json

            return calc_json(args)
        if command == "limits":
            return {name: getattr(args, name) for name in LIMIT_FLAGS}
        from depthwidth.cli.recommend import prescription, recommendation

        if command == "recommend":
            return recommendation(args, study).to_dict()
        return prescription(args, study).to_dict()


def run(args: argparse.Namespace) -> int:
    from depthwidth import __version__
    from depthwidth.explore import Explorer, StudySource, make_server

    studies = [StudySource(folder=folder) for folder in args.studies]
    for source in studies:  # a folder that is no study is refused before anything is served
        source.load()
    for profile in args.profile:  # so is a profile that cannot be read
        from depthwidth.machine import MEASURED, hardware_choice, resolve_hardware
        from depthwidth.shapes.hardware import HARDWARE

        if hardware_choice(profile, argument="--profile") in (*HARDWARE, MEASURED):
            raise UserError(f"--profile {profile}: a hardware name, not a profile file; the page takes table rows "
                            "and 'measured' as they are, --profile names a .json from `depthwidth hw measure --out`")
        resolve_hardware(profile, argument="--profile")
    initial = {name: repr(getattr(args, name)) for name in LIMIT_FLAGS if getattr(args, name) is not None}
    explorer = Explorer(CliCommands(), studies=studies, initial=initial, version=__version__, profiles=args.profile)
    try:
        server = make_server(explorer, host=args.host, port=args.port)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise UserError(f"--port {args.port}: {args.host}:{args.port} is already in use; choose another --port "
                            "(0 picks a free one)") from None
        raise UserError(f"--host {args.host} --port {args.port}: cannot listen there ({exc.strerror or exc})") from None
    url = server.url
    print(f"depthwidth explore: serving {url} (Ctrl-C stops)", flush=True)
    if not server.loopback:
        print(f"depthwidth explore: note: {args.host} is not a loopback address; other machines can reach the page",
              file=sys.stderr, flush=True)
    if args.open:
        import webbrowser

        webbrowser.open(url)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print("depthwidth explore: stopped", file=sys.stderr)
    finally:
        server.server_close()
    return 0
