"""--web.config.file over HTTP: basic auth, response headers and request limits against a running exporter
(split from tests/test_webconfig.py, which keeps the PKI, TLS and the command line)."""

# ruff: noqa: F811  (the pki and serve fixtures are imported from test_webconfig; pytest injects them by name)
from __future__ import annotations

import base64
import http.client
import logging
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import bcrypt
import pytest
from mssql_memory_exporter.web import MAX_URL_LENGTH
from mssql_memory_exporter.webconfig import (
    BasicAuthChecker,
    TokenBucket,
    WebConfigSource,
    basic_auth,
    parse_go_duration,
)

from tests.test_webconfig import (
    DATA,
    NEW_PASSWORD,
    PASSWORD,
    WRONG_PASSWORD,
    Running,
    basic,
    pki,  # noqa: F401  (a fixture serve uses)
    raw_exchange,
    request,
    serve,  # noqa: F401  (a fixture)
    users_yaml,
)

# --- basic auth ----------------------------------------------------------------------------------------


def test_basic_auth_guards_every_path(tmp_path: Path, serve: Callable[..., Running]):
    (tmp_path / "web.yml").write_text(users_yaml(prometheus=PASSWORD))
    running = serve(tmp_path / "web.yml")
    for path in ("/-/healthy", "/metrics", "/probe?target=prod-a", "/", "/nope", "/probe?target=nope"):
        reply = request(running.port, path)
        assert reply.status == 401, path
        assert reply.headers["WWW-Authenticate"] == 'Basic realm="mssql-memory-exporter"'
        assert reply.headers["X-Content-Type-Options"] == "nosniff"
    assert request(running.port, method="POST").status == 401  # before the 405
    assert request(running.port, method="HEAD").status == 401
    good = basic("prometheus", PASSWORD)
    assert request(running.port, headers=good).body == b"OK\n"
    assert b"mssql_up" in request(running.port, "/probe?target=prod-a", headers=good).body
    assert request(running.port, "/nope", headers=good).status == 404
    assert request(running.port, method="POST", headers=good).status == 405


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "",
        "Basic",
        "Bearer abc",
        "Basic !!!not-base64!!!",
        "Basic " + base64.b64encode(b"prometheus").decode(),  # no colon
        "Basic " + base64.b64encode(f"prometheus:{WRONG_PASSWORD}".encode()).decode(),
        "Basic " + base64.b64encode(f"nobody:{PASSWORD}".encode()).decode(),
        "Basic " + base64.b64encode(f"Prometheus:{PASSWORD}".encode()).decode(),  # user names are exact
        "Basic " + base64.b64encode(f"prometheus:{PASSWORD}x".encode()).decode(),
        "Basic " + base64.b64encode(f"prometheus:{PASSWORD}".encode() + b"\xff").decode(),  # not UTF-8
        "Basic " + base64.b64encode(b"prometheus:" + b"p" * 100).decode(),  # over bcrypt's 72 bytes
    ],
)
def test_basic_auth_refusals(tmp_path: Path, serve: Callable[..., Running], authorization: str | None):
    (tmp_path / "web.yml").write_text(users_yaml(prometheus=PASSWORD))
    running = serve(tmp_path / "web.yml")
    headers = {} if authorization is None else {"Authorization": authorization}
    assert request(running.port, headers=headers).status == 401


def test_two_authorization_headers_are_refused(tmp_path: Path, serve: Callable[..., Running]):
    (tmp_path / "web.yml").write_text(users_yaml(prometheus=PASSWORD))
    running = serve(tmp_path / "web.yml")
    good = basic("prometheus", PASSWORD)["Authorization"]
    answer = raw_exchange(
        running.port,
        f"GET /-/healthy HTTP/1.1\r\nHost: x\r\nAuthorization: {good}\r\nAuthorization: {good}\r\n"
        "Connection: close\r\n\r\n".encode(),
    )
    assert answer.startswith(b"HTTP/1.1 401 ")


