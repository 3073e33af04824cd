"""exporter-toolkit's web flags (issue 36): a repeatable --web.listen-address, --web.systemd-socket (a real
socket passed to the real CLI as systemd passes it), --web.telemetry-path, --web.disable-exporter-metrics,
--web.max-requests, and POST /-/reload only behind --web.enable-lifecycle (SIGHUP always)."""

# ruff: noqa: F811 - the `exporters` fixture is imported from test_web_limits and named as a parameter

from __future__ import annotations

import http.client
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from mssql_memory_exporter.web import ExporterHTTPServer, make_server
from mssql_memory_exporter.web.requests import MAX_WORKERS

from tests.test_web import PASSWORD_ENV, FakeProbe, make_config
from tests.test_web_limits import Exporter, exporters, write_config  # noqa: F401 - exporters: a fixture


@pytest.fixture
def serve(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., ExporterHTTPServer]]:
    monkeypatch.setenv(PASSWORD_ENV, "pw")
    servers: list[ExporterHTTPServer] = []

    def _serve(listen: list[str] | None = None, **settings: object) -> ExporterHTTPServer:
        server = make_server(make_config(default_target=None), FakeProbe(), listen or ["127.0.0.1:0"])
        for name, value in settings.items():
            setattr(server, name, value)
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        servers.append(server)
        return server

    yield _serve
    for server in servers:
        server.shutdown()
        server.server_close()


def call(address: tuple[str, int], path: str, method: str = "GET") -> tuple[int, str]:
    conn = http.client.HTTPConnection(address[0], address[1], timeout=10)
    try:
        conn.request(method, path)
        response = conn.getresponse()
        return response.status, response.read().decode()
    finally:
        conn.close()


def test_every_listen_address_is_served(serve):
    server = serve(["127.0.0.1:0", "127.0.0.1:0", "[::1]:0"])
    addresses = [sock.getsockname()[:2] for sock in server.sockets]
    assert len(addresses) == 3 and len({port for _, port in addresses}) == 3
    for address in addresses:
        assert call(address, "/-/healthy") == (200, "OK\n")
        assert call(address, "/metrics")[0] == 200
    assert server.address_text == ",".join(
        f"[{host}]:{port}" if ":" in host else f"{host}:{port}" for host, port in addresses
    )


