"""Basic auth under a flood of wrong passwords (issue 36, item 2): the right password is always answered
200, however long it waits its turn; what is bounded is the work each client can queue.

Before: checks waited at most 2 s for the one bcrypt lock, then were refused unchecked, so 40 clients
guessing made the right password answer 401."""

from __future__ import annotations

import http.client
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import bcrypt
import pytest
from mssql_memory_exporter.config import parse_config
from mssql_memory_exporter.web import ExporterHTTPServer, make_server
from mssql_memory_exporter.webconfig import BasicAuthChecker, WebConfigSource, basic_auth

from tests.test_web import PASSWORD_ENV, FakeProbe
from tests.test_webconfig import PASSWORD, WRONG_PASSWORD, basic

FLOODERS = 40
# bcrypt's default cost, what htpasswd and the toolkit's docs produce: ~70 ms a check on one core.
COST = 10
USERS = ("grafana-0", "grafana-1", "grafana-2")
# Enough targets that every flooder's request has a thread at once (2 x 16 + 16 = 48 > 40): the checks
# then all wait on basic auth itself, not in the queue for a thread.
TARGETS = 16


@pytest.fixture
def serve_many_targets(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[Path], int]]:
    monkeypatch.setenv(PASSWORD_ENV, "pw")
    servers: list[ExporterHTTPServer] = []

    def _serve(web_config: Path) -> int:
        targets = {f"t{n}": {"host": f"t{n}.example.com", "auth_module": "m"} for n in range(TARGETS)}
        config = parse_config(
            {"auth_modules": {"m": {"username": "u", "password_env": PASSWORD_ENV}}, "targets": targets}
        )
        server = make_server(config, FakeProbe(), "127.0.0.1:0", web=WebConfigSource(str(web_config)))
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        servers.append(server)
        assert server.worker_limit() > FLOODERS
        return int(server.server_address[1])

    yield _serve
    for server in servers:
        server.shutdown()
        server.server_close()


def guess_until(stop: threading.Event, port: int, source: str, password: str, counts: list[int]) -> None:
    """One flooding client: wrong passwords on a kept-alive connection from its own address, until told
    to stop."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120, source_address=(source, 0))
    try:
        while not stop.is_set():
            conn.request("GET", "/metrics", headers=basic("prometheus", password))
            response = conn.getresponse()
            response.read()
            assert response.status == 401
            counts.append(1)
    except (OSError, http.client.HTTPException):
        pass  # the server stopping under the last request
    finally:
        conn.close()


def test_the_right_password_is_answered_200_while_40_clients_guess(
    tmp_path: Path, serve_many_targets: Callable[[Path], int]
):
    users = {"prometheus": PASSWORD} | {user: PASSWORD for user in USERS}
    lines = [
        f"  {user}: {bcrypt.hashpw(pw.encode(), bcrypt.gensalt(COST)).decode()}" for user, pw in users.items()
    ]
    (tmp_path / "web.yml").write_text("basic_auth_users:\n" + "\n".join(lines) + "\n")
    port = serve_many_targets(tmp_path / "web.yml")
    stop = threading.Event()
    counts: list[int] = []
    # Each flooder from its own loopback address (all of 127/8 is this host): 40 distinct clients.
    flooders = [
        threading.Thread(
            target=guess_until,
            args=(stop, port, f"127.0.0.{2 + n}", f"{WRONG_PASSWORD}-{n}", counts),
            daemon=True,
        )
        for n in range(FLOODERS)
    ]
    for thread in flooders:
        thread.start()
    try:
        while len(counts) < 5:  # the flood is under way: every flooder has a check queued again at once
            stop.wait(0.05)
        # Users never checked before, so nothing is answered from the cache: each waits its turn.
        for user in USERS:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            try:
                conn.request("GET", "/metrics", headers=basic(user, PASSWORD))
                response = conn.getresponse()
                assert (response.status, response.read()[:7]) == (200, b"# HELP "), user
            finally:
                conn.close()
    finally:
        stop.set()
        for thread in flooders:
            thread.join(timeout=60)


def test_one_client_queues_at_most_two_checks_and_the_same_credentials_are_checked_once(
    monkeypatch: pytest.MonkeyPatch,
):
    release = threading.Event()
    calls: list[bytes] = []
    real = bcrypt.checkpw

    def held(password: bytes, hashed: bytes) -> bool:
        calls.append(password)
        release.wait(30)  # every check stays under way until the test has sent them all
        return real(password, hashed)

    monkeypatch.setattr(basic_auth.bcrypt, "checkpw", held)
    checker = BasicAuthChecker()
    users = {"prometheus": bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(4))}
    results: dict[str, list[bool]] = {"guesser": [], "prometheus": []}
    threads = [
        # One address sending ten different guesses at once.
        *(
            threading.Thread(
                target=lambda n=n: results["guesser"].append(
                    checker.check(
                        users, basic("prometheus", f"guess-{n}")["Authorization"], client="10.0.0.9"
                    )
                )
            )
            for n in range(10)
        ),
        # Prometheus: many probes at once with the one right password.
        *(
            threading.Thread(
                target=lambda: results["prometheus"].append(
                    checker.check(users, basic("prometheus", PASSWORD)["Authorization"], client="10.0.0.1")
                )
            )
            for _ in range(10)
        ),
    ]
    for thread in threads:
        thread.start()
    # The guesser's eight checks beyond its two are refused without waiting for anything.
    deadline = time.monotonic() + 30
    while len(results["guesser"]) < 8 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert results["guesser"] == [False] * 8
    release.set()
    for thread in threads:
        thread.join(30)
    assert results["guesser"] == [False] * 10
    assert results["prometheus"] == [True] * 10
    # Two guesses and one check of the right password: bcrypt never ran for the rest.
    assert len(calls) == 3 and calls.count(PASSWORD.encode()) == 1, calls
