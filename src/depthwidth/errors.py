"""`UserError`: the one exception type for a mistake in what the user asked for.

A flag, a file, a study spec, a budget or a shape that cannot be used raises `UserError` with one line
that names the field, the file or the line and what was expected. The command line prints exactly that
line and exits with status 2. Any other exception is a defect of depthwidth itself: the command line
lets it keep its traceback. `UserError` is a `ValueError`, so library callers that catch `ValueError`
keep working.

A message that quotes the user's input (a cell of a table, a spec value, a flag) quotes it through
`echo` or `echo_repr`: at most `ECHO_CHARS` characters of it, then "... (N characters)", so a hostile
100 KB value is still one short line that says how long it was.
"""


class UserError(ValueError):
    """A mistake in the input (not a bug): its message is one line naming what is wrong and what is allowed."""


#: the most characters of a string read from a user's input that a message echoes
ECHO_CHARS = 200


def echo(text: object, limit: int = ECHO_CHARS) -> str:
    """`str(text)` as a message quotes it: up to `limit` characters, else its first `limit` characters and
    "... (N characters)" with N its full length."""
    text = str(text)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"


def echo_repr(value: object, limit: int = ECHO_CHARS) -> str:
    """`repr(value)` cut as `echo` cuts (a string shown with its quotes, so an empty or blank one is visible).
    `depthwidth.shapes.checks.shown` is the analytic core's shorter form of it."""
    return echo(repr(value), limit)


__all__ = ["ECHO_CHARS", "UserError", "echo", "echo_repr"]
