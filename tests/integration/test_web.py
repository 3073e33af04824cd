"""The HTTP layer against a real server on 127.0.0.1, with a fake probe function."""

from __future__ import annotations

import http.client
import logging
import re
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import prometheus_client
import prometheus_client.exposition
import pytest
from mssql_memory_exporter.config import ExporterConfig, TargetConfig, parse_config
from mssql_memory_exporter.web import (
    DEFAULT_TIMEOUT_SECONDS,
    ExporterHTTPServer,
    make_server,
    parse_listen_address,
    scrape_timeout,
)
from mssql_memory_exporter.web import handler as web_handler
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families

PASSWORD_ENV = "MSSQL_EXPORTER_TEST_PASSWORD"
# The text format the exporter writes (exposition.py), whatever prometheus_client would announce.
TEXT_0_0_4 = "text/plain; version=0.0.4; charset=utf-8"


@dataclass
class FakeProbe:
    """Records every call; answers one family naming the target, or raises when told to."""

    calls: list[tuple[str, float]] = field(default_factory=list)
    fail_for: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, target: TargetConfig, timeout: float) -> list[Metric]:
        with self.lock:
            self.calls.append((target.name, timeout))
        if target.name in self.fail_for:
            raise RuntimeError("probe bug")
        family = GaugeMetricFamily("mssql_up", "Fake.", labels=["env"])
        family.add_metric([target.labels.get("env", "")], 1.0)
        other = GaugeMetricFamily("mssql_fake_target_info", "Fake.", labels=["name"])
        other.add_metric([target.name], 1.0)
        return [family, other]


def make_config(default_target: str | None = "prod-a") -> ExporterConfig:
    data: dict = {
        "auth_modules": {"m": {"username": "u", "password_env": PASSWORD_ENV}},
        "targets": {
            "prod-a": {"host": "a.example.com", "auth_module": "m", "labels": {"env": "prod"}},
            "prod-b": {"host": "b.example.com", "auth_module": "m"},
        },
    }
    if default_target:
        data["default_target"] = default_target
    return parse_config(data)


@dataclass
class Running:
    server: ExporterHTTPServer
    probe: FakeProbe

    @property
    def base(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"


@pytest.fixture
def start(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., Running]]:
    monkeypatch.setenv(PASSWORD_ENV, "pw")
    servers: list[ExporterHTTPServer] = []

    def _start(config: ExporterConfig | None = None, listen: str = "127.0.0.1:0") -> Running:
        probe = FakeProbe()
        server = make_server(config or make_config(), probe, listen)
        # A short poll interval only makes shutdown() at the end of each test quicker.
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        servers.append(server)
        return Running(server, probe)

    yield _start
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture
def running(start: Callable[..., Running]) -> Running:
    return start()


@dataclass
class Reply:
    status: int
    headers: http.client.HTTPMessage
    body: str


