"""The explorer page's inputs: one `Field` per value the page sends, each the flag of the command that
reads it, and the reading of a request's query string into those values.

A field is a flag of `depthwidth plan` (the family: every flag of `plan` but --json and --plot), of
`depthwidth calc` (--dp and --zero: the memory of each member's detail), of the explorer's limits
(--max-decode-ms, --max-prefill-ms, --max-memory-gb) or of `depthwidth recommend` (--bootstrap and
--splits of a study's prescription). The page and the JSON API send the same names (a flag without its
dashes, `-` written `_`), so a view's query string is a short `plan` command line:
`?params=124M&count=7&hardware=h200&seq_len=8192&kv_group=4&max_decode_ms=20`.

Nothing here parses a value: each is handed as text to the command's own argparse parser (through
`depthwidth.explore.api.Commands`), so a bad value gets the command line's message, and a value out of
the command's bounds (a shape's `shapes.shape.LIMITS`, the repeat counts' `report.limits.LIMITS`) the
command line's refusal. What this module
refuses itself is a request the page never sends: an unknown key, a key given twice, a value too long.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import parse_qsl

from depthwidth.errors import UserError

#: the commands whose parsers read the fields
COMMANDS = ("plan", "calc", "limits", "recommend")
#: keys of a query that are no flag: the pinned members' labels (side by side) and, for a study, its index
EXTRA_KEYS = ("pins", "study")
#: a query's bounds: values, keys and characters (a URL of the page is well under them)
MAX_VALUE_CHARS = 1000
MAX_KEYS = 80
MAX_QUERY_CHARS = 8000
#: values of a checkbox field
TRUE, FALSE = ("1", "true", "on", "yes"), ("", "0", "false", "off", "no")


class BadRequest(UserError):
    """A request the explorer cannot answer: `message` is the one line the command line would print;
    `field` the page's field it is about (None: the request as a whole); `errors` every field's own."""

    def __init__(self, message: str, *, field: str | None = None, errors: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.errors = dict(errors or ({field: message} if field else {}))

    def to_dict(self) -> dict:
        return {"error": self.message, "field": self.field, "errors": self.errors}


@dataclass(frozen=True, kw_only=True, slots=True)
class Field:
    """One input of the page: `name` its query key, `command` whose parser reads it, `group` its section."""

    name: str
    command: str
    group: str
    label: str
    #: "value" (--flag TEXT), "bool" (a store_true flag), "tied" (--tied / --untied)
    kind: str = "value"

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    def argv(self, value: str) -> list[str]:
        """The flags `value` stands for (none for an empty value: the command's default)."""
        if self.kind == "bool":
            text = value.strip().lower()
            if text in FALSE:
                return []
            if text not in TRUE:
                raise BadRequest(f"{self.name}={value!r}: expected 1 or 0 (the flag {self.flag} given or not)",
                                 field=self.name)
            return [self.flag]
        if self.kind == "tied":
            text = value.strip().lower()
            if text not in ("", "tied", "untied"):
                raise BadRequest(f"{self.name}={value!r}: expected tied, untied or nothing (the base's)",
                                 field=self.name)
            return [f"--{text}"] if text else []
        return [f"{self.flag}={value}"] if value != "" else []


def _f(name: str, command: str, group: str, label: str, kind: str = "value") -> Field:
    return Field(name=name, command=command, group=group, label=label, kind=kind)


BUDGET, FAMILY, CONVENTIONS, WORKLOAD, LIMITS, STUDY = (
    "budget", "family", "conventions", "workload", "limits", "study")
#: every field, in the page's order
FIELDS = (
    _f("params", "plan", BUDGET, "parameters"),
    _f("flops", "plan", BUDGET, "training FLOPs"),
    _f("non_embedding", "plan", BUDGET, "non-embedding", "bool"),
    _f("tokens_per_param", "plan", BUDGET, "tokens / param"),
    _f("tokens", "plan", BUDGET, "tokens"),
    _f("count", "plan", FAMILY, "members"),
    _f("align", "plan", FAMILY, "align"),
    _f("head_dim", "plan", FAMILY, "head_dim"),
    _f("tolerance", "plan", FAMILY, "tolerance"),
    _f("min_layers", "plan", FAMILY, "min layers"),
    _f("aspect_range", "plan", FAMILY, "d/L range"),
    _f("depths", "plan", FAMILY, "depths"),
    _f("widths", "plan", FAMILY, "widths"),
    _f("like", "plan", CONVENTIONS, "like preset"),
    _f("ffn", "plan", CONVENTIONS, "FFN"),
    _f("norm", "plan", CONVENTIONS, "norm"),
    _f("bias", "plan", CONVENTIONS, "bias"),
    _f("pos", "plan", CONVENTIONS, "positions"),
    _f("kv_group", "plan", CONVENTIONS, "GQA q/kv"),
    _f("vocab", "plan", CONVENTIONS, "vocab"),
    _f("max_seq_len", "plan", CONVENTIONS, "max seq len"),
    _f("tied", "plan", CONVENTIONS, "embeddings", "tied"),
    _f("hardware", "plan", WORKLOAD, "hardware"),
    _f("dtype", "plan", WORKLOAD, "inference dtype"),
    _f("seq_len", "plan", WORKLOAD, "seq len"),
    _f("batch", "plan", WORKLOAD, "batch"),
    _f("tp", "plan", WORKLOAD, "tp"),
    _f("pp", "plan", WORKLOAD, "pp"),
    _f("virtual_stages", "plan", WORKLOAD, "virtual stages"),
    _f("microbatches", "plan", WORKLOAD, "micro-batches"),
    _f("dp", "calc", WORKLOAD, "dp"),
    _f("zero", "calc", WORKLOAD, "ZeRO"),
    _f("convention", "plan", WORKLOAD, "precision convention"),
    _f("residual_dtype", "plan", WORKLOAD, "residual dtype"),
    _f("grad_dtype", "plan", WORKLOAD, "grad dtype"),
    _f("max_decode_ms", "limits", LIMITS, "decode ms / token"),
    _f("max_prefill_ms", "limits", LIMITS, "prefill ms"),
    _f("max_memory_gb", "limits", LIMITS, "memory / device GB"),
    _f("bootstrap", "recommend", STUDY, "bootstrap"),
    _f("splits", "recommend", STUDY, "held-out splits"),
)
BY_NAME = {f.name: f for f in FIELDS}
#: what the page starts from when its address names no budget
PAGE_DEFAULTS = {"params": "124M", "count": "7"}
#: a prescription on the page is interactive: fewer resamples and splits than `recommend`'s 200 and 20 (their
#: bounds are recommend's, `depthwidth.report.limits.LIMITS`, checked by its parser like every other field)
STUDY_DEFAULTS = {"bootstrap": "20", "splits": "5"}


def read_query(query: str) -> tuple[dict[str, str], dict[str, str]]:
    """(field values, extra values) of a query string. BadRequest for a query the page never sends: not
    UTF-8, too long, an unknown key, a key given twice, a value with a control character or too long."""
    if len(query) > MAX_QUERY_CHARS:
        raise BadRequest(f"query: {len(query):,} characters, more than the {MAX_QUERY_CHARS:,} of any view")
    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=False, errors="strict",
                          max_num_fields=MAX_KEYS)
    except UnicodeDecodeError:
        raise BadRequest("query: not UTF-8 text") from None
    except ValueError:
        raise BadRequest(f"query: more than {MAX_KEYS} keys") from None
    values: dict[str, str] = {}
    extra: dict[str, str] = {}
    for key, value in pairs:
        if key not in BY_NAME and key not in EXTRA_KEYS:
            raise BadRequest(f"unknown field {_shown(key)}; fields: {', '.join(BY_NAME)}, {', '.join(EXTRA_KEYS)}")
        if key in values or key in extra:
            raise BadRequest(f"{key}: given twice", field=key if key in BY_NAME else None)
        if len(value) > MAX_VALUE_CHARS:
            raise BadRequest(f"{key}: {len(value):,} characters, more than {MAX_VALUE_CHARS:,}",
                             field=key if key in BY_NAME else None)
        if any(not c.isprintable() for c in value):
            raise BadRequest(f"{key}: a control character in {_shown(value)}", field=key if key in BY_NAME else None)
        (values if key in BY_NAME else extra)[key] = value.strip()
    return values, extra


