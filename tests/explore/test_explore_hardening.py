"""The explorer under load and against a hostile page: a burst of 200 requests is answered in full, half-open,
half-sent and idle connections cost no thread and are dropped, and the page's hardware= reads no file the
explorer was not given, with one answer for every other path whatever is there."""

from __future__ import annotations

import http.client
import json
import os
import socket
import threading
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor

import pytest
from explore_helpers import get

from depthwidth.explore.api import NOT_GIVEN

pytestmark = pytest.mark.timeout(60)

#: cheap answers: the static page and its files, the options, a family asked before (cached)
CHEAP = ("/", "/explore.css", "/chart.js", "/api/options", "/api/family?params=124M&count=7")
#: every socket operation of the test's client waits at most this long
CLIENT_TIMEOUT = 10.0


@pytest.fixture
def served(explorer):
    """`served(**limits)`: (server, host, port) of a server of its own, stopped at the end of the test."""
    from depthwidth.explore import make_server

    servers = []

    def start(**limits):
        server = make_server(explorer, host="127.0.0.1", port=0, **limits)
        thread = threading.Thread(target=server.serve_forever, daemon=True,
                                  name=f"explore-hardening-server-{server.server_address[1]}")
        thread.start()
        servers.append((server, thread))
        return server, *server.server_address[:2]

    yield start
    for server, thread in servers:
        server.shutdown()
        server.server_close()
        thread.join(5)


def _ask(host: str, port: int, path: str) -> tuple[int | str, float]:
    """(status, or the exception's name, and the seconds it took) of one request on a connection of its own."""
    start = time.perf_counter()
    conn = http.client.HTTPConnection(host, port, timeout=CLIENT_TIMEOUT)
    try:
        conn.request("GET", path)
        reply = conn.getresponse()
        reply.read()
        return reply.status, time.perf_counter() - start
    except (OSError, http.client.HTTPException) as exc:
        return type(exc).__name__, time.perf_counter() - start
    finally:
        conn.close()


def _burst(host: str, port: int, *, threads: int, each: int) -> list[tuple[int | str, float]]:
    def client(k: int):
        return [_ask(host, port, CHEAP[(k * each + j) % len(CHEAP)]) for j in range(each)]

    with ThreadPoolExecutor(max_workers=threads) as pool:
        return [answer for answers in pool.map(client, range(threads)) for answer in answers]


def _closed_by_server(sock: socket.socket, within: float) -> bool:
    """Whether the server closes `sock` (end of file or a reset) within `within` seconds."""
    sock.settimeout(within)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


@pytest.mark.parametrize("threads, each", [(20, 10), (200, 1)])
def test_a_burst_of_200_requests_is_answered_in_full(served, capsys, threads, each):
    server, host, port = served()
    assert _ask(host, port, CHEAP[-1])[0] == 200  # the family computed once; the burst reads it cached
    start = time.perf_counter()
    answers = _burst(host, port, threads=threads, each=each)
    elapsed = time.perf_counter() - start
    answered = sum(1 for status, _ in answers if status == 200)
    longest = max(seconds for _, seconds in answers)
    with capsys.disabled():
        print(f"\nexplore burst, {threads} threads x {each}: {answered} of {len(answers)} answered 200, "
              f"longest wait {longest:.3f} s, all in {elapsed:.2f} s")
    assert answered == len(answers) == 200, sorted({str(s) for s, _ in answers})
    assert longest < 5, f"the longest wait was {longest:.1f} s"


def _server_threads(server) -> int:
    """Threads of `server`: its workers and waiting room, and the thread in its `serve_forever`."""
    return sum(1 for t in threading.enumerate() if t.name.startswith(server.thread_prefix)
               or t.name == f"explore-hardening-server-{server.server_address[1]}")


def test_half_open_connections_cost_no_thread_and_are_dropped(served, capsys):
    server, host, port = served(idle_seconds=3)
    started = _server_threads(server)
    assert started == server.workers + 2  # the workers, the waiting room, serve_forever
    most, sampling = [started], threading.Event()

    def sample():
        while not sampling.wait(0.01):
            most.append(_server_threads(server))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    half_open = [socket.create_connection((host, port), timeout=CLIENT_TIMEOUT) for _ in range(150)]
    try:
        deadline = time.monotonic() + 5
        while server.open_connections < 150 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert server.open_connections == 150
        answers = _burst(host, port, threads=10, each=2)  # answered while the 150 are open
        assert [s for s, _ in answers] == [200] * 20
        start = time.monotonic()
        assert all(_closed_by_server(s, within=8 - (time.monotonic() - start)) for s in half_open)
        dropped = time.monotonic() - start
    finally:
        sampling.set()
        sampler.join(5)
        for sock in half_open:
            sock.close()
    with capsys.disabled():
        print(f"\nexplore: 150 half-open connections: {started} server threads ({server.workers} workers), "
              f"{max(most)} at most with the 150 open and 20 requests answered; all dropped {dropped:.1f} s "
              "after (idle limit 3 s)")
    assert max(most) <= server.workers + 2
    assert _ask(host, port, "/")[0] == 200


