"""HTTP as the exporter speaks it, over raw sockets where the edge matters (issue 25): the header limits
and the documented semantics, HTTP/0.9 and HTTP/2 request lines, gzip, HEAD of a scrape, /-/ready."""

# ruff: noqa: F811  (the start fixture is imported from test_web; pytest injects it by name)

from __future__ import annotations

import gzip
import http.client
import socket
import threading
import time
import urllib.request
from collections.abc import Callable

import pytest
from mssql_memory_exporter.web import MAX_HEADER_BYTES, make_server
from mssql_memory_exporter.web.requests import MAX_HEADER_LINES, accepts_gzip

from tests.integration.test_web import (  # noqa: F401  (start: the fixture `running` builds on)
    PASSWORD_ENV,
    TEXT_0_0_4,
    FakeProbe,
    Running,
    make_config,
    start,
)


def exchange(running: Running, data: bytes) -> bytes:
    """Sends `data` and reads until the server closes (each request here ends the connection)."""
    with socket.create_connection(running.server.server_address[:2], timeout=10) as sock:
        sock.sendall(data)
        answer = b""
        try:
            while chunk := sock.recv(65536):
                answer += chunk
        except ConnectionResetError:
            pass
    return answer


def status_line(answer: bytes) -> bytes:
    return answer.split(b"\r\n", 1)[0]


def body_of(answer: bytes) -> bytes:
    return answer.partition(b"\r\n\r\n")[2]


def request_with(lines: list[bytes]) -> bytes:
    """GET /-/healthy with these header lines and a last one, `Connection: close`."""
    return REQUEST_LINE + b"".join(line + b"\r\n" for line in [*lines, b"Connection: close"]) + b"\r\n"


REQUEST_LINE = b"GET /-/healthy HTTP/1.1\r\n"


# --- header limits: 100 lines and 16 KiB, as docs/security.md says -------------------------------------


def test_a_hundred_header_lines_are_served_and_one_more_is_431(running: Running):
    # Host and Connection count: 98 fillers make exactly 100 lines.
    fillers = [b"X-Filler-%d: 1" % i for i in range(MAX_HEADER_LINES - 2)]
    answer = exchange(running, request_with([b"Host: x", *fillers]))
    assert status_line(answer) == b"HTTP/1.1 200 OK", answer[:200]
    answer = exchange(running, request_with([b"Host: x", *fillers, b"X-One-More: 1"]))
    assert status_line(answer) == b"HTTP/1.1 431 Request Header Fields Too Large"
    assert body_of(answer) == b"431 more than 100 header lines\n"


def test_a_header_section_of_exactly_16_kib_is_served_and_one_byte_more_is_431(running: Running):
    # Counted: every header line with its CRLF, not the request line, not the final empty line.
    fixed = [b"Host: x", b"Connection: close"]
    used = sum(len(line) + 2 for line in fixed)
    filler_lines = 20
    per_line = (MAX_HEADER_BYTES - used) // filler_lines
    fillers = [b"X-F%02d: " % i + b"a" * (per_line - 9) for i in range(filler_lines)]
    fillers[-1] += b"a" * (MAX_HEADER_BYTES - used - per_line * filler_lines)
    data = request_with([fixed[0], *fillers])
    assert len(data) - len(REQUEST_LINE) - 2 == MAX_HEADER_BYTES
    assert status_line(exchange(running, data)) == b"HTTP/1.1 200 OK"
    fillers[-1] += b"a"
    answer = exchange(running, request_with([fixed[0], *fillers]))
    assert status_line(answer) == b"HTTP/1.1 431 Request Header Fields Too Large"
    assert body_of(answer) == b"431 header section over 16384 bytes\n"


def test_many_short_header_lines_over_16_kib_name_the_section_not_a_long_line(running: Running):
    fillers = [b"X-%02d: " % i + b"b" * 200 for i in range(90)]  # 90 lines of ~207 bytes: 18.6 KB
    answer = exchange(running, request_with([b"Host: x", *fillers]))
    assert status_line(answer) == b"HTTP/1.1 431 Request Header Fields Too Large"
    assert b"header section over 16384 bytes" in body_of(answer)
    assert b"Line too long" not in answer