def _shown(text: str) -> str:
    return repr(text if len(text) <= 60 else text[:57] + "...")


def argv_of(values: dict[str, str], command: str) -> list[str]:
    """The flags of `command` that `values` give, in the page's order."""
    return [a for f in FIELDS if f.command == command and f.name in values for a in f.argv(values[f.name])]


_FLAG = re.compile(r"--([a-z][a-z0-9-]*)")
_NAME = re.compile(r"\b([a-z][a-z0-9_]*)=")
#: flags of other commands that stand for a field (`recommend --target-params` is the page's params)
ALIASES = {"target_params": "params", "target_tokens": "tokens", "target_flops": "flops", "untied": "tied",
           "max_memory": "max_memory_gb", "kv_heads": "kv_group", "zero_stage": "zero"}


def field_of(message: str) -> str | None:
    """The field a command's one-line message is about: its first flag that is a field (`--seq-len 4096
    exceeds ...` -> seq_len), else its first `name=` that is one (`pp=3 exceeds n_layers=2` -> pp)."""
    for pattern in (_FLAG, _NAME):
        for match in pattern.finditer(message):
            name = match.group(1).replace("-", "_")
            name = ALIASES.get(name, name)
            if name in BY_NAME:
                return name
    return None


__all__ = ["BY_NAME", "BadRequest", "COMMANDS", "EXTRA_KEYS", "FIELDS", "Field", "PAGE_DEFAULTS", "STUDY_DEFAULTS",
           "argv_of", "field_of", "read_query"]
