"""Slow and confused clients, over real sockets: the header deadline, and plain HTTP sent to the TLS port.

The deadline is shortened to HEADER_DEADLINE here so the tests take seconds; the exporter's is 10 s.
"""

from __future__ import annotations

import http.client
import ipaddress
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from cryptography import x509
from mssql_memory_exporter.web import HEADER_TIMEOUT_SECONDS, ExporterHTTPServer, make_server
from mssql_memory_exporter.webconfig import WebConfigSource

from tests.integration.test_web import PASSWORD_ENV, FakeProbe, make_config
from tests.integration.test_webconfig import TLS_YAML, issue, make_ca, write_pair

HEADER_DEADLINE = 1.0
# How late the cut may come: the server thread has to wake up on a loaded two-core machine.
MARGIN = 1.5
# A slowloris sends this often; each byte would have restarted a plain socket timeout.
TRICKLE_EVERY = 0.1


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("tls")
    ca = make_ca("hardening test CA")
    local = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    write_pair(directory, "server", issue(ca, "exporter", local))
    (directory / "ca.crt").write_bytes(ca.cert_pem)
    (directory / "web.yml").write_text(TLS_YAML)
    return directory


@pytest.fixture
def serve(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., ExporterHTTPServer]]:
    monkeypatch.setenv(PASSWORD_ENV, "pw")
    servers: list[ExporterHTTPServer] = []

    def _serve(web_config: Path | None = None) -> ExporterHTTPServer:
        web = WebConfigSource(str(web_config)) if web_config is not None else None
        server = make_server(make_config(), FakeProbe(), "127.0.0.1:0", web=web)
        server.header_timeout = HEADER_DEADLINE
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        servers.append(server)
        return server

    yield _serve
    for server in servers:
        server.shutdown()
        server.server_close()


def port_of(server: ExporterHTTPServer) -> int:
    return int(server.server_address[1])


class Trickler:
    """A slowloris: sends `data` one byte every TRICKLE_EVERY seconds, then header lines for ever, and
    records when the server closed the connection."""

    def __init__(self, sock: socket.socket, data: bytes) -> None:
        self.sock = sock
        self.data = data
        self.stop = threading.Event()
        self.send_failed_at: float | None = None
        self.thread = threading.Thread(target=self._send, daemon=True)

    def start(self) -> Trickler:
        self.thread.start()
        return self

    def _send(self) -> None:
        pending = self.data
        while not self.stop.is_set():
            if not pending:
                pending = b"X-Slow: 1\r\n"
            try:
                self.sock.send(pending[:1])
            except OSError:
                self.send_failed_at = time.monotonic()
                return  # closed by the server (or by the test)
            pending = pending[1:]
            self.stop.wait(TRICKLE_EVERY)

    def seconds_until_closed(self, started: float, give_up: float) -> float | None:
        """Seconds from `started` until the server closed the connection, or None if it never did."""
        self.sock.settimeout(give_up)
        try:
            while self.sock.recv(4096):
                pass  # the server answers nothing to a request it never received; keep waiting for EOF
        except (ConnectionResetError, BrokenPipeError):
            pass
        except TimeoutError:
            return None
        finally:
            self.stop.set()
        return time.monotonic() - started


def get(port: int, path: str = "/metrics", context: ssl.SSLContext | None = None) -> int:
    conn: http.client.HTTPConnection
    if context is None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    else:
        conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=5)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


def test_the_default_deadline_is_ten_seconds():
    assert HEADER_TIMEOUT_SECONDS == 10.0 and ExporterHTTPServer.header_timeout == 10.0


def test_a_client_trickling_header_bytes_is_cut_at_the_deadline_and_others_are_served(serve):
    server = serve()
    started = time.monotonic()
    sock = socket.create_connection(("127.0.0.1", port_of(server)))
    with sock:
        trickler = Trickler(sock, b"GET /metrics HTTP/1.1\r\nHost: x\r\n").start()
        # Scrapes while the slow client is connected: none waits for it.
        for _ in range(3):
            before = time.monotonic()
            assert get(port_of(server)) == 200
            assert time.monotonic() - before < 0.5
        closed_after = trickler.seconds_until_closed(started, give_up=HEADER_DEADLINE + 5)
    assert closed_after is not None, "the trickling client was never disconnected"
    assert HEADER_DEADLINE - 0.05 <= closed_after <= HEADER_DEADLINE + MARGIN, closed_after


def test_a_connection_that_sends_nothing_is_closed_at_the_deadline(serve):
    server = serve()
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port_of(server))) as sock:
        closed_after = Trickler(sock, b"").seconds_until_closed(started, give_up=HEADER_DEADLINE + 5)
    assert closed_after is not None and closed_after <= HEADER_DEADLINE + MARGIN, closed_after