# --- request lines: HTTP/0.9 refused, every error with a status line --------------------------------------


@pytest.mark.parametrize(
    ("request_line", "status", "says"),
    [
        (b"GET /-/healthy", b"400", b"HTTP/0.9 requests are not served"),
        (b"GET /metrics", b"400", b"HTTP/0.9 requests are not served"),
        (b"GET /-/healthy HTTP/0.9", b"505", b"HTTP version 0.9 is not supported"),
        (b"GET /-/healthy HTTP/2.0", b"505", b"HTTP version 2.0 is not supported"),
        (b"GET /-/healthy HTTP/3.0", b"505", b"HTTP version 3.0 is not supported"),
        (b"GET /-/healthy HTTP/1.x", b"400", b"Bad request version"),
        (b"GET /-/healthy FTP/1.1", b"400", b"Bad request version"),
        (b"GET / HTTP/1.1 extra", b"400", b"Bad request version ('extra')"),
        (b"JUNK", b"400", b"Bad request syntax"),
    ],
)
def test_refused_request_lines_get_a_status_line(
    running: Running, request_line: bytes, status: bytes, says: bytes
):
    answer = exchange(running, request_line + b"\r\n\r\n")
    assert status_line(answer).startswith(b"HTTP/1.1 " + status + b" "), answer[:200]
    assert says in body_of(answer), answer
    assert b"Connection: close" in answer
    assert b"X-Content-Type-Options: nosniff" in answer
    assert running.probe.calls == []


def test_an_http_0_9_request_is_answered_without_waiting_for_headers(running: Running):
    """HTTP/0.9 sends no headers and waits: it is refused at once, not at the header deadline."""
    with socket.create_connection(running.server.server_address[:2], timeout=5) as sock:
        sock.sendall(b"GET /-/healthy\r\n")
        started = time.monotonic()
        assert sock.recv(4096).startswith(b"HTTP/1.1 400 ")
        assert time.monotonic() - started < 3


def test_http_1_0_is_served(running: Running):
    answer = exchange(running, b"GET /-/healthy HTTP/1.0\r\n\r\n")
    assert status_line(answer) == b"HTTP/1.1 200 OK" and body_of(answer) == b"OK\n"


def test_pipelined_requests_are_answered_in_order(running: Running):
    first = b"GET /-/healthy HTTP/1.1\r\nHost: x\r\n\r\n"
    answer = exchange(running, first + b"GET /nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert answer.count(b"HTTP/1.1 ") == 2
    assert answer.index(b"HTTP/1.1 200 ") < answer.index(b"HTTP/1.1 404 ")


# --- gzip ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (None, False),
        ("", False),
        ("gzip", True),
        ("gzip, deflate", True),  # what Prometheus sends, give or take
        ("deflate, GZIP;q=0.5", True),
        ("gzip;q=0", False),
        ("gzip; q=0.0, *", False),
        ("*", True),
        ("*;q=0", False),
        ("identity", False),
        ("x-gzip", True),
        ("gzip;q=abc", False),
    ],
)
def test_accepts_gzip(header: str | None, expected: bool):
    assert accepts_gzip(header) is expected


def big_probe(running: Running) -> None:
    """The fake probe answers a few hundred bytes; make it the size of a real target (~37 kB)."""
    from prometheus_client.core import GaugeMetricFamily

    real = running.probe.__call__

    def larger(target, timeout):
        families = real(target, timeout)
        wide = GaugeMetricFamily("mssql_fake_series", "Fake.", labels=["n"])
        for n in range(600):
            wide.add_metric([f"series-{n}"], n)
        return [*families, wide]

    running.server.probe = larger


