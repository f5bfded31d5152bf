"""`depthwidth explore` as a command and as a server under load: a burst of requests with malformed ones among
them is answered request by request and leaves the server answering; a folder that is no study, a port in
use or a bad port is one line and exit status 2."""

from __future__ import annotations

import socket
import threading
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor

from explore_helpers import get


def _burst_requests(n: int) -> list[tuple[str, str, int]]:
    """(path, method, expected status): valid families of several budgets and malformed requests, mixed."""
    kinds = [
        lambda i: (f"api/family?params={100 + i % 10}M&count=7", "GET", 200),
        lambda i: (f"api/family?params={i}Q", "GET", 400),
        lambda i: ("api/family?bogus=1", "GET", 400),
        lambda i: ("api/family?params=%ff%fe", "GET", 400),
        lambda i: (f"page/family?params=124M&count={i % 5 + 3}&max_decode_ms=1.5", "GET", 200),
        lambda i: ("api/family?params=124M&tp=3&zero=9", "GET", 400),
        lambda i: ("api/family?params=124M", "POST", 405),
        lambda i: ("api/" + urllib.parse.quote("\x00" * 5), "GET", 404),
        lambda i: ("api/options", "GET", 200),
        lambda i: ("api/family?" + "x" * 9000, "GET", 414),
    ]
    return [kinds[i % len(kinds)](i) for i in range(n)]


def test_a_burst_of_200_requests_with_malformed_ones_leaves_the_server_answering(base_url):
    requests = _burst_requests(200)
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=8) as pool:
        answers = list(pool.map(lambda r: get(base_url + r[0], method=r[1], timeout=30), requests))
    elapsed = time.perf_counter() - start
    got = [status for status, _ in answers]
    assert got == [expected for _, _, expected in requests]
    assert all("error" in body for (status, body) in answers if status >= 400)
    assert sum(s == 200 for s in got) >= 60 and sum(s >= 400 for s in got) >= 100
    status, body = get(base_url + "api/family?params=124M&count=7")
    assert status == 200 and len(body["plan"]["members"]) == 7
    # a connection that sends garbage instead of HTTP, and one that hangs up mid-request
    host, port = urllib.parse.urlsplit(base_url).netloc.split(":")
    for junk in (b"\x16\x03\x01 not http\r\n\r\n", b"GET /api/fam"):
        with socket.create_connection((host, int(port)), timeout=5) as s:
            s.sendall(junk)
    assert get(base_url + "api/options")[0] == 200
    assert elapsed < 5, f"the burst took {elapsed:.1f} s"


def test_a_folder_that_is_no_study_is_one_line(cli_error, tmp_path):
    line = cli_error(["explore", str(tmp_path)])
    assert line.startswith("depthwidth explore: error: ") and "study" in line


def test_a_port_in_use_and_a_bad_port_are_one_line(cli_error):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        line = cli_error(["explore", "--port", str(port)])
    assert line == (f"depthwidth explore: error: --port {port}: 127.0.0.1:{port} is already in use; choose another "
                    "--port (0 picks a free one)")
    assert "is not a TCP port" in cli_error(["explore", "--port", "70000"])
    assert "must be a positive number" in cli_error(["explore", "--max-decode-ms", "-2"])


def test_the_command_serves_the_page_with_its_starting_limits(explore_study, capsys, monkeypatch):
    """`depthwidth explore STUDY --port 0 --max-decode-ms 2`: the line with the address, the page's options
    carry the limit and the study, Ctrl-C stops it with status 0."""
    from depthwidth.cli import main
    from depthwidth.explore import server as server_module

    started = {}
    real = server_module.ExploreServer.serve_forever

    def serve_forever(self, poll_interval=0.5):
        started["url"] = self.url
        threading.Thread(target=real, args=(self,), daemon=True).start()
        deadline = time.monotonic() + 20
        while "options" not in started and time.monotonic() < deadline:
            time.sleep(0.05)
        self.shutdown()
        raise KeyboardInterrupt

    monkeypatch.setattr(server_module.ExploreServer, "serve_forever", serve_forever)

    def ask():
        while "url" not in started:
            time.sleep(0.05)
        started["options"] = get(started["url"] + "api/options")

    asker = threading.Thread(target=ask, daemon=True)
    asker.start()
    assert main(["explore", str(explore_study), "--port", "0", "--max-decode-ms", "2"]) == 0
    asker.join(5)
    out = capsys.readouterr()
    assert out.out.startswith("depthwidth explore: serving http://127.0.0.1:") and "stopped" in out.err
    status, options = started["options"]
    assert status == 200 and options["initial"]["max_decode_ms"] == "2.0"
    assert options["studies"][0]["name"] == "fixture"