def test_a_request_that_never_arrives_whole_is_dropped_and_others_are_answered(served):
    server, host, port = served(workers=2, read_seconds=1)
    slow = []
    for _ in range(6):  # three times the workers, each holding one for its second at most
        sock = socket.create_connection((host, port), timeout=CLIENT_TIMEOUT)
        sock.sendall(b"GET /api/options HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        slow.append(sock)
    try:
        status, seconds = _ask(host, port, "/")
        assert status == 200 and seconds < 5
        assert all(_closed_by_server(s, within=5) for s in slow)
    finally:
        for sock in slow:
            sock.close()


def test_kept_alive_connections_are_served_in_turn_and_wait_without_a_worker(served):
    server, host, port = served(workers=2)
    conns = [http.client.HTTPConnection(host, port, timeout=CLIENT_TIMEOUT) for _ in range(8)]
    try:
        for conn in conns:  # each asks twice on its connection, then sits idle holding it open
            for path in ("/", "/api/options"):
                conn.request("GET", path)
                reply = conn.getresponse()
                assert reply.status == 200 and reply.getheader("Connection") != "close"
                reply.read()
        status, seconds = _ask(host, port, "/explore.css")  # 8 idle connections, 2 workers: still answered
        assert status == 200 and seconds < 2
        conns[0].request("GET", "/chart.js")  # and an idle one is answered when it asks again
        assert conns[0].getresponse().status == 200
    finally:
        for conn in conns:
            conn.close()


def test_past_the_connection_limit_the_longest_waiting_is_closed(served):
    server, host, port = served(max_connections=20)
    idle = [socket.create_connection((host, port), timeout=CLIENT_TIMEOUT) for _ in range(40)]
    try:
        assert _ask(host, port, "/")[0] == 200
        assert server.open_connections <= 20
        assert _closed_by_server(idle[0], within=2)  # the first to wait is the first closed
    finally:
        for sock in idle:
            sock.close()


def test_the_pooled_server_keeps_its_refusals(served):
    server, host, port = served()
    conn = http.client.HTTPConnection(host, port, timeout=CLIENT_TIMEOUT)
    try:
        conn.request("GET", "/api/options", headers={"Host": "attacker.example", "Origin": "http://attacker.example"})
        reply = conn.getresponse()
        assert reply.status == 403 and "loopback" in json.loads(reply.read())["error"]
        assert "default-src 'none'" in reply.getheader("Content-Security-Policy")
        assert reply.getheader("Access-Control-Allow-Origin") is None
    finally:
        conn.close()
    for path in ("/../../etc/passwd", "/%2e%2e/%2e%2e/etc/passwd", "/static/../api.py", "//etc/passwd"):
        assert _ask(host, port, path)[0] == 404
    assert _ask(host, port, "/api/study?study=1")[0] == 400  # only the studies it was given


# ---- hardware= ------------------------------------------------------------------------------------


def _write_profile(path) -> None:
    """A small valid CPU profile at `path`, as `depthwidth hw measure` writes one."""
    from depthwidth.machine import HardwareProfile, save_profile

    save_profile(HardwareProfile(device="cpu", device_name="some cpu", threads=1, gemm=(),
                                 peak_flops={"fp32": 1e11, "bf16": 2e11}, copy_bandwidth=2e10, op_overhead_s=4e-6,
                                 op_overheads={}, mem_capacity=8e9, torch_version="2.0",
                                 created="2026-01-01T00:00:00+00:00"), path)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    folder.mkdir()
    monkeypatch.setenv("DEPTHWIDTH_CACHE", str(folder))
    monkeypatch.delenv("DEPTHWIDTH_HW_PROFILE", raising=False)
    return folder


def _family(explorer, hardware: str) -> dict:
    from depthwidth.explore import BadRequest

    try:
        return {"ok": explorer.family("params=1M&count=3&vocab=256&max_seq_len=128&hardware="
                                      + urllib.parse.quote(hardware))}
    except BadRequest as exc:
        return exc.to_dict()


def _whatever_is_there(path, kind: str) -> None:
    """Make `path` a `kind` of thing (it is missing beforehand)."""
    if kind == "folder":
        path.mkdir()
    elif kind == "named pipe":
        os.mkfifo(path)
    elif kind == "not JSON":
        path.write_text("root:$6$salt$hash:19000:0:99999:7:::\n")
    elif kind == "over 16 MiB":
        with open(path, "wb") as f:
            f.truncate(17 * 1024**2)
    elif kind == "wrong shape":
        path.write_text('{"device": "cpu"}')
    elif kind == "a good profile":
        _write_profile(path)
    elif kind == "unreadable":
        _write_profile(path)
        path.chmod(0)
    elif kind == "link to a profile":
        target = path.with_name("target.json")
        _write_profile(target)
        path.symlink_to(target)


KINDS = ("missing", "folder", "named pipe", "not JSON", "over 16 MiB", "wrong shape", "a good profile", "unreadable",
         "link to a profile")


@pytest.mark.parametrize("name", ["profile.json", "profile"])
def test_a_path_it_was_not_given_has_one_answer_whatever_is_there(explorer, cache, tmp_path, name):
    answers = {}
    for kind in KINDS:
        folder = tmp_path / kind.replace(" ", "-")
        folder.mkdir()
        path = folder / name
        _whatever_is_there(path, kind)
        answers[kind] = _family(explorer, str(path))
        answers[kind]["error"] = answers[kind]["error"].replace(str(folder), "FOLDER")
        answers[kind]["errors"] = {}
    assert all(a == answers["missing"] for a in answers.values()), answers
    assert answers["missing"]["field"] == "hardware" and answers["missing"]["error"].startswith(NOT_GIVEN + ": ")


@pytest.mark.parametrize("hardware", ["/etc/shadow", "/etc/passwd", "../../../../../../etc/passwd", "~/.bashrc",
                                      "/dev/zero", "/proc/self/environ", "h9000", "h100.json", " ", "cache/../x.json"])
def test_other_paths_and_unknown_names_are_the_same_line(explorer, cache, hardware):
    answer = _family(explorer, hardware)
    if hardware.strip():
        assert answer["error"].startswith(NOT_GIVEN + ": ") and answer["field"] == "hardware", answer
        assert "\n" not in answer["error"] and len(answer["error"]) < 400
    else:
        assert "ok" in answer  # an empty value is the command's default


def test_a_link_in_the_cache_folder_to_a_file_outside_it_is_refused(explorer, cache, tmp_path):
    outside = tmp_path / "outside.json"
    _write_profile(outside)
    (cache / "sneaky.json").symlink_to(outside)
    (cache / "shadow.json").symlink_to("/etc/shadow")
    assert _family(explorer, str(cache / "sneaky.json"))["error"].startswith(NOT_GIVEN)
    assert _family(explorer, str(cache / "shadow.json"))["error"].startswith(NOT_GIVEN)


def test_a_profile_in_the_cache_folder_is_read(explorer, cache):
    _write_profile(cache / "measured-elsewhere.json")
    answer = _family(explorer, str(cache / "measured-elsewhere.json"))["ok"]
    assert answer["plan"]["hardware"]["name"] == "measured-cpu"
    assert f"--hardware {os.path.realpath(cache / 'measured-elsewhere.json')}" in answer["commands"]["plan"]
    (cache / "broken.json").write_text("{not json")  # the cache folder's own file: the command's own line
    assert _family(explorer, str(cache / "broken.json"))["error"].startswith("depthwidth plan: error: --hardware: ")


def test_a_profile_named_on_the_command_line_is_read(explorer, cache, tmp_path):
    from depthwidth.explore import Explorer

    given = tmp_path / "other-machine.json"
    _write_profile(given)
    assert _family(explorer, str(given))["error"].startswith(NOT_GIVEN)
    with_it = Explorer(explorer.commands, studies=explorer.studies, profiles=[str(given)])
    assert _family(with_it, str(given))["ok"]["plan"]["hardware"]["name"] == "measured-cpu"
    assert _family(with_it, str(tmp_path / "./other-machine.json"))["ok"]  # the same file, written otherwise
    assert _family(with_it, str(tmp_path / "another.json"))["error"].startswith(NOT_GIVEN)


def test_rows_measured_and_study(explorer, cache):
    assert _family(explorer, "H100")["ok"]["plan"]["hardware"]["name"] == "h100-sxm"
    measured = _family(explorer, "measured")  # no profile of this machine in the test's cache: plan's own line
    assert measured["error"].startswith("depthwidth plan: error: --hardware measured: no measured profile")
    assert "hardware=study" in _family(explorer, "study")["error"]
    study = explorer.study("study=0&params=50M&hardware=study&bootstrap=0&splits=2")
    assert "--hardware study" in study["commands"]["recommend"]


def test_explore_refuses_a_profile_it_cannot_read_in_one_line(cli_error, tmp_path):
    assert "a hardware name, not a profile file" in cli_error(["explore", "--profile", "h100"])
    assert "no hardware profile at" in cli_error(["explore", "--profile", str(tmp_path / "none.json")])
    (tmp_path / "bad.json").write_text("[]")
    assert cli_error(["explore", "--profile", str(tmp_path / "bad.json")]).startswith(
        "depthwidth explore: error: --profile: ")


def test_explore_hands_its_profiles_to_the_page(cli_error, cache, tmp_path, monkeypatch):
    import errno

    import depthwidth.explore

    given = tmp_path / "other-machine.json"
    _write_profile(given)
    made = {}

    def make_server(explorer, **_):
        made["explorer"] = explorer
        raise OSError(errno.EADDRINUSE, "in use")

    monkeypatch.setattr(depthwidth.explore, "make_server", make_server)
    assert "already in use" in cli_error(["explore", "--profile", str(given), "--port", "9"])
    assert made["explorer"].hardware(str(given)) == os.path.realpath(given)
