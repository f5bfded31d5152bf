"""The one reading of a hardware argument (`--hardware`, a study's `hardware`, a bench target):

- a row of `depthwidth.shapes.hardware.HARDWARE` (name or alias, any case): that row;
- "measured": this machine's stored profile (`stored.find_profile`, by thread count; the complete
  one `depthwidth hw measure` writes), as `measured_hardware` converts it;
- the path of a profile JSON (ends in .json, or an existing file): that profile, converted the same way.

"measured" always means a measured profile of the machine the command runs on, and its conversion
uses the `torch.mm` GEMM rate: the path an eager `nn.Linear`, and so our model, takes (oneDNN's
faster path is the MFU peak, `peak.peak_flops`, not what the model runs). Resolving a table name or
reading a profile never imports torch. The machine a study measured on, which a report may target, is
not a hardware argument: it has its own name, "study" (`depthwidth.report.targets.resolve_target`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from depthwidth.errors import UserError
from depthwidth.files import file_kind
from depthwidth.machine.paths import profile_candidates
from depthwidth.machine.profile import HardwareProfile, load_profile, profile_to_hardware
from depthwidth.machine.stored import ProfileMatch, find_profile
from depthwidth.shapes.hardware import HARDWARE, HardwareSpec, get_hardware

MEASURED = "measured"
_CHOICES = f"or {MEASURED!r} (this machine's profile from `depthwidth hw measure`) or the path of a profile .json"


def is_measured(value: Any) -> bool:
    """Whether `value` is the word "measured" (any case, surrounding spaces ignored)."""
    return isinstance(value, str) and value.strip().lower() == MEASURED


#: the longest hardware argument looked at (Linux's PATH_MAX)
MAX_NAME_CHARS = 4096
#: the longest file or folder name of a path (Linux's NAME_MAX)
MAX_PART_CHARS = 255


def hardware_choice(value: Any, *, argument: str = "hardware") -> str:
    """The canonical form of a hardware argument: MEASURED, a HARDWARE row name (aliases and case
    resolved), or the path of a profile JSON file. UserError naming `argument` and the choices
    otherwise, or what the path is when it is there but no regular file (a named pipe, a device, a
    folder). Reads nothing but what the path is (`files.file_kind`); the profile is read by
    `profile.load_profile` through the checked reader."""
    if not isinstance(value, str) or not value.strip():
        raise UserError(f"{argument}={value!r}: expected a hardware name of `depthwidth hw list` {_CHOICES}")
    text = value.strip()
    if is_measured(text):
        return MEASURED
    if len(text) > MAX_NAME_CHARS or any(len(part) > MAX_PART_CHARS for part in Path(text).parts):
        from depthwidth.errors import echo_repr  # no row is, and no path can be, this long (PATH_MAX, NAME_MAX)

        raise UserError(f"{argument}={echo_repr(text)}: not a hardware name of `depthwidth hw list` nor a profile "
                        f"path (at most {MAX_NAME_CHARS:,} characters, {MAX_PART_CHARS} per folder or file name)")
    path = Path(text).expanduser()
    if text.lower().endswith(".json"):
        kind = file_kind(path)
        if kind == "missing":
            raise UserError(f"{argument}: no hardware profile at {path}; run `depthwidth hw measure --out {path}` "
                            "to make one")
        if kind is not None:
            raise _not_a_file(argument, path, kind)
        return str(path)
    try:
        return get_hardware(text).name
    except UserError as exc:
        kind = file_kind(path)
        if kind is None:
            return str(path)
        if kind != "missing":
            raise _not_a_file(argument, path, kind) from None
        raise UserError(f"{argument}: {exc}; {_CHOICES}") from None


def _not_a_file(argument: str, path: Path, kind: str) -> UserError:
    """A hardware argument naming something that is there but is no profile file (a pipe, a device, a folder)."""
    link = f" (a link to {os.path.realpath(path)})" if path.is_symlink() and kind != "a broken symbolic link" else ""
    return UserError(f"{argument}: {path}{link} is {kind}, not a regular file; a hardware profile is a .json file "
                     "written by `depthwidth hw measure`")


def measured_hardware(profile: HardwareProfile) -> HardwareSpec:
    """The `HardwareSpec` a measured profile stands for: `profile_to_hardware` at the torch.mm rate."""
    return profile_to_hardware(profile, gemm_path="torch.mm")


def resolve_hardware(value: Any, *, argument: str = "hardware", threads: int | None = None,
                     cache: str | os.PathLike | None = None) -> HardwareSpec:
    """The `HardwareSpec` of a hardware argument (module docstring). `threads` picks the measured
    profile of that many torch threads (None: the shared `hw-profile.json`, else the one of the most
    threads). A `HardwareSpec` is returned as it is. UserError naming `argument` when the name is
    unknown, the file is not a profile, or no profile of this machine was measured."""
    if isinstance(value, HardwareSpec):
        return value
    choice = hardware_choice(value, argument=argument)
    if choice in HARDWARE:
        return HARDWARE[choice]
    if choice == MEASURED:
        found = find_profile(ProfileMatch(threads=threads, complete=True), cache=cache, strict=True)
        if found is None:
            where = ", ".join(str(p) for p in profile_candidates(threads=threads, cache=cache))
            flag = f" --threads {threads}" if threads is not None else ""
            at = f" at {threads} threads" if threads is not None else ""
            raise UserError(f"{argument} {MEASURED}: no measured profile of this machine{at} ({where}); "
                            f"run `depthwidth hw measure{flag}` first")
        return measured_hardware(found[1])
    try:
        return measured_hardware(load_profile(choice))
    except UserError as exc:
        raise UserError(f"{argument}: {exc}") from None
    except OSError as exc:  # a name too long for a path, a folder without permission: one line, the name cut
        from depthwidth.errors import echo

        raise UserError(f"{argument}: {echo(str(choice))}: not a hardware table row nor a readable profile "
                        f"({exc.strerror or type(exc).__name__})") from None


__all__ = ["MEASURED", "hardware_choice", "is_measured", "measured_hardware", "resolve_hardware"]
