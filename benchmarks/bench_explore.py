"""Latency of the explorer's JSON API for a family of 7 shapes, wall clock over loopback HTTP.

The explorer (`depthwidth explore`'s server, the command line's own commands) is served in this process on a
free loopback port; a client asks `/api/family` for 7-member iso-parameter families:

- cold: every request a different budget (124M, 125M, ...), so each one is computed - `plan` of the family,
  `calc` of each member, the table, the verdicts against a decode limit;
- cached: the same view asked again (the page does so when a pin or the y axis changes).

Median and 90th percentile of each are printed. Target: cold median under 250 ms, so the page answers a
changed input faster than a user types the next one. Exit status 1 when the target is missed.

    python benchmarks/bench_explore.py [--requests 50]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
import urllib.request

TARGET_S = 0.25


def ask(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=60) as reply:
        assert reply.status == 200, reply.status
        return json.loads(reply.read())


def timed(urls: list[str]) -> list[float]:
    out = []
    for url in urls:
        start = time.perf_counter()
        body = ask(url)
        out.append(time.perf_counter() - start)
        assert len(body["plan"]["members"]) == 7, len(body["plan"]["members"])
    return out


def p90(values: list[float]) -> float:
    return statistics.quantiles(values, n=10, method="inclusive")[-1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=50, help="requests of each kind (default 50)")
    args = parser.parse_args()

    from depthwidth.cli.explore import CliCommands
    from depthwidth.explore import Explorer, make_server

    server = make_server(Explorer(CliCommands()), host="127.0.0.1", port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = server.url + "api/family?count=7&max_decode_ms=1.5&params="
    try:
        ask(base + "350M")  # imports and first-call costs, not part of the numbers
        cold = timed([f"{base}{124 + i}M" for i in range(args.requests)])
        cached = timed([f"{base}124M"] * args.requests)
    finally:
        server.shutdown()
        server.server_close()
    print(f"GET /api/family, a family of 7 shapes ({args.requests} requests each, wall clock, loopback HTTP)")
    print(f"{'':8}  median ms   p90 ms   min ms   max ms")
    for name, values in (("cold", cold), ("cached", cached)):
        print(f"{name:8}  {statistics.median(values) * 1e3:9.1f} {p90(values) * 1e3:8.1f} {min(values) * 1e3:8.1f} "
              f"{max(values) * 1e3:8.1f}")
    median = statistics.median(cold)
    verdict = "met" if median < TARGET_S else "MISSED"
    print(f"cold median {median * 1e3:.1f} ms (target < {TARGET_S * 1e3:.0f} ms: {verdict})")
    return 0 if median < TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
