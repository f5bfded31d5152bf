"""A study's n-gram baselines (`depthwidth.data.baselines`): computed once when the study runs (from the
token cache, where they are kept per dataset hash) and written to `baselines.json` in the study folder,
so the report, `study show` and the gates read the numbers the runs were judged against, even on a
machine without the corpus. A study folder without the file (an older or an imported study) gets them
from its spec's data when the corpus can be read here, else none (and the report says so)."""

from __future__ import annotations

import json
from pathlib import Path

from depthwidth.data.baselines import BASELINES_FILE, NgramBaselines
from depthwidth.errors import UserError
from depthwidth.files import write_json


def spec_baselines(data) -> NgramBaselines | None:
    """The baselines of a spec's [data] (a `DataSpec`): the token cache's, computed there the first time."""
    from depthwidth.data import load_dataset
    from depthwidth.data.baselines import ngram_baselines

    dataset = load_dataset(corpus=data.corpus, tokenizer=data.tokenizer, val_fraction=data.val_fraction)
    return ngram_baselines(dataset)


def write_baselines(folder: str | Path, baselines: NgramBaselines | None) -> None:
    if baselines is not None:
        write_json(Path(folder) / BASELINES_FILE, baselines.to_dict())


def read_baselines(folder: str | Path) -> NgramBaselines | None:
    """The study folder's `baselines.json` (None when absent; a damaged one is a UserError naming it)."""
    path = Path(folder) / BASELINES_FILE
    if not path.is_file():
        return None
    try:
        return NgramBaselines.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except (ValueError, TypeError, KeyError) as exc:
        raise UserError(f"{path}: not a baselines file ({exc}); delete it and run the study again to rewrite it") \
            from None


def study_baselines(folder: str | Path, spec) -> NgramBaselines | None:
    """The study's baselines: its folder's file, else its spec's data when that corpus is readable here."""
    found = read_baselines(folder)
    if found is not None:
        return found
    if (Path(folder) / "import.json").is_file():
        return None  # runs trained elsewhere: their data is not here
    try:
        return spec_baselines(spec.data)
    except (UserError, OSError, ValueError):
        return None


__all__ = ["read_baselines", "spec_baselines", "study_baselines", "write_baselines"]