def test_successful_checks_are_cached_without_the_password(monkeypatch: pytest.MonkeyPatch):
    calls: list[bytes] = []
    real = bcrypt.checkpw

    def counting(password: bytes, hashed: bytes) -> bool:
        calls.append(hashed)
        return real(password, hashed)

    monkeypatch.setattr(basic_auth.bcrypt, "checkpw", counting)
    now = [1000.0]
    checker = BasicAuthChecker(cache_seconds=60, clock=lambda: now[0])
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(4))
    users = {"prometheus": hashed}
    good = basic("prometheus", PASSWORD)["Authorization"]
    assert checker.check(users, good) and checker.check(users, good) and checker.check(users, good)
    assert len(calls) == 1
    # Wrong passwords are never cached: each costs a full bcrypt check.
    wrong = basic("prometheus", WRONG_PASSWORD)["Authorization"]
    assert not checker.check(users, wrong) and not checker.check(users, wrong)
    assert len(calls) == 3
    # The cache holds keyed digests only.
    for key in checker._cache:
        assert len(key) == 32
        assert PASSWORD.encode() not in key and b"prometheus" not in key
    # A changed hash (rotated password) does not match old entries; expiry forces a new check.
    users2 = {"prometheus": bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(4))}
    assert checker.check(users2, good)
    assert len(calls) == 4
    now[0] += 61
    assert checker.check(users2, good)
    assert len(calls) == 5


def test_unknown_users_cost_a_bcrypt_check_too(monkeypatch: pytest.MonkeyPatch):
    calls: list[bytes] = []
    real = bcrypt.checkpw
    monkeypatch.setattr(basic_auth.bcrypt, "checkpw", lambda p, h: calls.append(h) or real(p, h))
    checker = BasicAuthChecker()
    users = {"prometheus": bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(5))}
    assert not checker.check(users, basic("nobody", PASSWORD)["Authorization"])
    assert len(calls) == 1 and calls[0].startswith(b"$2b$05$")  # same cost as the real user's hash


def test_rotated_password_applies_to_open_connections(tmp_path: Path, serve: Callable[..., Running]):
    (tmp_path / "web.yml").write_text(users_yaml(prometheus=PASSWORD))
    running = serve(tmp_path / "web.yml")
    conn = http.client.HTTPConnection("127.0.0.1", running.port, timeout=5)
    conn.request("GET", "/-/healthy", headers=basic("prometheus", PASSWORD))
    assert conn.getresponse().read() == b"OK\n"

    (tmp_path / "web.yml").write_text(users_yaml(prometheus=NEW_PASSWORD))
    conn.request("GET", "/-/healthy", headers=basic("prometheus", PASSWORD))
    response = conn.getresponse()
    response.read()
    assert response.status == 401
    conn.request("GET", "/-/healthy", headers=basic("prometheus", NEW_PASSWORD))
    assert conn.getresponse().read() == b"OK\n"
    conn.close()


def test_broken_users_rewrite_keeps_the_old_users(
    tmp_path: Path, serve: Callable[..., Running], caplog: pytest.LogCaptureFixture
):
    (tmp_path / "web.yml").write_text(users_yaml(prometheus=PASSWORD))
    running = serve(tmp_path / "web.yml")
    with caplog.at_level(logging.ERROR, logger="mssql_memory_exporter"):
        # An operator pastes a plain password instead of its hash.
        (tmp_path / "web.yml").write_text(f"basic_auth_users:\n  prometheus: {NEW_PASSWORD}\n")
        assert request(running.port, headers=basic("prometheus", PASSWORD)).status == 200
        assert request(running.port, headers=basic("prometheus", NEW_PASSWORD)).status == 401
        # A truncated file that lost the users entirely does not switch auth off.
        (tmp_path / "web.yml").write_text("http_server_config:\n  headers: {}\n")
        assert request(running.port).status == 401
        (tmp_path / "web.yml").write_text("")
        assert request(running.port).status == 401
        assert request(running.port, headers=basic("prometheus", PASSWORD)).status == 200
    messages = [r.err for r in caplog.records if r.getMessage().startswith("web config reload failed")]
    assert any("basic_auth_users.prometheus: must be a bcrypt hash" in m for m in messages)
    assert any("needs a restart" in m for m in messages)
    assert any("the web config is empty" in m for m in messages)
    assert NEW_PASSWORD not in caplog.text


def test_reload_waits_for_the_interval(tmp_path: Path):
    (tmp_path / "web.yml").write_text(users_yaml(prometheus=PASSWORD))
    now = [50.0]
    source = WebConfigSource(str(tmp_path / "web.yml"), reload_interval=1.0, clock=lambda: now[0])
    first = source.current()
    (tmp_path / "web.yml").write_text(users_yaml(prometheus=PASSWORD, grafana=PASSWORD))
    now[0] += 0.9
    assert source.current() is first  # not re-read yet
    now[0] += 0.2
    assert set(source.current().users) == {"prometheus", "grafana"}
    second = source.current()
    now[0] += 5
    assert source.current() is second  # re-read, unchanged content: the same generation


