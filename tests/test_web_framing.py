"""Request smuggling and malformed heads, over raw sockets (issue 36, item 1): every shape RFC 9112 says a
server must refuse is answered 400 and the connection is closed, so no byte after a refused head is ever
read as a request. The framing is h11's (web/protocol.py); these were answered 200, or left the
connection open for a smuggled `POST /-/reload`, by the hand parser before it."""

# ruff: noqa: F811  (the start fixture is imported from test_web; pytest injects it by name)

from __future__ import annotations

import logging
import socket
from collections.abc import Callable

import pytest
from mssql_memory_exporter.app.logsetup import LogfmtFormatter

from tests.test_web import Running, start  # noqa: F401

SMUGGLED = b"POST /-/reload HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"


def exchange(running: Running, data: bytes) -> bytes:
    """Sends `data` and reads until the server closes; a server that keeps the connection open fails the
    test by the socket timeout instead of hanging."""
    with socket.create_connection(running.server.server_address[:2], timeout=10) as sock:
        sock.sendall(data)
        answer = b""
        try:
            while chunk := sock.recv(65536):
                answer += chunk
        except ConnectionResetError:
            pass
        except TimeoutError:
            pytest.fail(f"the connection was left open after {answer[:120]!r}")
    return answer


@pytest.fixture
def running(start: Callable[..., Running]) -> Running:
    running = start()
    reloads: list[str] = []
    running.server.reload = lambda why: reloads.append(why) or "nothing changed"  # type: ignore[assignment]
    running.server.lifecycle = True
    running.reloads = reloads  # type: ignore[attr-defined]
    return running


SHAPES = {
    "duplicate Content-Length, 0 then 25": b"GET /-/healthy HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n"
    b"Content-Length: %d\r\n\r\n" % len(SMUGGLED) + SMUGGLED,
    "space before the colon of Content-Length": b"GET /-/healthy HTTP/1.1\r\nHost: x\r\n"
    b"Content-Length : %d\r\n\r\n" % len(SMUGGLED) + SMUGGLED,
    "space before the colon of Transfer-Encoding": b"GET /-/healthy HTTP/1.1\r\nHost: x\r\n"
    b"Transfer-Encoding : chunked\r\n\r\n0\r\n\r\n" + SMUGGLED,
    "a header line without a colon": b"GET /-/healthy HTTP/1.1\r\nHost: x\r\nno colon here\r\n"
    b"Content-Length: %d\r\n\r\n" % len(SMUGGLED) + SMUGGLED,
    "no Host on HTTP/1.1": b"GET /-/healthy HTTP/1.1\r\n\r\n",
    "two Host headers": b"GET /-/healthy HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n",
    "NUL in a header value": b"GET /-/healthy HTTP/1.1\r\nHost: x\r\nX-Trace: a\x00b\r\n\r\n",
    "an empty line before the request line": b"\r\nGET /-/healthy HTTP/1.1\r\nHost: x\r\n\r\n",
    "Content-Length and Transfer-Encoding": b"GET /-/healthy HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
    b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + SMUGGLED,
    "a control character in the path": b"GET /-/healthy\x1b[2J HTTP/1.1\r\nHost: x\r\n\r\n",
}


@pytest.mark.parametrize("data", SHAPES.values(), ids=SHAPES.keys())
def test_malformed_heads_are_answered_400_and_closed(running: Running, data: bytes):
    answer = exchange(running, data)
    assert answer.startswith(b"HTTP/1.1 400 Bad Request\r\n"), answer[:200]
    assert b"\r\nConnection: close\r\n" in answer.partition(b"\r\n\r\n")[0] + b"\r\n"
    assert answer.count(b"HTTP/1.1 ") == 1, answer  # one answer: nothing after the head was served
    assert running.reloads == []  # type: ignore[attr-defined]
    assert running.probe.calls == []


def test_an_unknown_transfer_coding_is_501_and_closed(running: Running):
    head = b"GET /-/healthy HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n"
    answer = exchange(running, head + SMUGGLED)
    assert answer.startswith(b"HTTP/1.1 501 "), answer[:200]
    assert answer.count(b"HTTP/1.1 ") == 1
    assert running.reloads == []  # type: ignore[attr-defined]


def test_a_good_request_and_a_pipelined_one_are_both_answered(running: Running):
    """The other side of the same coin: a well-framed second request on the connection is served."""
    first = b"GET /-/healthy HTTP/1.1\r\nHost: x\r\n\r\n"
    answer = exchange(running, first + SMUGGLED.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n"))
    assert answer.count(b"HTTP/1.1 200 OK") == 2
    assert running.reloads == ["POST /-/reload"]  # type: ignore[attr-defined]


def test_a_body_on_get_is_refused_and_never_read_as_a_request(running: Running):
    head = b"GET /-/healthy HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(SMUGGLED)
    answer = exchange(running, head + SMUGGLED)
    assert answer.startswith(b"HTTP/1.1 413 ")
    assert answer.count(b"HTTP/1.1 ") == 1
    assert running.reloads == []  # type: ignore[attr-defined]


def test_control_characters_of_a_request_path_never_reach_the_log_raw(
    running: Running, caplog: pytest.LogCaptureFixture
):
    """The path is refused by the framing (h11 takes only visible ASCII there); the refusal logged at debug
    quotes it, as every logfmt value with a control character is quoted (logsetup.py)."""
    with caplog.at_level(logging.DEBUG, logger="mssql_memory_exporter.web"):
        answer = exchange(running, b"GET /\x1b[31mred\x00\x7f HTTP/1.1\r\nHost: x\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 400 ")
    lines = [LogfmtFormatter().format(record) for record in caplog.records]
    assert lines, "nothing was logged"
    for line in lines:
        assert not any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in line), repr(line)