def fetch(url: str, method: str = "GET", headers: dict[str, str] | None = None) -> Reply:
    request = urllib.request.Request(url, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return Reply(response.status, response.headers, response.read().decode())
    except urllib.error.HTTPError as err:
        with err:
            return Reply(err.code, err.headers, err.read().decode())


# --- /probe --------------------------------------------------------------------------------------------


def test_probe_returns_the_probe_families(running: Running):
    reply = fetch(running.base + "/probe?target=prod-a")
    assert reply.status == 200
    assert reply.headers["Content-Type"] == TEXT_0_0_4
    assert 'mssql_up{env="prod"} 1.0' in reply.body
    assert 'mssql_fake_target_info{name="prod-a"} 1.0' in reply.body
    assert "process_" not in reply.body  # /probe is the target only
    assert running.probe.calls == [("prod-a", DEFAULT_TIMEOUT_SECONDS)]


@pytest.mark.parametrize(
    "library_announces",
    [
        "text/plain; version=1.0.0; charset=utf-8",  # prometheus_client 0.26's CONTENT_TYPE_LATEST
        "text/plain; version=0.0.4; charset=utf-8",  # older releases'
        "text/plain; version=9.9.9; charset=utf-8",  # whatever a later one may say
    ],
)
def test_content_type_names_the_format_written_whatever_the_library_announces(
    start: Callable[..., Running], monkeypatch: pytest.MonkeyPatch, library_announces: str
):
    monkeypatch.setattr(prometheus_client, "CONTENT_TYPE_LATEST", library_announces)
    monkeypatch.setattr(prometheus_client.exposition, "CONTENT_TYPE_LATEST", library_announces)
    monkeypatch.setattr(web_handler, "CONTENT_TYPE_LATEST", library_announces, raising=False)
    running = start()
    for path in ("/metrics", "/probe?target=prod-a"):
        reply = fetch(running.base + path)
        assert reply.headers["Content-Type"] == TEXT_0_0_4, path
        # ... and the body is that format: the 0.0.4 parser reads all of it, and no name is quoted
        # (1.0.0's form for UTF-8 names).
        assert len(list(text_string_to_metric_families(reply.body))) >= 2
        assert '{"' not in reply.body


def test_probe_target_with_url_escapes(start: Callable[..., Running]):
    data = {
        "auth_modules": {"m": {"username": "u", "password_env": PASSWORD_ENV}},
        "targets": {"sql:1433": {"host": "h", "auth_module": "m"}},
    }
    srv = start(parse_config(data))
    assert fetch(srv.base + "/probe?target=sql%3A1433").status == 200
    assert srv.probe.calls[0][0] == "sql:1433"


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("", "missing query parameter 'target'"),
        ("target=", "query parameter 'target' is empty"),
        ("target=prod-a&target=prod-b", "given 2 times"),
        ("target=nope", "unknown target 'nope'"),
        ("target=db.internal.example.com", "unknown target"),
        ("target=" + "a" * 129, "longer than 128 characters"),
        ("target=prod-a&module=x", "unknown query parameter 'module'"),
        ("target=prod-a&&", "malformed query string"),
        ("target", "malformed query string"),
    ],
)
def test_probe_bad_requests(running: Running, query: str, message: str):
    reply = fetch(running.base + "/probe?" + query)
    assert reply.status == 400
    assert reply.headers["Content-Type"] == "text/plain; charset=utf-8"
    assert message in reply.body
    assert running.probe.calls == []  # never a connection to anything not configured


def test_unknown_target_is_not_echoed_when_long(running: Running):
    reply = fetch(running.base + "/probe?target=" + "x" * 5000)
    assert reply.status == 400
    assert "x" * 129 not in reply.body


# --- /metrics ------------------------------------------------------------------------------------------


def test_metrics_has_process_metrics_and_the_default_target(running: Running):
    reply = fetch(running.base + "/metrics")
    assert reply.status == 200
    names = {family.name for family in text_string_to_metric_families(reply.body)}
    assert {"python_info", "python_gc_objects_collected"} <= names
    assert any(name.startswith("process_") for name in names)
    assert {"mssql_up", "mssql_fake_target_info"} <= names
    assert running.probe.calls == [("prod-a", DEFAULT_TIMEOUT_SECONDS)]


def test_metrics_without_default_target(start: Callable[..., Running]):
    srv = start(make_config(default_target=None))
    reply = fetch(srv.base + "/metrics")
    assert reply.status == 200
    assert "process_" in reply.body
    assert "mssql_up" not in reply.body and "mssql_fake" not in reply.body  # no target's series
    assert srv.probe.calls == []


def test_metrics_refuses_query_parameters(running: Running):
    reply = fetch(running.base + "/metrics?target=prod-b")
    assert reply.status == 400
    assert "unknown query parameter 'target'" in reply.body
    assert running.probe.calls == []


def test_each_scrape_is_a_fresh_registry(running: Running):
    first = fetch(running.base + "/probe?target=prod-a").body
    second = fetch(running.base + "/probe?target=prod-b").body
    assert 'name="prod-a"' in first
    assert 'name="prod-b"' in second and 'name="prod-a"' not in second