# --- headers -------------------------------------------------------------------------------------------


def test_safe_headers_on_every_response(tmp_path: Path, serve: Callable[..., Running]):
    (tmp_path / "web.yml").write_text(users_yaml(prometheus=PASSWORD))
    running = serve(tmp_path / "web.yml")
    good = basic("prometheus", PASSWORD)
    replies = [
        request(running.port, path, headers=good)
        for path in ("/-/healthy", "/metrics", "/probe", "/nope", "/")
    ]
    replies += [request(running.port), request(running.port, method="DELETE", headers=good)]
    for reply in replies:
        assert reply.headers["X-Content-Type-Options"] == "nosniff"
        assert reply.headers["Cache-Control"] == "no-store"
        assert reply.headers["X-Frame-Options"] == "DENY"
        assert reply.headers["Content-Security-Policy"].startswith("default-src 'none'")
        assert len(reply.headers.get_all("X-Frame-Options") or []) == 1
    index = replies[4]
    assert index.headers["Content-Type"] == "text/html; charset=utf-8"
    assert "form-action 'none'" in index.headers["Content-Security-Policy"]
    # The stdlib parser's own error answers carry them too, as plain text.
    answer = raw_exchange(running.port, b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"d" * 20000 + b"\r\n\r\n")
    head = answer.split(b"\r\n\r\n")[0]
    assert answer.startswith(b"HTTP/1.1 431 ")
    assert b"X-Content-Type-Options: nosniff" in head and b"Content-Type: text/plain" in head
    assert b"<html" not in answer.lower()


def test_configured_headers(tmp_path: Path, serve: Callable[..., Running]):
    running = serve(DATA / "good" / "headers.yml")
    reply = request(running.port)
    assert reply.headers.get_all("X-Frame-Options") == ["sameorigin"]
    assert reply.headers["Strict-Transport-Security"] == "max-age=31536000"
    assert reply.headers["X-XSS-Protection"] == "0"
    # Blank means "not configured": the exporter's default stays.
    assert reply.headers["Content-Security-Policy"].startswith("default-src 'none'")


# --- request limits ------------------------------------------------------------------------------------


def test_url_over_the_limit_is_414(tmp_path: Path, serve: Callable[..., Running]):
    (tmp_path / "web.yml").write_text("http_server_config: {}\n")
    running = serve(tmp_path / "web.yml")
    reply = request(running.port, "/probe?target=" + "a" * MAX_URL_LENGTH)
    assert reply.status == 414
    assert b"a" * 200 not in reply.body
    answer = raw_exchange(running.port, b"GET /" + b"b" * 70000 + b" HTTP/1.1\r\nHost: x\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 414 ")
    assert request(running.port, "/probe?target=" + "a" * 5000).status == 400  # long, but allowed


def test_oversized_header_section_is_431(tmp_path: Path, serve: Callable[..., Running]):
    (tmp_path / "web.yml").write_text("http_server_config: {}\n")
    running = serve(tmp_path / "web.yml")
    headers = b"".join(b"X-Filler-%d: %s\r\n" % (i, b"c" * 1000) for i in range(20))
    answer = raw_exchange(running.port, b"GET /-/healthy HTTP/1.1\r\nHost: x\r\n" + headers + b"\r\n")
    assert answer.startswith(b"HTTP/1.1 431 ")
    assert request(running.port, headers={"X-Filler": "c" * 1000}).status == 200


def test_bodies_on_get_are_refused(tmp_path: Path, serve: Callable[..., Running]):
    (tmp_path / "web.yml").write_text("http_server_config: {}\n")
    running = serve(tmp_path / "web.yml")
    reply = request(running.port, body=b"abc")
    assert reply.status == 413
    assert reply.headers["Connection"] == "close"
    chunked = raw_exchange(
        running.port,
        b"GET /-/healthy HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
    )
    assert chunked.startswith(b"HTTP/1.1 413 ")
    bad_length = raw_exchange(
        running.port, b"GET /-/healthy HTTP/1.1\r\nHost: x\r\nContent-Length: x\r\n\r\n"
    )
    assert bad_length.startswith(b"HTTP/1.1 400 ")
    # "Expect: 100-continue" is not honoured with a 100: the final answer comes at once.
    expect = raw_exchange(
        running.port,
        b"GET /-/healthy HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n",
    )
    assert expect.startswith(b"HTTP/1.1 413 ")