def test_gzip_when_the_scraper_accepts_it(running: Running):
    big_probe(running)
    url = running.base + "/probe?target=prod-a"
    with urllib.request.urlopen(url, timeout=10) as plain:
        plain_body = plain.read()
        assert plain.headers["Content-Encoding"] is None
        assert plain.headers["Vary"] == "Accept-Encoding"
    request = urllib.request.Request(url, headers={"Accept-Encoding": "gzip"})
    with urllib.request.urlopen(request, timeout=10) as packed:
        assert packed.headers["Content-Encoding"] == "gzip"
        assert packed.headers["Vary"] == "Accept-Encoding"
        assert packed.headers["Content-Type"] == TEXT_0_0_4
        raw = packed.read()
        assert int(packed.headers["Content-Length"]) == len(raw)
    assert gzip.decompress(raw) == plain_body
    assert len(raw) * 4 < len(plain_body), (len(raw), len(plain_body))


def test_gzip_on_a_kept_alive_connection_and_not_for_small_or_plain_answers(running: Running):
    big_probe(running)
    conn = http.client.HTTPConnection(*running.server.server_address[:2], timeout=10)
    try:
        for path, encoded in (("/probe?target=prod-a", True), ("/-/healthy", False), ("/nope", False)) * 2:
            conn.request("GET", path, headers={"Accept-Encoding": "gzip"})
            response = conn.getresponse()
            body = response.read()
            assert (response.headers["Content-Encoding"] == "gzip") is encoded, path
            if encoded:
                assert gzip.decompress(body).startswith(b"# HELP")
    finally:
        conn.close()


# --- HEAD of a scrape ----------------------------------------------------------------------------------


def test_head_of_probe_and_metrics_runs_no_scrape(running: Running):
    conn = http.client.HTTPConnection(*running.server.server_address[:2], timeout=10)
    try:
        for path in ("/probe?target=prod-a", "/metrics", "/probe?target=prod-b"):
            conn.request("HEAD", path, headers={"Accept-Encoding": "gzip"})
            response = conn.getresponse()
            assert response.status == 200 and response.read() == b""
            assert response.headers["Content-Type"] == TEXT_0_0_4
            assert response.headers["Content-Length"] is None  # the body was never made
        # The query is checked all the same, and the connection is still good for a GET.
        conn.request("HEAD", "/probe?target=nope")
        refused = conn.getresponse()
        assert (refused.status, refused.read()) == (400, b"")
        conn.request("GET", "/probe?target=prod-a")
        assert b"mssql_up" in conn.getresponse().read()
    finally:
        conn.close()
    assert running.probe.calls == [("prod-a", 10.0)]  # the GET only


# --- /-/ready ------------------------------------------------------------------------------------------


def get_status(port: int, path: str) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def test_ready_once_serving(running: Running):
    port = running.server.server_address[1]
    assert get_status(port, "/-/ready") == (200, b"OK\n")
    assert get_status(port, "/-/healthy") == (200, b"OK\n")


def test_not_ready_before_serving_and_from_the_start_of_shutdown(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(PASSWORD_ENV, "pw")
    server = make_server(make_config(), FakeProbe(), "127.0.0.1:0")
    port = server.server_address[1]
    try:
        # Before serve_forever: one request taken by hand (socketserver's handle_request).
        answers: list[tuple[int, bytes]] = []
        client = threading.Thread(target=lambda: answers.append(get_status(port, "/-/ready")))
        client.start()
        server.handle_request()
        client.join(10)
        assert answers == [(503, b"not ready: starting or stopping\n")]
        # Serving: ready. Then a connection accepted before shutdown() is answered after it: not ready,
        # while the process is still alive (healthy).
        serving = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        serving.start()
        assert get_status(port, "/-/ready")[0] == 200
        # A scraper's kept-alive connection, answered once while serving, asks again after shutdown().
        late = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        late.request("GET", "/-/ready")
        response = late.getresponse()
        assert (response.status, response.read()) == (200, b"OK\n")
        server.shutdown()
        serving.join(10)
        try:
            late.request("GET", "/-/ready")
            response = late.getresponse()
            answer = (response.status, response.read())
            late.request("GET", "/-/healthy")
            response = late.getresponse()
            alive = (response.status, response.read())
        finally:
            late.close()
        assert answer == (503, b"not ready: starting or stopping\n")
        assert alive == (200, b"OK\n")
    finally:
        server.server_close()


@pytest.fixture
def running(start: Callable[..., Running]) -> Running:
    return start()
