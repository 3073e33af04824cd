"""HTTP/1.1 framing, handed to h11 (the sans-I/O state machine under httpcore and uvicorn): where a
request starts and ends, its header fields, its body framing, keep-alive, pipelining. Nothing here
parses a request by hand; this module only sets h11 up, turns its refusals into a status and a
sentence, and applies the exporter's own limits (header count and size, HTTP version) to what h11
parsed.

Every framing error h11 refuses (a duplicate or conflicting Content-Length, whitespace before a colon,
a header line without one, a missing Host on HTTP/1.1, NUL or another control character in a field, an
empty line before the request line, an unsupported Transfer-Encoding) is answered with a status and the
connection is closed, so bytes after a refused head are never read as a next request (RFC 9112 §6.3).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from http import HTTPStatus

import h11

from .requests import (
    LOGGED_VALUE_MAX,
    MAX_HEAD_BYTES,
    MAX_HEADER_BYTES,
    MAX_HEADER_LINES,
    MAX_REQUEST_LINE,
    MAX_URL_LENGTH,
)

_VERSION = re.compile(r"HTTP/(\d{1,10})\.(\d{1,10})")


@dataclass(frozen=True)
class Refusal:
    """A request answered with an error before it is routed; the connection is closed after it."""

    status: int
    message: str


def new_connection() -> h11.Connection:
    # h11 refuses a head that has not ended after this many bytes (431 below), so a client sending a
    # long request line or endless headers holds at most this much memory.
    return h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD_BYTES)


def buffered(http: h11.Connection) -> bytes:
    """Bytes received and not yet parsed (a pipelined next request, or a head still arriving)."""
    return http.trailing_data[0]


def early_refusal(http: h11.Connection) -> Refusal | None:
    """A refusal that can be given before the head has ended: a request line over the limit, or one that
    names no HTTP/1.x version. HTTP/0.9 sends no headers and waits for an answer, so it is refused as soon
    as its line is in; h11 would wait for an empty line that never comes. Only a new request is checked."""
    if http.their_state is not h11.IDLE:
        return None
    data = buffered(http)
    end = data.find(b"\n")
    if end < 0:
        return _too_long_line() if len(data) > MAX_REQUEST_LINE else None
    if end > MAX_REQUEST_LINE:
        return _too_long_line()
    line = data[:end].rstrip(b"\r")
    return request_line_problem(line) if line else None  # an empty line: h11 refuses it below


def request_line_problem(line: bytes) -> Refusal | None:
    """What is wrong with a request line, worded for the client, when it is something h11 would not take
    as HTTP/1.x: the wording only; h11 still decides what a valid line is."""
    text = line.decode("latin-1")
    words = text.split()
    if len(words) == 2:
        return Refusal(400, "HTTP/0.9 requests are not served; send HTTP/1.1 or HTTP/1.0")
    if len(words) != 3:
        shown = words[-1] if len(words) > 3 else text
        kind = "version" if len(words) > 3 else "syntax"
        return Refusal(400, f"Bad request {kind} ({_cut(shown)!r})")
    version = _VERSION.fullmatch(words[2])
    if version is None:
        return Refusal(400, f"Bad request version ({_cut(words[2])!r})")
    if int(version.group(1)) != 1:
        return Refusal(505, f"HTTP version {words[2][5:]} is not supported; send HTTP/1.1 or HTTP/1.0")
    return None


def refusal_for(error: h11.RemoteProtocolError, http: h11.Connection) -> Refusal:
    """h11's refusal as the status and message the client gets."""
    status = error.error_status_hint
    if status == HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE:
        # The head did not end within MAX_HEAD_BYTES: say which part was too long.
        data = buffered(http)
        end = data.find(b"\n")
        if end < 0 or end > MAX_REQUEST_LINE:
            return _too_long_line()
        return Refusal(status, f"header section over {MAX_HEADER_BYTES} bytes")
    return Refusal(status, f"malformed request: {_cut(_plain(str(error)))}")


def request_refusal(request: h11.Request) -> Refusal | None:
    """The exporter's own limits on a head h11 has parsed: the HTTP version, the number and size of the
    header fields (each counted as `name: value` with its CRLF, as it would be sent), and a body framed
    two ways (RFC 9112 §6.1: a request with both Transfer-Encoding and Content-Length may be smuggling)."""
    version = request.http_version.decode("ascii")
    if not version.startswith("1."):
        return Refusal(505, f"HTTP version {version} is not supported; send HTTP/1.1 or HTTP/1.0")
    fields = request.headers.raw_items()
    if len(fields) > MAX_HEADER_LINES:
        return Refusal(431, f"more than {MAX_HEADER_LINES} header lines")
    if sum(len(name) + len(value) + 4 for name, value in fields) > MAX_HEADER_BYTES:
        return Refusal(431, f"header section over {MAX_HEADER_BYTES} bytes")
    names = {name for name, _ in request.headers}
    if b"content-length" in names and b"transfer-encoding" in names:
        return Refusal(400, "both Content-Length and Transfer-Encoding; send at most one")
    return None


class Headers:
    """A request's header fields by case-insensitive name, values as text (ISO-8859-1, as HTTP has them)."""

    def __init__(self, fields: list[tuple[bytes, bytes]]) -> None:
        self._fields = [(name.decode("ascii").lower(), value.decode("latin-1")) for name, value in fields]

    def get(self, name: str, default: str | None = None) -> str | None:
        wanted = name.lower()
        return next((value for key, value in self._fields if key == wanted), default)

    def get_all(self, name: str) -> list[str]:
        wanted = name.lower()
        return [value for key, value in self._fields if key == wanted]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.get(name) is not None


def _too_long_line() -> Refusal:
    return Refusal(414, f"URL longer than {MAX_URL_LENGTH} bytes")


def _cut(text: str) -> str:
    return text if len(text) <= LOGGED_VALUE_MAX else text[:LOGGED_VALUE_MAX] + "..."


def _plain(text: str) -> str:
    # h11 quotes the offending line as bytearray(b'...'); the b'...' repr is what a reader needs.
    return text.replace("bytearray(b", "b").replace("')", "'").replace('")', '"')