def test_rate_limit(tmp_path: Path, serve: Callable[..., Running]):
    (tmp_path / "web.yml").write_text("rate_limit:\n  interval: 1h\n  burst: 2\n")
    running = serve(tmp_path / "web.yml")
    assert [request(running.port).status for _ in range(3)] == [200, 200, 429]


def test_token_bucket_refills():
    now = [0.0]
    bucket = TokenBucket(interval=2.0, burst=2, clock=lambda: now[0])
    assert [bucket.allow() for _ in range(3)] == [True, True, False]
    now[0] += 2.0
    assert [bucket.allow(), bucket.allow()] == [True, False]
    now[0] += 100
    assert [bucket.allow() for _ in range(3)] == [True, True, False]  # never more than the burst


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("1s", 1.0), ("250ms", 0.25), ("1m30s", 90.0), ("1h", 3600.0), ("0", 0.0), ("1.5s", 1.5), (0, 0.0)],
)
def test_go_durations(text: str | int, seconds: float):
    assert parse_go_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "1", "s", "1 s", "1x", "-1s", "1s ms", True, None, 1.5])
def test_go_durations_rejected(text: object):
    with pytest.raises(ValueError, match="duration"):
        parse_go_duration(text)


def _median_seconds(port: int, headers: dict[str, str]) -> float:
    started = time.perf_counter()
    assert request(port, headers=headers).status == 401
    return time.perf_counter() - started


def test_unknown_users_take_as_long_as_wrong_passwords_whatever_the_costs(
    tmp_path: Path, serve: Callable[..., Running]
):
    """Users whose hashes have different costs: a wrong password for the cheap one must not answer faster
    than an unknown user (which was 2.7 ms against 66 ms with costs 4 and 10)."""
    cheap = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(4)).decode()
    dear = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(10)).decode()
    (tmp_path / "web.yml").write_text(f"basic_auth_users:\n  cheap: {cheap}\n  dear: {dear}\n")
    running = serve(tmp_path / "web.yml")
    kinds = {
        "unknown user": basic("nobody", WRONG_PASSWORD),
        "wrong password, cost 4": basic("cheap", WRONG_PASSWORD),
        "wrong password, cost 10": basic("dear", WRONG_PASSWORD),
    }
    for headers in kinds.values():  # the throwaway hashes are made on first use: not part of the timing
        _median_seconds(running.port, headers)
    times: dict[str, list[float]] = {kind: [] for kind in kinds}
    for _ in range(9):  # interleaved, so a busy spell on the machine hits every kind alike
        for kind, headers in kinds.items():
            times[kind].append(_median_seconds(running.port, headers))
    medians = {kind: statistics.median(seconds) for kind, seconds in times.items()}
    unknown = medians["unknown user"]
    for kind in ("wrong password, cost 4", "wrong password, cost 10"):
        assert 0.5 <= medians[kind] / unknown <= 2.0, medians
    assert request(running.port, headers=basic("cheap", PASSWORD)).status == 200
    assert request(running.port, headers=basic("dear", PASSWORD)).status == 200


def test_cheaper_hashes_are_topped_up_to_the_highest_cost(monkeypatch: pytest.MonkeyPatch):
    calls: list[bytes] = []
    real = bcrypt.checkpw
    monkeypatch.setattr(basic_auth.bcrypt, "checkpw", lambda p, h: calls.append(h) or real(p, h))
    checker = BasicAuthChecker()
    users = {
        "cheap": bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(4)),
        "dear": bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(7)),
    }
    assert not checker.check(users, basic("cheap", WRONG_PASSWORD)["Authorization"])
    # 2^4 (own) + 2^4 + 2^5 + 2^6 = 2^7 rounds: as much as the cost-7 user or an unknown one
    assert [hashed[:7] for hashed in calls] == [b"$2b$04$", b"$2b$04$", b"$2b$05$", b"$2b$06$"]
    calls.clear()
    assert not checker.check(users, basic("nobody", WRONG_PASSWORD)["Authorization"])
    assert [hashed[:7] for hashed in calls] == [b"$2b$07$"]
    calls.clear()
    assert checker.check(users, basic("dear", PASSWORD)["Authorization"])
    assert [hashed[:7] for hashed in calls] == [b"$2b$07$"]
