"""Finding this machine's stored profile: which file (`paths.profile_candidates`) and whether what it
holds fits the use (`ProfileMatch`). One rule for every reader: the MFU peak, the benchmark's
predictions and `--hardware measured`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from depthwidth.errors import UserError
from depthwidth.machine.paths import profile_candidates
from depthwidth.machine.profile import HardwareProfile, load_profile

#: key in `HardwareProfile.op_overheads` of the per-op cost timed on our own eager Transformer block
EAGER_BLOCK_OP = "eager_block_op"


@dataclass(frozen=True, kw_only=True, slots=True)
class ProfileMatch:
    """What a stored profile must be to be used; None or False leaves that property free.

    Fields:
        threads: torch threads it was measured with.
        device: "cpu" | "cuda"; device_name: the CPU model or GPU name it was measured on.
        torch_version: the torch it was measured with.
        dtypes: dtypes it must have a peak for.
        full: not a --quick run.
        complete: has copy bandwidth and per-op cost (not GEMM-only).
        eager_block: its per-op cost was timed on our eager Transformer block.
    """

    threads: int | None = None
    device: str | None = None
    device_name: str | None = None
    torch_version: str | None = None
    dtypes: tuple[str, ...] = ()
    full: bool = False
    complete: bool = False
    eager_block: bool = False

    def accepts(self, profile: HardwareProfile) -> bool:
        same = all(want is None or want == have for want, have in (
            (self.threads, profile.threads), (self.device, profile.device),
            (self.device_name, profile.device_name), (self.torch_version, profile.torch_version)))
        return (same and all(d in profile.peak_flops for d in self.dtypes)
                and not (self.full and profile.quick) and not (self.complete and not profile.complete)
                and not (self.eager_block and EAGER_BLOCK_OP not in profile.op_overheads))


def find_profile(match: ProfileMatch, *, cache: str | os.PathLike | None = None,
                 strict: bool = False) -> tuple[Path, HardwareProfile] | None:
    """The first candidate file (`profile_candidates` of the match's threads, device and device
    name) holding a profile that `match` accepts, with its path; None if there is none. A file that is not a valid profile is
    skipped (it is replaced when a new measurement is saved), or raised (UserError) when `strict`."""
    for path in profile_candidates(threads=match.threads, cache=cache, device=match.device,
                                   device_name=match.device_name or ""):
        if not path.is_file():
            continue
        try:
            profile = load_profile(path)
        except (UserError, OSError):
            if strict:
                raise
            continue
        if match.accepts(profile):
            return path, profile
    return None


__all__ = ["EAGER_BLOCK_OP", "ProfileMatch", "find_profile"]
