"""How the explorer's server holds its connections (`explore/server.py`): a reader whose every read has a
deadline, and the waiting room - one thread, one selector - where open connections wait, costing no thread,
until they have sent something for a worker to answer."""

from __future__ import annotations

import io
import math
import selectors
import socket
import threading
import time
from collections import OrderedDict
from typing import Any


class DeadlineReader(io.RawIOBase):
    """A connection's bytes as its handler reads them: no read waits past `deadline` (a request that has not
    arrived whole by then is a TimeoutError); while `polling`, a read that would wait returns None, so the
    buffer's `peek` tells what has already been received without waiting for more."""

    def __init__(self, sock: socket.socket) -> None:
        super().__init__()
        self.sock, self.deadline, self.polling = sock, math.inf, False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int | None:
        if self.polling:
            return None
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the request did not arrive in time")
        self.sock.settimeout(left)
        return self.sock.recv_into(buffer)


class WaitingRoom:
    """The open connections no worker is answering: one thread waits on all of them with a selector and hands
    each that has sent something to the workers' queue. One that has sent nothing for the server's
    `idle_seconds` is closed, and so is the longest-waiting one when a new connection would pass the
    server's `max_connections` (the new one itself when every open connection is being answered). Only
    this thread touches the selector; others hand it connections through `arrive` and a wake-up socket."""

    def __init__(self, server: Any, *, name: str) -> None:  # the ExploreServer it serves
        self.server = server
        self.selector = selectors.DefaultSelector()
        self.waiting: OrderedDict[socket.socket, tuple[Any, float]] = OrderedDict()  # -> (address, deadline)
        self.busy = 0  # connections queued for or held by a worker
        self.arrivals: list[tuple[socket.socket, Any, bool]] = []
        self.lock = threading.Lock()
        self.closed = False
        self.wake_in, self.wake_out = socket.socketpair()
        self.wake_in.setblocking(False)
        self.wake_out.setblocking(False)
        self.selector.register(self.wake_in, selectors.EVENT_READ)
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.thread.start()

    @property
    def open_connections(self) -> int:
        with self.lock:
            return len(self.waiting) + self.busy + sum(1 for _, _, new in self.arrivals if new)

    def arrive(self, sock: socket.socket, address: Any, *, new: bool) -> None:
        """A connection just accepted (`new`) or back from a worker after its requests."""
        with self.lock:
            self.arrivals.append((sock, address, new))
        self._wake()

    def done(self) -> None:
        """A worker has closed its connection."""
        with self.lock:
            self.busy -= 1

    def _wake(self) -> None:
        try:
            self.wake_out.send(b"x")
        except (BlockingIOError, OSError):  # a wake-up is already pending, or the room is closed
            pass

    def _run(self) -> None:
        while not self.closed:
            first = next(iter(self.waiting.values()), None)
            timeout = 1.0 if first is None else min(1.0, max(0.0, first[1] - time.monotonic()))
            for key, _ in self.selector.select(timeout):
                if key.fileobj is self.wake_in:
                    try:
                        while self.wake_in.recv(512):
                            pass
                    except (BlockingIOError, OSError):
                        pass
                    continue
                sock = key.fileobj
                self.selector.unregister(sock)
                address, _ = self.waiting.pop(sock)
                with self.lock:
                    self.busy += 1
                self.server._jobs.put((sock, address))
            self._take_arrivals()
            now = time.monotonic()
            while self.waiting and next(iter(self.waiting.values()))[1] <= now:
                self._close(next(iter(self.waiting)))

    def _take_arrivals(self) -> None:
        with self.lock:
            arrivals, self.arrivals = self.arrivals, []
            self.busy -= sum(1 for _, _, new in arrivals if not new)
        for sock, address, new in arrivals:
            if new and len(self.waiting) + self.busy >= self.server.max_connections:
                if not self.waiting:
                    self.server.shutdown_request(sock)
                    continue
                self._close(next(iter(self.waiting)))
            try:
                self.selector.register(sock, selectors.EVENT_READ)
            except (ValueError, OSError):  # closed meanwhile
                self.server.shutdown_request(sock)
                continue
            self.waiting[sock] = (address, time.monotonic() + self.server.idle_seconds)

    def _close(self, sock: socket.socket) -> None:
        self.selector.unregister(sock)
        del self.waiting[sock]
        self.server.shutdown_request(sock)

    def close(self) -> None:
        self.closed = True
        self._wake()
        self.thread.join(timeout=5)
        for sock in list(self.waiting):
            self._close(sock)
        with self.lock:
            arrivals, self.arrivals = self.arrivals, []
        for sock, _, _ in arrivals:
            self.server.shutdown_request(sock)
        self.selector.close()
        self.wake_in.close()
        self.wake_out.close()


__all__ = ["DeadlineReader", "WaitingRoom"]
