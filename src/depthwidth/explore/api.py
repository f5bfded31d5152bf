"""The explorer's JSON API: the page's options, a family (`plan --json` of the page's inputs, each member's
`calc --json`, the verdicts against the limits, the table and the axes) and a study's evidence (its points,
`recommend --json` under the page's limits, `recommend --target-params --json` at the page's budget).

The commands are the command line's own, handed in as `Commands` (`depthwidth.cli.explore.CliCommands`
reads each through its argparse parser and calls the same function the command's `run` calls), so a
page's numbers and its one-line messages are those of `depthwidth plan`, `calc` and `recommend` for the
command line the answer also shows. Answers are cached by their inputs (the page asks again for a view it
has shown, and a prescription takes seconds); one prescription is computed at a time.

The page's `hardware=` reads no file the explorer was not given: it is a row of the hardware table,
"measured" (this machine's profile), "study" (a study's own measurements: the study panel's target), a
profile .json in the machine's cache folder (`depthwidth.machine.cache_dir`, where `depthwidth hw measure`
keeps them) or a profile named by `depthwidth explore --profile`. Any other value, whatever is or is not at
that path, gets one and the same line (`NOT_GIVEN`), so the API tells nothing about the server's files.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any, Callable, Protocol, Sequence

from depthwidth.errors import echo

from depthwidth.explore.argv import calc_argv, command_line, prescribe_argv, recommend_argv
from depthwidth.explore.fields import (
    BY_NAME, FIELDS, PAGE_DEFAULTS, STUDY_DEFAULTS, BadRequest, argv_of, read_query,
)
from depthwidth.explore.study import StudySource, full_horizon, law_points, study_points
from depthwidth.explore.views import AXES, detail_rows, family_view, pair

CACHE_ENTRIES = 64
#: the page's answer for a hardware= that is no table row, word or profile the explorer may read
NOT_GIVEN = "hardware: not a table row or a profile this explorer was given"
#: the words hardware= may be besides a row: this machine's profile, a study's own measurements
MEASURED, STUDY = "measured", "study"


class Commands(Protocol):
    """The command line's parsers and functions, as the explorer uses them."""

    def describe(self) -> list[dict[str, Any]]:
        """Each of `FIELDS` as its command's parser has it: {name, help, default, choices, metavar}."""

    def check(self, command: str, argv: list[str]) -> None:
        """Parse `argv` with `command`'s parser: BadRequest with the command line's message when it refuses."""

    def run(self, command: str, argv: list[str], *, study: Any = None) -> dict[str, Any]:
        """Parse and compute: what `depthwidth COMMAND ARGV --json` prints ("limits": the page's limits;
        "prescribe": `recommend --target-params`; `study`: a loaded study). BadRequest for a user's mistake."""


class _Superseded(Exception):
    """A page's request for a study that a newer one has replaced before its prescription started."""


class _Cache:
    def __init__(self, size: int = CACHE_ENTRIES) -> None:
        self.size, self.items, self.lock = size, OrderedDict(), threading.Lock()

    def get(self, key, compute: Callable[[], Any]):
        with self.lock:
            if key in self.items:
                self.items.move_to_end(key)
                return self.items[key]
        value = compute()
        with self.lock:
            self.items[key] = value
            while len(self.items) > self.size:
                self.items.popitem(last=False)
        return value


