"""A PromQL HTTP client for any endpoint that speaks Prometheus' query API: Prometheus, Thanos Query.

Every request has a timeout. Thanos' own parameters ride along on every request: `partial_response=true`
(so a shard that is down gives an answer with a warning instead of no answer) and `max_source_resolution`
(which downsampled data the store may serve). Prometheus ignores parameters it does not know. Warnings the
endpoint returns (Thanos names the unreachable store there) are kept with each answer, so the rows
computed from it can say so.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Answer", "EndpointError", "PromQLClient", "Series"]


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
        params = {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step_seconds:g}"}
        return self._query("/api/v1/query_range", params)

    def _query(self, path: str, params: dict[str, str]) -> Answer:
        params = {
            **params,
            "partial_response": "true",
            "max_source_resolution": self.max_source_resolution,
            # Prometheus and Thanos stop a query at this server-side timeout rather than run on after we
            # have given up on it.
            "timeout": f"{self.timeout_seconds:g}s",
        }
        body = urllib.parse.urlencode(params).encode()
        url = self.base_url.rstrip("/") + path
        request = urllib.request.Request(
            url, data=body, headers={"Content-Type": "application/x-www-form-urlencoded"}, method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_seconds) as response:
                payload = _json(response.read(), url)
        except urllib.error.HTTPError as err:
            payload = _json(err.read(), url, status=err.code)
            raise EndpointError(f"{url}: HTTP {err.code}: {payload.get('error', '(no error text)')}") from err
        except TimeoutError as err:
            raise EndpointError(f"{url}: no answer within {self.timeout_seconds:g} s") from err
        except urllib.error.URLError as err:
            if isinstance(err.reason, TimeoutError):
                raise EndpointError(f"{url}: no answer within {self.timeout_seconds:g} s") from err
            raise EndpointError(f"{url}: unreachable ({err.reason})") from err
        except OSError as err:
            raise EndpointError(f"{url}: connection failed ({err})") from err
        if payload.get("status") != "success":
            raise EndpointError(f"{url}: {payload.get('errorType', 'error')}: {payload.get('error')}")
        return Answer(_series(payload.get("data") or {}), [str(w) for w in payload.get("warnings") or []])


def _json(raw: bytes, url: str, status: int = 200) -> dict[str, Any]:
    try:
        payload = json.loads(raw)
    except ValueError as err:
        raise EndpointError(f"{url}: HTTP {status}, not a PromQL API answer: {raw[:200]!r}") from err
    if not isinstance(payload, dict):
        raise EndpointError(f"{url}: HTTP {status}, not a PromQL API answer: {raw[:200]!r}")
    return payload


def _series(data: dict[str, Any]) -> list[Series]:
    kind = data.get("resultType")
    result = data.get("result") or []
    if kind == "vector":
        return [Series(dict(s["metric"]), [(float(s["value"][0]), float(s["value"][1]))]) for s in result]
    if kind == "matrix":
        return [Series(dict(s["metric"]), [(float(t), float(v)) for t, v in s["values"]]) for s in result]
    if kind == "scalar":
        return [Series({}, [(float(result[0]), float(result[1]))])]
    return []