def test_exposition_has_no_timestamps(running: Running):
    for path in ("/metrics", "/probe?target=prod-a"):
        body = fetch(running.base + path).body
        for family in text_string_to_metric_families(body):
            for sample in family.samples:
                assert sample.timestamp is None, sample
        for line in body.splitlines():
            if line and not line.startswith("#"):
                # `name{labels} value` and nothing after the value (a timestamp would be a third field)
                assert len(re.sub(r"\{.*\}", "", line).split()) == 2, line


# --- timeout -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (None, 10.0),
        ("15", 14.5),
        ("10.5", 10.0),
        ("0.7", 0.5),
        ("0.2", 0.5),
        ("500", 120.0),
        ("120.5", 120.0),
        ("abc", 10.0),
        ("", 10.0),
        ("-3", 10.0),
        ("0", 10.0),
        ("nan", 10.0),
        ("inf", 10.0),
    ],
)
def test_scrape_timeout(header: str | None, expected: float):
    assert scrape_timeout(header) == pytest.approx(expected)


def test_timeout_header_is_passed_to_the_probe(running: Running):
    headers = {"X-Prometheus-Scrape-Timeout-Seconds": "15"}
    assert fetch(running.base + "/probe?target=prod-b", headers=headers).status == 200
    assert fetch(running.base + "/metrics", headers=headers).status == 200
    assert running.probe.calls == [("prod-b", 14.5), ("prod-a", 14.5)]


# --- failures ------------------------------------------------------------------------------------------


def test_raising_probe_gives_500_and_the_server_keeps_serving(
    running: Running, caplog: pytest.LogCaptureFixture
):
    running.probe.fail_for.add("prod-b")
    with caplog.at_level(logging.ERROR, logger="mssql_memory_exporter.web"):
        reply = fetch(running.base + "/probe?target=prod-b")
    assert reply.status == 500
    assert "probe bug" not in reply.body
    failed = [r for r in caplog.records if r.getMessage() == "probe failed"]
    assert failed and failed[0].target == "prod-b" and failed[0].exc_info
    assert fetch(running.base + "/probe?target=prod-a").status == 200
    running.probe.fail_for.add("prod-a")
    assert fetch(running.base + "/metrics").status == 500
    assert fetch(running.base + "/-/healthy").status == 200


def test_malformed_request_line(running: Running):
    host, port = running.server.server_address[:2]
    with socket.create_connection((host, port), timeout=5) as sock:
        sock.sendall(b"NOT A REQUEST\r\n\r\n")
        answer = b""
        while chunk := sock.recv(4096):
            answer += chunk
    assert b"400" in answer
    assert fetch(running.base + "/-/healthy").status == 200


# --- other paths and methods ---------------------------------------------------------------------------


def test_healthy(running: Running):
    reply = fetch(running.base + "/-/healthy")
    assert (reply.status, reply.body.strip()) == (200, "OK")


def test_index_page(running: Running):
    reply = fetch(running.base + "/")
    assert reply.status == 200
    assert reply.headers["Content-Type"] == "text/html; charset=utf-8"
    assert '<a href="/metrics">' in reply.body
    assert '<a href="/probe?target=prod-a">prod-a</a>' in reply.body
    assert "prod-b" in reply.body
    assert running.probe.calls == []


@pytest.mark.parametrize("path", ["/nope", "/metrics/", "/probe/x", "/-/ready/", "/Metrics"])
def test_unknown_paths_are_404(running: Running, path: str):
    assert fetch(running.base + path).status == 404


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "OPTIONS", "FOO"])
def test_other_methods_are_405(running: Running, method: str):
    reply = fetch(running.base + "/metrics", method=method)
    assert reply.status == 405
    assert reply.headers["Allow"] == "GET, HEAD"
    assert running.probe.calls == []


def test_head(running: Running):
    conn = http.client.HTTPConnection(*running.server.server_address[:2], timeout=5)
    conn.request("HEAD", "/-/healthy")
    response = conn.getresponse()
    assert response.status == 200
    assert response.read() == b""
    assert response.headers["Content-Length"] == "3"
    conn.close()