def test_a_failing_address_leaves_nothing_bound(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(PASSWORD_ENV, "pw")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with socket.socket() as probe_free:
            probe_free.bind(("127.0.0.1", 0))
            free = probe_free.getsockname()[1]
        with pytest.raises(OSError):
            make_server(make_config(), FakeProbe(), [f"127.0.0.1:{free}", f"127.0.0.1:{port}"])
        with socket.socket() as again:  # the first address was released
            again.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            again.bind(("127.0.0.1", free))


def test_telemetry_path(serve):
    server = serve(telemetry_path="/internal/metrics")
    address = server.server_address[:2]
    status, body = call(address, "/internal/metrics")
    assert status == 200 and "process_cpu_seconds_total" in body
    assert call(address, "/metrics")[0] == 404
    assert 'href="/internal/metrics"' in call(address, "/")[1]


def test_disable_exporter_metrics(serve):
    address = serve(exporter_metrics=False).server_address[:2]
    status, body = call(address, "/metrics")
    assert status == 200
    for prefix in ("process_", "python_", "mssql_exporter_http_workers"):
        assert prefix not in body


def test_max_requests_is_the_worker_pools_size(serve):
    assert serve(max_requests=3).worker_limit() == 3
    assert serve(max_requests=0).worker_limit() == MAX_WORKERS
    assert serve().worker_limit() == 32  # from the targets: 2 x 2 + 16, at least 32


def test_reload_over_http_only_with_the_lifecycle_flag(serve):
    reloads: list[str] = []
    off = serve()
    off.reload = lambda why: reloads.append(why) or "nothing changed"
    status, body = call(off.server_address[:2], "/-/reload", "POST")
    assert status == 403 and "--web.enable-lifecycle" in body
    on = serve(lifecycle=True)
    on.reload = off.reload
    assert call(on.server_address[:2], "/-/reload", "POST") == (200, "config reloaded: nothing changed\n")
    assert reloads == ["POST /-/reload"]


# --- the real CLI -------------------------------------------------------------------------------------


def test_systemd_socket_activation(tmp_path: Path, exporters: list[Exporter]):
    """The socket is made here, as systemd's .socket unit would, and passed as descriptor 3 with
    LISTEN_FDS=1 and LISTEN_PID set to the exporter's own pid (sh's $$, kept by exec)."""
    listening = socket.create_server(("127.0.0.1", 0))
    port = listening.getsockname()[1]
    fd = listening.fileno()
    assert fd != 3
    script = 'export LISTEN_PID=$$ LISTEN_FDS=1; exec "$@"'
    config = write_config(tmp_path / "c.yml")
    try:
        exporter = Exporter(
            [
                "--config.file",
                str(config),
                "--web.systemd-socket",
                "--web.listen-address",
                "127.0.0.1:1",  # ignored with --web.systemd-socket, as in exporter-toolkit
            ],
            # In the child only, before exec: the socket becomes descriptor 3, which is kept open.
            preexec_fn=lambda: os.dup2(fd, 3),
            pass_fds=(3,),
            wrap=["sh", "-c", script, "sh"],
        )
    finally:
        listening.close()  # the exporter holds its own copy
    exporters.append(exporter)
    exporter.wait_for(rf"msg=listening address=127\.0\.0\.1:{port} ")
    assert call(("127.0.0.1", port), "/-/healthy") == (200, "OK\n")


def test_systemd_socket_without_sockets_is_refused_with_a_reason(tmp_path: Path):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mssql_memory_exporter",
            "--config.file",
            str(write_config(tmp_path / "c.yml")),
            "--web.systemd-socket",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={**_env(), "LISTEN_FDS": ""},
    )
    assert done.returncode == 1
    assert "LISTEN_FDS is not set" in done.stderr


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--web.telemetry-path", "metrics"], "--web.telemetry-path: 'metrics' must begin with /"),
        (["--web.telemetry-path", "/probe"], "is a path the exporter serves otherwise"),
        (
            ["--web.listen-address", ":9399", "--web.listen-address", ":9399"],
            "the same address is given twice",
        ),
        (["--web.listen-address", ":9399", "--web.listen-address", "nope"], "must be host:port"),
        (["--web.max-requests", "-1"], "is not a whole number"),
    ],
)
def test_bad_web_flags_exit_2_with_the_reason(tmp_path: Path, flags: list[str], says: str):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mssql_memory_exporter",
            "--config.file",
            str(write_config(tmp_path / "c.yml")),
            "--config.check",
            *flags,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=_env(),
    )
    assert done.returncode == 2, done.stderr
    assert says in done.stderr


def test_without_the_lifecycle_flag_post_reload_is_403_and_sighup_reloads(
    tmp_path: Path, exporters: list[Exporter]
):
    config = write_config(tmp_path / "c.yml")
    exporter = Exporter(["--config.file", str(config), "--web.listen-address", "127.0.0.1:0"])
    exporters.append(exporter)
    port = int(exporter.wait_for(r"msg=listening address=\S*:(\d+)").group(1))
    status, body = call(("127.0.0.1", port), "/-/reload", "POST")
    assert status == 403, body
    write_config(config, targets=2)
    exporter.proc.send_signal(signal.SIGHUP)
    exporter.wait_for(r'msg="config reloaded" trigger=SIGHUP')


def _env() -> dict[str, str]:
    return {**os.environ, PASSWORD_ENV: "pw", "PYTHONDONTWRITEBYTECODE": "1"}