def test_keep_alive_idle_is_not_the_header_deadline_and_each_request_gets_its_own(serve):
    server = serve()
    conn = http.client.HTTPConnection("127.0.0.1", port_of(server), timeout=10)
    try:
        conn.request("GET", "/-/healthy")
        assert conn.getresponse().read() == b"OK\n"
        time.sleep(HEADER_DEADLINE * 1.5)  # idle longer than the header deadline: still open
        conn.request("GET", "/-/healthy")
        assert conn.getresponse().read() == b"OK\n"
        # The third request on the same connection trickles: cut one deadline after its first byte.
        time.sleep(HEADER_DEADLINE * 1.5)
        assert conn.sock is not None
        started = time.monotonic()
        trickler = Trickler(conn.sock, b"GET /-/healthy HTTP/1.1\r\n").start()
        closed_after = trickler.seconds_until_closed(started, give_up=HEADER_DEADLINE + 5)
    finally:
        conn.close()
    assert closed_after is not None and HEADER_DEADLINE - 0.05 <= closed_after <= HEADER_DEADLINE + MARGIN


def test_a_request_that_arrives_whole_is_not_limited_by_the_deadline(serve):
    """The deadline covers receiving the headers only: a probe may take longer than it to answer."""
    server = serve()
    with socket.create_connection(("127.0.0.1", port_of(server)), timeout=10) as sock:
        time.sleep(HEADER_DEADLINE * 0.5)
        sock.sendall(b"GET /-/healthy HTTP/1.1\r\nHost: x\r\n\r\n")
        assert sock.recv(4096).startswith(b"HTTP/1.1 200 ")


# --- plain HTTP to the TLS port -------------------------------------------------------------------------


def test_plain_http_to_the_tls_port_gets_400_saying_so(serve, tls_files: Path):
    server = serve(tls_files / "web.yml")
    with socket.create_connection(("127.0.0.1", port_of(server)), timeout=10) as sock:
        sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: Prometheus/2.53\r\n\r\n")
        answer = b""
        while chunk := sock.recv(4096):  # the server closes after its answer
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    assert lines[0] == "HTTP/1.0 400 Bad Request"
    assert "Connection: close" in lines and "X-Content-Type-Options: nosniff" in lines
    assert body == b"Client sent an HTTP request to an HTTPS server.\n"
    assert f"Content-Length: {len(body)}" in lines
    # Through an HTTP client, and TLS clients are still served.
    context = ssl.create_default_context(cafile=str(tls_files / "ca.crt"))
    assert get(port_of(server), context=context) == 200
    assert get(port_of(server)) == 400
    assert get(port_of(server), context=context) == 200


def test_a_silent_client_on_the_tls_port_is_closed_at_the_header_deadline(serve, tls_files: Path):
    server = serve(tls_files / "web.yml")
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port_of(server))) as sock:
        closed_after = Trickler(sock, b"").seconds_until_closed(started, give_up=HEADER_DEADLINE + 15)
    assert closed_after is not None and closed_after <= HEADER_DEADLINE + MARGIN, closed_after


def test_a_tls_client_trickling_headers_is_cut_too(serve, tls_files: Path):
    server = serve(tls_files / "web.yml")
    context = ssl.create_default_context(cafile=str(tls_files / "ca.crt"))
    raw = socket.create_connection(("127.0.0.1", port_of(server)), timeout=10)
    with context.wrap_socket(raw, server_hostname="127.0.0.1") as sock:
        started = time.monotonic()
        # One TLS socket must not be read and written from two threads at once: the trickler alone uses
        # it and sees the close as a failed send (the peer's reset answers the first byte after it).
        trickler = Trickler(sock, b"GET /metrics HTTP/1.1\r\n").start()
        assert get(port_of(server), context=context) == 200
        trickler.thread.join(timeout=HEADER_DEADLINE + 5)
        trickler.stop.set()
    assert trickler.send_failed_at is not None, "the trickling TLS client was never disconnected"
    closed_after = trickler.send_failed_at - started
    assert closed_after <= HEADER_DEADLINE + MARGIN + 2 * TRICKLE_EVERY, closed_after


def test_many_slow_clients_hold_no_threads_and_scrapes_go_on(serve):
    """A hundred clients with half a request each (what a slowloris keeps open): each holds a file
    descriptor in the connection loop, no thread, and a scrape is answered at once meanwhile."""
    server = serve()
    before = threading.active_count()
    socks = []
    try:
        for i in range(100):
            sock = socket.create_connection(("127.0.0.1", port_of(server)), timeout=10)
            sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow-%d: " % i)
            socks.append(sock)
        time.sleep(0.3)
        assert threading.active_count() - before <= 2  # the loop, at most one worker from before
        started = time.monotonic()
        assert get(port_of(server)) == 200
        assert time.monotonic() - started < 2
    finally:
        for sock in socks:
            sock.close()
