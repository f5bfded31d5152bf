"""`UserError`: the one exception type for a mistake in what the user asked for.

A flag, a file, a study spec, a budget or a shape that cannot be used raises `UserError` with one line
that names the field, the file or the line and what was expected. The command line prints exactly that
line and exits with status 2. Any other exception is a defect of depthwidth itself: the command line
lets it keep its traceback. `UserError` is a `ValueError`, so library callers that catch `ValueError`
keep working.
"""


class UserError(ValueError):
    """A mistake in the input (not a bug): its message is one line naming what is wrong and what is allowed."""


#: the most characters of a string read from a user's file that a message echoes
ECHO_CHARS = 200


def echo(text: object, limit: int = ECHO_CHARS) -> str:
    """`text` as a message echoes it: cut to `limit` characters, "..." marking the cut (a hostile file's
    string is not worth a page). `depthwidth.shapes.checks.shown` is the same for a value's repr."""
    text = str(text)
    return text if len(text) <= limit else text[:limit - 3] + "..."


__all__ = ["ECHO_CHARS", "UserError", "echo"]
