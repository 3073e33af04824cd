"""A PromQL HTTP client for any endpoint that speaks Prometheus' query API: Prometheus, Thanos Query.

Every request has one deadline for the whole exchange (connect, headers and body): an endpoint that
trickles its answer a byte at a time is cut off at `timeout_seconds` like one that never answers, since a
socket timeout alone restarts with every byte. Thanos' own parameters ride along on every request:
`partial_response=true` (so a shard that is down gives an answer with a warning instead of no answer) and
`max_source_resolution` (which downsampled data the store may serve). Prometheus ignores parameters it
does not know. Warnings the endpoint returns (Thanos names the unreachable store there) are kept with each
answer, so the rows computed from it can say so. An answer that is not the API's JSON shape is an
EndpointError naming the endpoint, never a traceback.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import math
import re
import socket
import ssl
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Answer", "EndpointError", "PromQLClient", "Series", "readable_warning"]

# Prometheus and Thanos refuse a range query of more than 11,000 points per series; the report asks for
# at most this many steps per request and splits a longer range.
MAX_STEPS_PER_QUERY = 10_000
_READ_CHUNK = 65536


class EndpointError(Exception):
    """The endpoint did not answer, answered too slowly, or refused the query; the message says which."""


@dataclass(frozen=True)
class Series:
    labels: dict[str, str]
    # (unix seconds, value) pairs; one pair for an instant query
    points: list[tuple[float, float]]


@dataclass(frozen=True)
class Answer:
    series: list[Series]
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class PromQLClient:
    base_url: str
    timeout_seconds: float = 30.0
    # Thanos: the coarsest data the store may serve, e.g. "1h", "5m", "0s" (raw only).
    max_source_resolution: str = "1h"

    def instant(self, expr: str, at: float) -> Answer:
        return self._query("/api/v1/query", {"query": expr, "time": f"{at:.3f}"})

    def range(self, expr: str, start: float, end: float, step_seconds: float) -> Answer:
        """One answer for (start .. end] on the step grid, asked in pieces of at most
        MAX_STEPS_PER_QUERY steps: a five-year review on an hourly grid is 43,800 steps."""
        steps = max(0, round((end - start) / step_seconds))
        series: dict[tuple[tuple[str, str], ...], Series] = {}
        warnings: list[str] = []
        first = 0
        while first <= steps:
            last = min(steps, first + MAX_STEPS_PER_QUERY - 1)
            params = {
                "query": expr,
                "start": f"{start + first * step_seconds:.3f}",
                "end": f"{start + last * step_seconds:.3f}",
                "step": f"{step_seconds:g}",
            }
            answer = self._query("/api/v1/query_range", params)
            for piece in answer.series:
                key = tuple(sorted(piece.labels.items()))
                series.setdefault(key, Series(piece.labels, [])).points.extend(piece.points)
            warnings += [w for w in answer.warnings if w not in warnings]
            first = last + 1
        return Answer(list(series.values()), warnings)

    def _query(self, path: str, params: dict[str, str]) -> Answer:
        params = {
            **params,
            "partial_response": "true",
            "max_source_resolution": self.max_source_resolution,
            # Prometheus and Thanos stop a query at this server-side timeout rather than run on after we
            # have given up on it.
            "timeout": f"{self.timeout_seconds:g}s",
        }
        url = self.base_url.rstrip("/") + path
        status, raw = _post(url, urllib.parse.urlencode(params).encode(), self.timeout_seconds)
        payload = _json(raw, url, status)
        if status != 200 or payload.get("status") != "success":
            what = f"HTTP {status}: " if status != 200 else ""
            raise EndpointError(
                f"{url}: {what}{payload.get('errorType', 'error')}: {payload.get('error', '(no error text)')}"
            )
        try:
            series = _series(payload.get("data") or {})
            warnings = [str(w) for w in payload.get("warnings") or []]
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as err:
            raise EndpointError(f"{url}: not a PromQL API answer ({type(err).__name__}: {err})") from None
        return Answer(series, warnings)


def _post(url: str, body: bytes, timeout: float) -> tuple[int, bytes]:
    """POST within one deadline. A watchdog shuts the socket down when the deadline passes, which ends
    whatever read or write is blocked on it."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise EndpointError(f"{url}: not an http(s) URL")
    target = parts.path + (f"?{parts.query}" if parts.query else "")
    conn: http.client.HTTPConnection
    if parts.scheme == "https":
        conn = http.client.HTTPSConnection(
            parts.hostname, parts.port, timeout=timeout, context=ssl.create_default_context()
        )
    else:
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    deadline = time.monotonic() + timeout
    expired = threading.Event()
    # The socket as connected: http.client hands it to the response and forgets it (conn.sock is None)
    # when the server will close the connection, so the watchdog keeps its own reference.
    connected: list[socket.socket] = []

    def cut_off() -> None:
        expired.set()
        for sock in connected:
            with contextlib.suppress(OSError):  # already closed: nothing is blocked on it
                sock.shutdown(socket.SHUT_RDWR)

    watchdog = threading.Timer(timeout, cut_off)
    watchdog.daemon = True
    watchdog.start()
    try:
        conn.connect()
        if conn.sock is not None:
            connected.append(conn.sock)
        if expired.is_set():  # the deadline passed while connecting
            raise TimeoutError
        conn.request("POST", target, body, {"Content-Type": "application/x-www-form-urlencoded"})
        response = conn.getresponse()
        chunks: list[bytes] = []
        while True:
            chunk = response.read(_READ_CHUNK)
            if not chunk:
                break
            chunks.append(chunk)
        if expired.is_set() or time.monotonic() > deadline:
            raise TimeoutError
        return response.status, b"".join(chunks)
    except TimeoutError:
        raise EndpointError(f"{url}: no answer within {timeout:g} s") from None
    except (http.client.HTTPException, OSError) as err:
        if expired.is_set():
            raise EndpointError(f"{url}: no answer within {timeout:g} s") from None
        if isinstance(err, ConnectionRefusedError | socket.gaierror):
            raise EndpointError(f"{url}: unreachable ({err})") from None
        raise EndpointError(f"{url}: connection failed ({err})") from None
    finally:
        watchdog.cancel()
        conn.close()


