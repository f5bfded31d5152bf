"""The explorer's local web server: the page (static files shipped in this package) and its JSON API, on
the standard library's `ThreadingHTTPServer`, loopback by default.

    GET /                      the page (index.html, explore.css, explore.js, chart.js, panels.js)
    GET /api/options           the fields (from the commands' parsers), hardware rows, presets, axes, studies
    GET /api/family?QUERY      a family: 200 with it, or 400 {"error", "field", "errors"} for a bad input
    GET /api/study?study=I&QUERY   a study's points, recommendation and prescription under the same inputs
    GET /page/family?QUERY, /page/study?QUERY   what the page asks: the same answers, a bad input as
                               200 {"ok": false, "error", "field", "errors"} (a form's verdict, which the
                               browser does not log as a failed load), a good one as {"ok": true, "result"}

A request the explorer cannot answer (an unknown path or key, a bad value, a query too long, a method
other than GET or HEAD) is a 4xx with its one line as JSON. A defect (any other exception) is a 500 with
a short message and its traceback on stderr; the server goes on serving. With a loopback address the
Host header must name a loopback host, so a page of another site cannot reach the API through DNS
rebinding. Every answer forbids loading anything from another origin (Content-Security-Policy).
"""

from __future__ import annotations

import ipaddress
import json
import math
import sys
import traceback
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any
from urllib.parse import urlsplit

from depthwidth.errors import UserError
from depthwidth.explore.api import Explorer
from depthwidth.explore.fields import MAX_QUERY_CHARS, BadRequest

STATIC = {"/": ("index.html", "text/html; charset=utf-8"), "/index.html": ("index.html", "text/html; charset=utf-8"),
          "/explore.css": ("explore.css", "text/css; charset=utf-8"),
          "/explore.js": ("explore.js", "text/javascript; charset=utf-8"),
          "/chart.js": ("chart.js", "text/javascript; charset=utf-8"),
          "/panels.js": ("panels.js", "text/javascript; charset=utf-8")}
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
LOOPBACK_NAMES = ("localhost",)


def static_files() -> dict[str, tuple[bytes, str]]:
    """The page's files, read once from the installed package (`depthwidth/explore/static/`)."""
    folder = resources.files("depthwidth.explore") / "static"
    return {path: ((folder / name).read_bytes(), kind) for path, (name, kind) in STATIC.items()}


def is_loopback(host: str) -> bool:
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _finite(obj: Any) -> Any:
    """`obj` with every non-finite float as None (JSON has no NaN or infinity)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def to_json(obj: Any) -> bytes:
    try:
        text = json.dumps(obj, allow_nan=False)
    except ValueError:
        text = json.dumps(_finite(obj), allow_nan=False)
    return text.encode("utf-8")


class Handler(BaseHTTPRequestHandler):
    server: "ExploreServer"
    server_version = "depthwidth-explore"
    protocol_version = "HTTP/1.1"
    timeout = 60  # seconds a connection may sit idle (or half-sent) before its thread lets it go

    def do_GET(self) -> None:  # noqa: N802 (the standard library's name)
        self._answer(head=False)

    def do_HEAD(self) -> None:  # noqa: N802
        self._answer(head=True)

    def _refuse_method(self) -> None:
        self._send(HTTPStatus.METHOD_NOT_ALLOWED, to_json({"error": f"{self.command}: the explorer answers GET only"}),
                   "application/json", extra={"Allow": "GET, HEAD"})

    do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _refuse_method  # noqa: N815

    def _answer(self, *, head: bool) -> None:
        try:
            status, body, kind = self._route()
        except BadRequest as exc:
            status, body, kind = HTTPStatus.BAD_REQUEST, to_json(exc.to_dict()), "application/json"
        except (UserError, OSError) as exc:  # e.g. a study folder removed while the page is open
            status, body, kind = HTTPStatus.BAD_REQUEST, to_json({"error": str(exc), "field": None, "errors": {}}), \
                "application/json"
        except Exception as exc:  # a defect: logged with its traceback, answered in one line
            print(f"depthwidth explore: internal error answering {self.path[:200]!r}:", file=sys.stderr)
            traceback.print_exc()
            status = HTTPStatus.INTERNAL_SERVER_ERROR
            body = to_json({"error": f"internal error ({type(exc).__name__}); the traceback is in the server's log"})
            kind = "application/json"
        self._send(status, body, kind, head=head)

    def _route(self) -> tuple[int, bytes, str]:
        if len(self.path) > MAX_QUERY_CHARS + 100:
            return HTTPStatus.REQUEST_URI_TOO_LONG, to_json({"error": "the address is too long"}), "application/json"
        if not self._host_allowed():
            return HTTPStatus.FORBIDDEN, to_json({"error": f"Host {self.headers.get('Host')!r} is not this "
                                                            "machine's loopback address"}), "application/json"
        url = urlsplit(self.path)
        path, query = url.path, url.query
        if path in self.server.files:
            return HTTPStatus.OK, *self.server.files[path]
        explorer = self.server.explorer
        if path == "/api/options":
            return HTTPStatus.OK, to_json(explorer.options()), "application/json"
        calls = {"family": explorer.family, "study": explorer.study}
        top, _, name = path.strip("/").partition("/")
        if name in calls and top == "api":
            return HTTPStatus.OK, to_json(calls[name](query)), "application/json"
        if name in calls and top == "page":
            try:
                answer = {"ok": True, "result": explorer.study(query, latest_only=True) if name == "study"
                          else explorer.family(query)}
            except BadRequest as exc:
                answer = {"ok": False, **exc.to_dict()}
            return HTTPStatus.OK, to_json(answer), "application/json"
        return HTTPStatus.NOT_FOUND, to_json({"error": f"no such page or API: {path[:100]!r}"}), "application/json"

    def _host_allowed(self) -> bool:
        if not self.server.loopback:
            return True
        host = (self.headers.get("Host") or "").strip()
        name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
        return is_loopback(name)

    def _send(self, status: int, body: bytes, kind: str, *, head: bool = False, extra: dict | None = None) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.send_header("Content-Security-Policy", CSP)
            self.send_header("X-Content-Type-Options", "nosniff")
            for k, v in (extra or {}).items():
                self.send_header(k, v)
            self.end_headers()
            if not head:
                self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):  # the page went away: nothing to answer
            self.close_connection = True

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the standard library's name)
        """Quiet: a request is not worth a line (a defect is logged with its traceback by `_answer`)."""


class ExploreServer(ThreadingHTTPServer):
    """`ThreadingHTTPServer` holding the explorer and the page's files; one thread per connection."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], explorer: Explorer) -> None:
        self.explorer = explorer
        self.files = static_files()
        self.loopback = is_loopback(address[0])
        super().__init__(address, Handler)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{port}/"

    def handle_error(self, request, client_address) -> None:
        """A connection that fails outside a request's answer (a reset, a malformed request line): one line."""
        exc = sys.exc_info()[1]
        if not isinstance(exc, (ConnectionError, TimeoutError)):
            print(f"depthwidth explore: connection from {client_address[0]}: {type(exc).__name__}: {exc}",
                  file=sys.stderr)


def make_server(explorer: Explorer, *, host: str = "127.0.0.1", port: int = 8765) -> ExploreServer:
    """The bound server (OSError when the address is in use or cannot be bound); `serve_forever` serves it."""
    import socket

    if ":" in host:
        class V6(ExploreServer):
            address_family = socket.AF_INET6
        return V6((host, port), explorer)
    return ExploreServer((host, port), explorer)


__all__ = ["ExploreServer", "Handler", "make_server", "static_files", "to_json"]
