"""What a request may be: sizes, deadlines, the scrape timeout Prometheus allows, the listen address, the
/probe query. Pure functions and constants; no sockets."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import NamedTuple
from urllib.parse import parse_qs

from prometheus_client.metrics_core import Metric

from mssql_memory_exporter.config import TARGET_NAME_MAX, ExporterConfig, TargetConfig
from mssql_memory_exporter.scrape.selection import SelectionError, narrow

log = logging.getLogger(__name__)

# (target, timeout) or, for a probe narrowed by collect[], (target, timeout, collector names)
ProbeFn = Callable[..., list[Metric]]
OwnMetricsFn = Callable[[], list[Metric]]

SCRAPE_TIMEOUT_HEADER = "X-Prometheus-Scrape-Timeout-Seconds"
DEFAULT_TIMEOUT_SECONDS = 10.0
# Leaves time to encode and send the answer before Prometheus gives up on the scrape.
TIMEOUT_OFFSET_SECONDS = 0.5
MAX_TIMEOUT_SECONDS = 120.0
MIN_TIMEOUT_SECONDS = 0.5
LOGGED_VALUE_MAX = 128

TEXT = "text/plain; charset=utf-8"
HTML = "text/html; charset=utf-8"

# Request limits. The stdlib allows 64 KiB per line and 100 header lines (6.4 MB per request, per
# connection thread); Prometheus sends a short URL and a few hundred bytes of headers. 8 KiB of URL is
# what common proxies allow (nginx, Apache), and leaves room for long target names.
MAX_URL_LENGTH = 8192
MAX_REQUEST_LINE = MAX_URL_LENGTH + 64  # method, spaces and "HTTP/1.1" around the URL
# The header section: at most MAX_HEADER_LINES fields and MAX_HEADER_BYTES bytes, each field counted as
# `name: value` with its CRLF (as h11 parsed it: a folded line is one field), neither the request line
# nor the empty line that ends the section. One more field or byte is answered with 431 naming the limit.
MAX_HEADER_BYTES = 16 * 1024
MAX_HEADER_LINES = 100
# What h11 buffers of one request head before refusing it (431, or 414 for the request line): enough
# to see that a limit was passed.
MAX_HEAD_BYTES = MAX_REQUEST_LINE + MAX_HEADER_BYTES + 2
# /probe needs a target and at most one collect[] per collector; a scanner's hundreds are refused
# before parsing.
MAX_QUERY_FIELDS = 32
PROBE_PARAMS = frozenset({"target", "collect[]"})
# A client that connects and never finishes the TLS handshake holds a thread until this runs out.
TLS_HANDSHAKE_TIMEOUT_SECONDS = 10.0
# The request line and headers must be complete this many seconds after the request began (after the
# connection was set up, for its first request; after the first byte, for the next ones on a kept-alive
# connection). A socket timeout alone restarts with every byte, so a client trickling one byte a second
# held a thread for ever. Prometheus sends its few hundred bytes in one packet.
HEADER_TIMEOUT_SECONDS = 10.0
# An idle keep-alive connection is closed after this many seconds without a new request. While idle it
# holds no thread, only a file descriptor (connections.py).
IDLE_TIMEOUT_SECONDS = 90.0
# Writing an answer may take this long; a client that stops reading is cut off then.
SEND_TIMEOUT_SECONDS = 10.0
# Threads answering requests (pool.py): enough for every configured target to have a probe stuck on a
# silent server (each waits up to its scrape timeout) and as many again for everything else, within
# fixed bounds. A burst beyond that waits in a queue; nothing is refused.
MIN_WORKERS = 32
MAX_WORKERS = 1024
# Responses larger than this are gzip-compressed for a client that accepts it (Prometheus does); level 1
# makes a healthy-oltp probe of 34.8 kB 7.5 kB for 0.16 ms of CPU; level 6 gets 6.5 kB for 0.42 ms.
GZIP_MIN_BYTES = 1024
GZIP_LEVEL = 1
# Every TLS record a client starts with is a handshake record; plain HTTP starts with a method name.
TLS_HANDSHAKE_RECORD = 0x16
PLAIN_HTTP_TO_TLS = "Client sent an HTTP request to an HTTPS server."
# After that answer, the client's unread request is drained (bounded) before closing: closing with unread
# bytes makes the kernel send a reset, which can destroy the answer before the client reads it.
DRAIN_BYTES = MAX_REQUEST_LINE + MAX_HEADER_BYTES
DRAIN_SECONDS = 1.0

# Sent with every response (errors from the stdlib parser included). Nothing here is meant to be
# embedded, cached by a proxy or run as a script. The index page has no scripts or styles either.
SECURITY_HEADERS: tuple[tuple[str, str], ...] = (
    ("X-Content-Type-Options", "nosniff"),
    ("Cache-Control", "no-store"),
    ("X-Frame-Options", "DENY"),
    ("Referrer-Policy", "no-referrer"),
)
CSP_DATA = "default-src 'none'; frame-ancestors 'none'"
CSP_HTML = "default-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"


class BadRequest(Exception):
    """A request the exporter refuses; the message is sent to the client as the 400 body."""


class Response(NamedTuple):
    status: int
    content_type: str
    body: bytes
    headers: tuple[tuple[str, str], ...] = ()
    # HEAD of /metrics or /probe: the scrape is not run, so the length of its body is not known and no
    # Content-Length is sent (a HEAD answer never has a body, so the connection stays usable).
    unmeasured: bool = False


def text_response(status: int, message: str, headers: tuple[tuple[str, str], ...] = ()) -> Response:
    return Response(status, TEXT, (message + "\n").encode(), headers)


def scrape_timeout(header: str | None) -> float:
    """Seconds the probe may take: Prometheus' scrape timeout minus an offset, within fixed bounds."""
    if header is None:
        return DEFAULT_TIMEOUT_SECONDS
    try:
        offered = float(header)
    except ValueError:
        return DEFAULT_TIMEOUT_SECONDS
    if not math.isfinite(offered) or offered <= 0:
        return DEFAULT_TIMEOUT_SECONDS
    return max(MIN_TIMEOUT_SECONDS, min(offered - TIMEOUT_OFFSET_SECONDS, MAX_TIMEOUT_SECONDS))