def _json(raw: bytes, url: str, status: int) -> dict[str, Any]:
    try:
        payload = json.loads(raw)
    except ValueError:
        payload = None
    if not isinstance(payload, dict):
        raise EndpointError(f"{url}: HTTP {status}, not a PromQL API answer: {raw[:200]!r}")
    return payload


def _number(text: Any) -> float:
    return float(text)  # Prometheus writes values as strings: "NaN", "+Inf" and numbers


def _series(data: dict[str, Any]) -> list[Series]:
    kind = data.get("resultType")
    result = data.get("result") or []
    if kind == "vector":
        return [
            Series(_labels(s["metric"]), [(float(s["value"][0]), _number(s["value"][1]))]) for s in result
        ]
    if kind == "matrix":
        return [
            Series(_labels(s["metric"]), [(float(t), _number(v)) for t, v in s["values"]]) for s in result
        ]
    if kind == "scalar":
        return [Series({}, [(float(result[0]), _number(result[1]))])]
    return []


def _labels(metric: Any) -> dict[str, str]:
    if not isinstance(metric, dict):
        raise TypeError(f"labels are {type(metric).__name__}, not an object")
    return {str(k): str(v) for k, v in metric.items()}


def finite(value: float | None) -> float | None:
    """A figure the report may print: NaN and infinities from the endpoint are no figure."""
    return value if value is not None and math.isfinite(value) else None


_STORE = re.compile(r"(?:Addr: |store |fetching store )(\S+)")
_LABELS = re.compile(r"LabelSets: (\{[^}]*\})")
_CODE = re.compile(r"rpc error: code = (\w+)")


def readable_warning(warning: str) -> str:
    """A partial-response warning as a reviewer reads it: which store and why, without the gRPC
    transport's nested "desc =" text (the full text still goes to stderr)."""
    code = _CODE.search(warning)
    if code is None:
        return warning
    store = _STORE.search(warning)
    labels = _LABELS.search(warning)
    reason = warning.rstrip('"').rsplit(": ", 1)[-1].strip('" ')
    where = f"store {store.group(1).rstrip(':,')}" if store else "a store"
    if labels:
        where += f" {labels.group(1)}"
    return f"{where} did not answer ({code.group(1)}: {reason})"
