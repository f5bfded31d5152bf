"""Helpers of the explorer's tests: serve an explorer on a free loopback port, ask it, read a command line it shows."""

from __future__ import annotations

import json
import shlex
import threading
import urllib.error
import urllib.request


def serve(explorer):
    """(server, base URL): `explorer` served on a free loopback port by a daemon thread."""
    from depthwidth.explore import make_server

    server = make_server(explorer, host="127.0.0.1", port=0)
    threading.Thread(target=server.serve_forever, name="explore-test-server", daemon=True).start()
    return server, server.url


def get(url: str, *, method: str = "GET", headers: dict | None = None, timeout: float = 60) -> tuple[int, dict]:
    """(status, JSON body) of one request; an HTTP error status is returned, not raised."""
    request = urllib.request.Request(url, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def argv_of_command(line: str) -> list[str]:
    """The arguments of a `depthwidth COMMAND ...` line the page shows."""
    words = shlex.split(line)
    assert words[0] == "depthwidth"
    return words[1:]
