"""Open a page in headless Chromium through the DevTools protocol over a pipe (--remote-debugging-pipe:
the browser reads NUL-terminated JSON commands on fd 3 and writes replies and events on fd 4), so no
websocket library is needed. Collects console errors, uncaught exceptions, log errors, every network
request, the size of every <img>, and a full-page PNG screenshot."""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--remote-debugging-pipe")

IMAGES_JS = """JSON.stringify(Array.from(document.images).map(i => ({
  src: i.currentSrc.slice(0, 40), complete: i.complete, width: i.naturalWidth, height: i.naturalHeight,
  shown_width: i.getBoundingClientRect().width, shown_height: i.getBoundingClientRect().height})))"""


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


@dataclass
class PageCheck:
    console_errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    images: list[dict] = field(default_factory=list)
    title: str = ""
    screenshot: bytes = b""


class _Pipe:
    def __init__(self, proc: subprocess.Popen, write_fd: int, read_fd: int) -> None:
        self.proc, self.write_fd, self.read_fd = proc, write_fd, read_fd
        self.buffer = b""
        self.next_id = 0
        self.events: list[dict] = []

    def send(self, method: str, params: dict | None = None, *, session: str | None = None, timeout: float = 30.0):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.write_fd, json.dumps(msg).encode() + b"\0")
        want = self.next_id
        deadline = time.monotonic() + timeout
        while True:
            for m in self._read(deadline):
                if m.get("id") == want:
                    if "error" in m:
                        raise RuntimeError(f"{method}: {m['error']}")
                    return m.get("result", {})
                self.events.append(m)

    def wait_event(self, method: str, *, timeout: float = 30.0) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            for i, e in enumerate(self.events):
                if e.get("method") == method:
                    return self.events.pop(i)
            self.events.extend(self._read(deadline))

    def _read(self, deadline: float) -> list[dict]:
        while b"\0" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("chromium did not answer in time")
            ready, _, _ = select.select([self.read_fd], [], [], left)
            if ready:
                chunk = os.read(self.read_fd, 1 << 20)
                if not chunk:
                    raise RuntimeError(f"chromium closed the pipe (exit {self.proc.poll()})")
                self.buffer += chunk
        out = []
        while b"\0" in self.buffer:
            raw, self.buffer = self.buffer.split(b"\0", 1)
            out.append(json.loads(raw))
        return out


def open_page(path: str | os.PathLike, *, width: int = 1400, height: int = 900, chromium: str | None = None,
              timeout: float = 60.0, max_height: int | None = None) -> PageCheck:
    """Load the file `path` in a fresh headless Chromium and report what happened; the screenshot is the
    whole page, or its top `max_height` CSS pixels."""
    exe = chromium or find_chromium()
    if exe is None:
        raise FileNotFoundError("chromium is not installed")
    url = Path(path).resolve().as_uri()
    to_child_r, to_child_w = os.pipe()
    from_child_r, from_child_w = os.pipe()

    def fds() -> None:  # in the child: fd 3 reads commands, fd 4 writes replies (moved high first, so
        # neither end can overwrite the other; dup2 makes 3 and 4 inheritable, every other fd closes on exec)
        high_r = fcntl.fcntl(to_child_r, fcntl.F_DUPFD, 10)
        high_w = fcntl.fcntl(from_child_w, fcntl.F_DUPFD, 10)
        os.dup2(high_r, 3)
        os.dup2(high_w, 4)

    with tempfile.TemporaryDirectory(prefix="depthwidth-chromium-") as profile:
        proc = subprocess.Popen([exe, *FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}",
                                 "about:blank"], close_fds=False, preexec_fn=fds,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_child_r)
        os.close(from_child_w)
        pipe = _Pipe(proc, to_child_w, from_child_r)
        check = PageCheck()
        try:
            target = pipe.send("Target.createTarget", {"url": "about:blank"}, timeout=timeout)["targetId"]
            session = pipe.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
            for domain in ("Page", "Runtime", "Log", "Network"):
                pipe.send(f"{domain}.enable", session=session)
            pipe.send("Emulation.setDeviceMetricsOverride",
                      {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}, session=session)
            pipe.send("Page.navigate", {"url": url}, session=session)
            pipe.wait_event("Page.loadEventFired", timeout=timeout)
            value = pipe.send("Runtime.evaluate", {"expression": IMAGES_JS, "returnByValue": True},
                              session=session)["result"]["value"]
            check.images = json.loads(value)
            check.title = pipe.send("Runtime.evaluate", {"expression": "document.title", "returnByValue": True},
                                    session=session)["result"]["value"]
            metrics = pipe.send("Page.getLayoutMetrics", session=session)["cssContentSize"]
            shot = pipe.send("Page.captureScreenshot", {
                "format": "png", "captureBeyondViewport": True,
                "clip": {"x": 0, "y": 0, "width": metrics["width"],
                         "height": min(metrics["height"], max_height or metrics["height"]), "scale": 1}},
                session=session, timeout=timeout)
            check.screenshot = base64.b64decode(shot["data"])
            for e in pipe.events:
                method, params = e.get("method"), e.get("params", {})
                if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                    check.console_errors.append(" ".join(str(a.get("value", a.get("description", "")))
                                                         for a in params.get("args", [])))
                elif method == "Runtime.exceptionThrown":
                    check.console_errors.append(params.get("exceptionDetails", {}).get("text", "exception"))
                elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                    check.console_errors.append(params["entry"].get("text", ""))
                elif method == "Network.requestWillBeSent":
                    check.requests.append(params.get("request", {}).get("url", "")[:80])
        finally:
            try:
                pipe.send("Browser.close", timeout=5)
            except (RuntimeError, TimeoutError, OSError):
                pass
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            os.close(to_child_w)
            os.close(from_child_r)
    return check
