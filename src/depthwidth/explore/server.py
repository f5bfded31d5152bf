"""The explorer's local web server: the page (static files shipped in this package) and its JSON API, on
the standard library's `HTTPServer` with a bounded pool of worker threads, loopback by default.

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

Connections are served by a fixed pool of `WORKERS` threads, never a thread per connection. A connection
waits in `WaitingRoom` (`explore/connections.py`) (one thread, one selector) until it has sent something; only then does a worker
read and answer its request, which must arrive whole within `READ_SECONDS`. A kept-alive connection goes
back to the waiting room between requests. A connection that sends nothing for `IDLE_SECONDS` is closed, and
past `MAX_CONNECTIONS` open ones the longest-waiting one is closed first; so half-open or idle connections
cost a file descriptor each, no thread, and cannot keep the workers from answering. The listen queue holds
`BACKLOG` connections not yet accepted.
"""

from __future__ import annotations

import io
import ipaddress
import json
import math
import queue
import socket
import sys
import threading
import time
import traceback
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, HTTPServer
from importlib import resources
from typing import Any
from urllib.parse import urlsplit

from depthwidth.errors import UserError
from depthwidth.explore.api import Explorer
from depthwidth.explore.connections import DeadlineReader, WaitingRoom
from depthwidth.explore.fields import MAX_QUERY_CHARS, BadRequest

STATIC = {"/": ("index.html", "text/html; charset=utf-8"), "/index.html": ("index.html", "text/html; charset=utf-8"),
          "/explore.css": ("explore.css", "text/css; charset=utf-8"),
          "/explore.js": ("explore.js", "text/javascript; charset=utf-8"),
          "/chart.js": ("chart.js", "text/javascript; charset=utf-8"),
          "/panels.js": ("panels.js", "text/javascript; charset=utf-8")}
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
LOOPBACK_NAMES = ("localhost",)
#: threads that read and answer requests (a prescription holds one for seconds; the page asks a few at a time)
WORKERS = 16
#: connections accepted by the kernel and not yet by the server
BACKLOG = 128
#: open connections at most (each a file descriptor); past it the longest-waiting idle one is closed
MAX_CONNECTIONS = 256
#: seconds a connection may stay open without sending a request (a new one, or a kept-alive one between requests)
IDLE_SECONDS = 15.0
#: seconds a request may take to arrive whole once it has begun (and any one write of an answer may take)
READ_SECONDS = 10.0
#: requests answered in a row on one connection (all received already) before it is closed
REQUESTS_PER_TURN = 100
#: seconds `server_close` waits for the workers to finish what they are answering
CLOSE_SECONDS = 2.0


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
    """One turn of a connection on a worker: its requests as long as they have already arrived, each within
    the server's `read_seconds`; then `keep_alive` says whether it goes back to the waiting room."""

    server: "ExploreServer"
    server_version = "depthwidth-explore"
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        self.rfile.close()
        self._reader = DeadlineReader(self.connection)
        self.rfile = io.BufferedReader(self._reader)
        self.keep_alive = False

    def handle(self) -> None:
        for _ in range(REQUESTS_PER_TURN):
            self._reader.deadline = time.monotonic() + self.server.read_seconds
            self.close_connection = True
            self.handle_one_request()
            if self.close_connection:
                return
            self._reader.polling = True
            try:
                pending = self.rfile.peek(1)
            finally:
                self._reader.polling = False
            if not pending:  # nothing more received: wait for it in the waiting room, not on this worker
                self.keep_alive = True
                return
        # a client still sending after REQUESTS_PER_TURN requests in a row: the connection is closed

    def send_response(self, code: int, message: str | None = None) -> None:
        """Every answer (the standard library's error pages included) may take `read_seconds` to send: a
        client that does not read it is let go."""
        self.connection.settimeout(self.server.read_seconds)
        super().send_response(code, message)

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


class ExploreServer(HTTPServer):
    """`HTTPServer` holding the explorer and the page's files, its connections served by `workers` threads
    behind a waiting room (module docstring); the limits are the module's constants unless given."""

    request_queue_size = BACKLOG

    def __init__(self, address: tuple[str, int], explorer: Explorer, *, workers: int = WORKERS,
                 max_connections: int = MAX_CONNECTIONS, idle_seconds: float = IDLE_SECONDS,
                 read_seconds: float = READ_SECONDS) -> None:
        self.explorer = explorer
        self.files = static_files()
        self.loopback = is_loopback(address[0])
        self.workers, self.max_connections = workers, max_connections
        self.idle_seconds, self.read_seconds = idle_seconds, read_seconds
        super().__init__(address, Handler)
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self.thread_prefix = f"explore-{self.server_address[1]}-"  # the names of this server's threads
        self._room = WaitingRoom(self, name=self.thread_prefix + "waiting-room")
        self._threads = [threading.Thread(target=self._work, name=f"{self.thread_prefix}worker-{i}", daemon=True)
                         for i in range(workers)]
        for thread in self._threads:
            thread.start()

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{port}/"

    @property
    def open_connections(self) -> int:
        """Connections accepted and not yet closed."""
        return self._room.open_connections

    def process_request(self, request, client_address) -> None:
        """An accepted connection waits in the waiting room until it sends something."""
        self._room.arrive(request, client_address, new=True)

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            sock, address = job
            keep = False
            try:
                keep = self.RequestHandlerClass(sock, address, self).keep_alive
            except Exception:
                self.handle_error(sock, address)
            if keep and not self._room.closed:
                self._room.arrive(sock, address, new=False)
            else:
                self.shutdown_request(sock)
                self._room.done()

    def server_close(self) -> None:
        """The listening socket, the waiting connections and the workers (each after its current request;
        waited for up to `CLOSE_SECONDS`, then left to end with the process)."""
        super().server_close()
        if hasattr(self, "_room"):  # not when the address could not be bound
            self._room.close()
            for _ in self._threads:
                self._jobs.put(None)
            deadline = time.monotonic() + CLOSE_SECONDS
            for thread in self._threads:
                thread.join(timeout=max(0.0, deadline - time.monotonic()))

    def handle_error(self, request, client_address) -> None:
        """A connection that fails outside a request's answer (a reset, a malformed request line): one line."""
        exc = sys.exc_info()[1]
        if not isinstance(exc, (ConnectionError, TimeoutError)):
            print(f"depthwidth explore: connection from {client_address[0]}: {type(exc).__name__}: {exc}",
                  file=sys.stderr)


def make_server(explorer: Explorer, *, host: str = "127.0.0.1", port: int = 8765, **limits: Any) -> ExploreServer:
    """The bound server (OSError when the address is in use or cannot be bound); `serve_forever` serves it.
    `limits`: `ExploreServer`'s workers, max_connections, idle_seconds, read_seconds."""
    server_class = ExploreServer
    if ":" in host:
        class V6(ExploreServer):
            address_family = socket.AF_INET6
        server_class = V6
    return server_class((host, port), explorer, **limits)


__all__ = ["ExploreServer", "Handler", "make_server", "static_files", "to_json"]