def test_security_headers(running: Running):
    for path in ("/metrics", "/probe?target=prod-a", "/probe", "/nope", "/", "/-/healthy"):
        headers = fetch(running.base + path).headers
        assert headers["X-Content-Type-Options"] == "nosniff"
        assert headers["Cache-Control"] == "no-store"
        assert headers["Content-Type"]
        assert "Python" not in headers["Server"]


def test_keep_alive(running: Running):
    conn = http.client.HTTPConnection(*running.server.server_address[:2], timeout=5)
    for path in ("/-/healthy", "/probe?target=prod-a", "/nope", "/-/healthy"):
        conn.request("GET", path)
        response = conn.getresponse()
        response.read()
        assert response.status in (200, 404)
    conn.close()


def test_concurrent_requests(running: Running):
    paths = ["/probe?target=prod-a", "/probe?target=prod-b", "/metrics", "/-/healthy", "/"] * 4
    with ThreadPoolExecutor(max_workers=10) as pool:
        replies = list(pool.map(lambda p: fetch(running.base + p), paths))
    assert [r.status for r in replies] == [200] * len(paths)
    for path, reply in zip(paths, replies, strict=True):
        if path.startswith("/probe"):
            assert f'name="{path.split("=")[1]}"' in reply.body
    assert len(running.probe.calls) == 12


# --- access log ----------------------------------------------------------------------------------------


def test_access_log_goes_through_logging_and_cuts_long_values(
    running: Running, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
):
    with caplog.at_level(logging.DEBUG, logger="mssql_memory_exporter.web"):
        fetch(running.base + "/probe?target=" + "y" * 1000)
        fetch(running.base + "/" + "z" * 1000)
        # The access log line is written after the response went out: give the handler thread a moment.
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            if len([r for r in caplog.records if r.getMessage() == "request"]) >= 2:
                break
            time.sleep(0.01)
    records = [r for r in caplog.records if r.getMessage() == "request"]
    assert [r.status for r in records] == [400, 404]
    assert records[0].path == "/probe" and records[0].method == "GET"
    for record in caplog.records:
        for value in vars(record).values():
            assert "y" * 129 not in str(value)
            assert "z" * 129 not in str(value)
    assert "GET /probe" not in capfd.readouterr().err  # nothing printed by http.server itself


# --- listen addresses ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("listen", "expected"),
    [
        (":9399", ("", 9399)),
        ("127.0.0.1:9399", ("127.0.0.1", 9399)),
        ("localhost:0", ("localhost", 0)),
        ("sql-exporter.example.com:80", ("sql-exporter.example.com", 80)),
        ("[::1]:9399", ("::1", 9399)),
        ("[::]:9399", ("::", 9399)),
    ],
)
def test_parse_listen_address(listen: str, expected: tuple[str, int]):
    assert parse_listen_address(listen) == expected


@pytest.mark.parametrize(
    "listen",
    [
        "9399",
        "::1:9399",
        "host:",
        "host:abc",
        "host:70000",
        "host:-1",
        "",
        ":\u0663\u0663",
        ":\u00b2",
        ":+80",
        ": 80",
    ],
)
def test_parse_listen_address_rejects(listen: str):
    with pytest.raises(ValueError, match="listen address"):
        parse_listen_address(listen)


def test_host_name(start: Callable[..., Running]):
    srv = start(listen="localhost:0")
    assert srv.server.address_text.startswith("127.0.0.1:")
    assert fetch(f"http://{srv.server.address_text}/-/healthy").status == 200


def test_all_interfaces(start: Callable[..., Running]):
    srv = start(listen=":0")
    port = srv.server.server_address[1]
    assert fetch(f"http://127.0.0.1:{port}/-/healthy").status == 200


def _ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as sock:
            sock.bind(("::1", 0))
    except OSError:
        return False
    return True


@pytest.mark.skipif(not _ipv6_loopback(), reason="no IPv6 loopback here")
def test_ipv6_listen(start: Callable[..., Running]):
    srv = start(listen="[::1]:0")
    port = srv.server.server_address[1]
    assert srv.server.address_text == f"[::1]:{port}"
    assert fetch(f"http://[::1]:{port}/-/healthy").status == 200