def parse_listen_address(listen: str) -> tuple[str, int]:
    """`host:port`, `:port` (all interfaces) or `[v6addr]:port` -> (host, port); host '' means all."""
    host, sep, port_text = listen.rpartition(":")
    if not sep:
        raise ValueError(f"listen address {listen!r} must be host:port or :port")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise ValueError(f"listen address {listen!r}: put IPv6 addresses in brackets, e.g. [::1]:9399")
    # isdigit() alone also takes other scripts' digits ("٣٣" was port 33) and "²" (which int() refuses).
    if not (port_text.isascii() and port_text.isdigit()) or not 0 <= int(port_text) <= 65535:
        raise ValueError(f"listen address {listen!r}: port must be a number from 0 to 65535")
    return host, int(port_text)


def query_params(query: str, allowed: frozenset[str]) -> dict[str, list[str]]:
    # Counted as parse_qs counts them (every '&' starts a field), so its own limit never fires first
    # with a message that would call a merely long query malformed.
    if query.count("&") + 1 > MAX_QUERY_FIELDS:
        raise BadRequest(f"too many query parameters (at most {MAX_QUERY_FIELDS})")
    try:
        # strict_parsing rejects fragments like '&&' or 'target' without '=' instead of guessing.
        params = parse_qs(
            query, keep_blank_values=True, strict_parsing=bool(query), max_num_fields=MAX_QUERY_FIELDS
        )
    except ValueError:
        raise BadRequest("malformed query string") from None
    unknown = sorted(set(params) - allowed)
    if unknown:
        accepted = ", ".join(sorted(allowed)) or "none"
        raise BadRequest(f"unknown query parameter {unknown[0][:64]!r} (accepted: {accepted})")
    return params


def probe_target(query: str, config: ExporterConfig) -> TargetConfig:
    """The configured target a /probe query names; anything else is a BadRequest, so the exporter
    can only ever connect to servers listed in its config."""
    return probe_request(query, config)[0]


def probe_request(query: str, config: ExporterConfig) -> tuple[TargetConfig, frozenset[str] | None]:
    """The target a /probe query names and the collectors its `collect[]` values narrow it to (None:
    the target's own set). An unknown collector, or one the target's config turned off, is refused."""
    params = query_params(query, PROBE_PARAMS)
    target = _named_target(params.get("target", []), config)
    wanted = params.get("collect[]")
    if wanted is None:
        return target, None
    try:
        return target, narrow(wanted, target.enabled_collectors, config.collector_records, target.name)
    except SelectionError as exc:
        raise BadRequest(str(exc)) from None


def _named_target(values: list[str], config: ExporterConfig) -> TargetConfig:
    if not values:
        raise BadRequest("missing query parameter 'target'; use /probe?target=NAME")
    if len(values) > 1:
        raise BadRequest(f"query parameter 'target' given {len(values)} times; give it once")
    name = values[0]
    if not name:
        raise BadRequest("query parameter 'target' is empty")
    if len(name) > TARGET_NAME_MAX:
        raise BadRequest(f"target name is longer than {TARGET_NAME_MAX} characters")
    target = config.targets.get(name)
    if target is None:
        raise BadRequest(f"unknown target {name!r}; only targets named in the config file can be probed")
    return target


def loggable_query(query: str) -> str:
    """The query string with each value cut to a loggable length (a scanner can send megabytes)."""
    pairs = [pair.partition("=") for pair in query.split("&")[:MAX_QUERY_FIELDS]]
    return "&".join(cut_for_log(key) + sep + cut_for_log(value) for key, sep, value in pairs)


def cut_for_log(text: str) -> str:
    return text if len(text) <= LOGGED_VALUE_MAX else text[:LOGGED_VALUE_MAX] + "..."


def worker_limit(targets: int) -> int:
    return max(MIN_WORKERS, min(MAX_WORKERS, 2 * targets + MIN_WORKERS // 2))


def accepts_gzip(header: str | None) -> bool:
    """Whether an Accept-Encoding header value allows gzip: named (or `*`) without q=0."""
    if not header:
        return False
    named: dict[str, float] = {}
    for item in header.split(","):
        coding, _, params = item.partition(";")
        quality = 1.0
        for param in params.split(";"):
            key, _, value = param.strip().partition("=")
            if key.lower() == "q":
                try:
                    quality = float(value)
                except ValueError:
                    quality = 0.0
        named[coding.strip().lower()] = quality
    if "gzip" in named:
        return named["gzip"] > 0
    return named.get("x-gzip", named.get("*", 0.0)) > 0