class Explorer:
    """The API behind the page (`depthwidth.explore.server` serves it). `studies`: the folders named on the
    command line, in order (a request names one by its index); `initial`: values the page starts from;
    `profiles`: hardware profile files (besides the cache folder's) that the page's hardware= may name."""

    def __init__(self, commands: Commands, *, studies: Sequence[StudySource] = (), initial: dict[str, str] | None
                 = None, version: str = "", profiles: Sequence[str | os.PathLike] = ()) -> None:
        self.commands = commands
        self.studies = tuple(studies)
        self.profiles = frozenset(Path(os.path.realpath(Path(p).expanduser())) for p in profiles)
        self.initial = {**PAGE_DEFAULTS, **(initial or {})}
        self.version = version
        self._families = _Cache()
        self._studies = _Cache()
        self._prescribing = threading.Lock()  # one prescription at a time
        self._prescribing_order = threading.Lock()
        self._latest: dict[str, tuple] = {}  # study folder -> the key of the page's latest request

    # ---- options ---------------------------------------------------------------------------------

    def options(self) -> dict[str, Any]:
        from depthwidth.shapes.hardware import HARDWARE
        from depthwidth.shapes.presets import PRESETS

        described = {d["name"]: d for d in self.commands.describe()}
        fields = [{"name": f.name, "command": f.command, "group": f.group, "label": f.label, "kind": f.kind,
                   "flag": f.flag, **{k: v for k, v in described[f.name].items() if k != "name"}} for f in FIELDS]
        studies = []
        for i, s in enumerate(self.studies):
            data, _ = s.load()
            studies.append({"index": i, "name": data.name, "folder": s.folder, "shapes": len(full_horizon(data))})
        return {"version": self.version, "fields": fields, "initial": self.initial, "study_defaults": STUDY_DEFAULTS,
                "hardware": [{"name": h.name, "label": h.label} for h in HARDWARE.values()],
                "presets": sorted(PRESETS), "axes": [a.to_dict() for a in AXES], "studies": studies}

    # ---- a family ----------------------------------------------------------------------------------

    def _values(self, query: str) -> tuple[dict[str, str], dict[str, str]]:
        values, extra = read_query(query)
        values = {k: v for k, v in values.items() if v != ""}
        errors: dict[str, str] = {}
        for name, value in list(values.items()):
            f = BY_NAME[name]
            try:
                if name == "hardware":
                    value = values[name] = self.hardware(value)
                argv = f.argv(value)
                if argv:
                    self.commands.check(f.command, argv)
            except BadRequest as exc:
                errors[name] = exc.message
        if errors:
            first = next(iter(errors))
            raise BadRequest(errors[first], field=first, errors=errors)
        return values, extra

    def hardware(self, text: str) -> str:
        """A page's hardware= as the commands get it: a row or a word as written, a profile as its real path
        (the file checked is the file read). BadRequest with `NOT_GIVEN` for anything else, the same line
        for a path that is missing, unreadable, a folder, a pipe, not JSON, too big or no profile."""
        from depthwidth.shapes.hardware import HARDWARE, get_hardware

        word = text.strip().lower()
        if word in (MEASURED, STUDY):
            return text
        if not word.endswith(".json"):  # the order of `depthwidth.machine.resolve.hardware_choice`
            try:
                get_hardware(text)
                return text
            except ValueError:
                pass
        profile = self._profile(text)
        if profile is not None:
            return profile
        raise BadRequest(f"{NOT_GIVEN}: {echo(text, 100)!r} (a row of `depthwidth hw list`: {', '.join(HARDWARE)}; "
                         f"{MEASURED}; {STUDY}; a profile .json in the cache folder or one named by "
                         "`depthwidth explore --profile`)", field="hardware")

    def _profile(self, text: str) -> str | None:
        """The real path of `text` when it is a profile the explorer may read, else None (nothing is opened)."""
        from depthwidth.machine import cache_dir

        try:
            real = Path(os.path.realpath(Path(text).expanduser()))
            if real in self.profiles:
                return str(real)
            cache = Path(os.path.realpath(cache_dir()))
            if real.suffix.lower() == ".json" and real.is_relative_to(cache) and real.is_file():
                return str(real)
        except (OSError, ValueError):
            pass
        return None

    def family(self, query: str) -> dict[str, Any]:
        """The family of a query's inputs, and with `pins=LABEL,LABEL` those two members side by side."""
        values, extra = self._values(query)
        if values.get("hardware", "").lower() == STUDY:
            raise BadRequest(f"hardware={STUDY}: a study's own measurements are the target of its panel "
                             f"(recommend --hardware {STUDY}); a family's latency is predicted on a row of "
                             f"`depthwidth hw list`, {MEASURED} or a profile", field="hardware")
        key = tuple(sorted(values.items()))
        result = self._families.get(key, lambda: self._family(values))
        pins = [p for p in extra.get("pins", "").split(",") if p]
        return {**result, "pair": pair(result["view"], pins)}

    def _family(self, values: dict[str, str]) -> dict[str, Any]:
        plan_args = argv_of(values, "plan")
        plan = self.commands.run("plan", plan_args)
        limits = self.commands.run("limits", argv_of(values, "limits"))
        like = values.get("like")
        argvs = [calc_argv(m, like=like, values=values) for m in plan["members"]]
        details = [self.commands.run("calc", argv) for argv in argvs]
        return {"inputs": values, "limits": limits, "plan": plan, "view": family_view(plan, details, limits),
                "details": [{"calc": d, "rows": detail_rows(d), "command": command_line("calc", a)}
                            for d, a in zip(details, argvs)],
                "commands": {"plan": command_line("plan", plan_args)}}

    # ---- a study -----------------------------------------------------------------------------------

    def study(self, query: str, *, latest_only: bool = False) -> dict[str, Any]:
        """A study's points, recommendation and (for a parameter budget) prescription under a query's inputs.
        `latest_only` (the page's requests): a request still waiting for its turn to prescribe when a newer one
        for the same study has come in is answered {"superseded": true} without computing (the page has
        moved on; a user typing a budget does not queue a prescription per keystroke)."""
        values, extra = self._values(query)
        source = self._source(extra.get("study", ""))
        data, stamp = source.load()
        values = {**STUDY_DEFAULTS, **values}
        key = (source.folder, stamp, tuple(sorted(values.items())))
        if latest_only:
            with self._prescribing_order:
                self._latest[source.folder] = key
        try:
            return self._studies.get(key, lambda: self._study(source, data, values, key if latest_only else None))
        except _Superseded:
            return {"superseded": True}

    def _source(self, text: str) -> StudySource:
        if not text.isdigit() or int(text) >= len(self.studies):
            count = len(self.studies)
            raise BadRequest(f"study={text!r}: expected the index of a study of the command line "
                             f"({'0 to ' + str(count - 1) if count else 'none was given'})")
        return self.studies[int(text)]

    def _study(self, source: StudySource, data, values: dict[str, str], wanted: tuple | None) -> dict[str, Any]:
        from depthwidth.report.targets import SERVING_DTYPES, STUDY
        from depthwidth.shapes.hardware import HARDWARE, get_hardware

        self.commands.run("limits", argv_of(values, "limits"))  # a bad limit is the request's mistake
        try:
            row = get_hardware(values.get("hardware", "h100")).name
        except ValueError:
            row = None  # "measured" or a profile: the study's own measurements, or the prescription's default
        row = row if row in HARDWARE else None
        dtype = values.get("dtype") if values.get("dtype") in SERVING_DTYPES else None
        out: dict[str, Any] = {"name": data.name, "folder": source.folder, "hardware": data.protocol.hardware,
                               "seq_len": data.protocol.seq_len, "points": study_points(data), "commands": {}}
        out["groups"] = list(dict.fromkeys(p["group"] for p in out["points"]))
        out["horizon_rows"] = len(data.results) - len(out["points"])
        rec_argv = recommend_argv(source.folder, values=values, hardware=row or STUDY, dtype=dtype)
        out["commands"]["recommend"] = command_line("recommend", rec_argv)
        out["recommendation"], out["recommendation_error"] = self._optional("recommend", rec_argv, data)
        if "params" not in values:
            out["prescription"], out["prescription_note"] = None, (
                "a prescription is made at a parameter budget (recommend --target-params): set parameters")
            out["law_points"] = []
            return out
        pres_argv = prescribe_argv(recommend_argv(source.folder, values=values, hardware=row, dtype=dtype),
                                   values=values)
        out["commands"]["prescribe"] = command_line("recommend", pres_argv)
        with self._prescribing:
            if wanted is not None and self._latest.get(source.folder) != wanted:
                raise _Superseded
            out["prescription"], out["prescription_note"] = self._optional("prescribe", pres_argv, data)
        out["law_points"] = law_points(out["prescription"])
        return out

    def _optional(self, command: str, argv: list[str], data) -> tuple[dict | None, str | None]:
        """(answer, None), or (None, the command's one line) where it has nothing to say for this study."""
        try:
            return self.commands.run(command, argv, study=data), None
        except BadRequest as exc:
            return None, exc.message


__all__ = ["CACHE_ENTRIES", "Commands", "Explorer"]
