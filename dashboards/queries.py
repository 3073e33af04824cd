"""PromQL pieces every dashboard uses: the label matchers of a per-target query, and rates.

The spec these read (the site's merged one under `make mixin`) is the one `building(spec)` was given:
dashboards.generate.build sets it for the duration of one build. It was read from thresholds.yml at
import time before, which a site's overrides could never reach.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from mssql_memory_exporter.collectors import server_properties

from alerts.spec import Spec

_BUILDING: ContextVar[Spec] = ContextVar("dashboards_spec")


@contextmanager
def building(spec: Spec) -> Iterator[Spec]:
    """Every query built inside reads `spec`'s selectors (and frame.py its Grafana settings)."""
    token = _BUILDING.set(spec)
    try:
        yield spec
    finally:
        _BUILDING.reset(token)


def site() -> Spec:
    """The spec of the build under way; outside one, an error rather than a silent default."""
    try:
        return _BUILDING.get()
    except LookupError:
        raise RuntimeError("dashboard queries are built inside queries.building(spec)") from None


def instance() -> str:
    """Label matchers of every per-target query: the spec's SQL Server selector first, so the Job
    variable's "All" (.+) never reaches the exporter's own job (with default_target its /metrics carries a
    target's series too, and the fleet table listed the exporter as two more instances)."""
    return f'{site().selector}, job=~"$job", instance=~"$instance"'


# $host selects the exporter whose /metrics has the host metrics.

HOST = 'instance=~"$host"'

# The host variable's first choice: matches no exporter (their instance is host:port), so the host panel
# stays empty until someone picks the exporter on the chosen instance's host.
NO_HOST = "(none)"


def m(metric: str, extra: str = "") -> str:
    """A metric (or recording rule) of the selected job and instance(s)."""
    return f"{metric}{{{instance()}{', ' + extra if extra else ''}}}"


def rate(counter: str, extra: str = "") -> str:
    return f"rate({m(counter, extra)}[$__rate_interval])"


def with_workload(expr: str) -> str:
    """The series of `expr` with its target's workload label (oltp or olap, from mssql_target_info), for
    legends and per-workload colours."""
    return f"{expr}\n* on (job, instance) group_left (workload) {m(server_properties.TARGET_INFO.name)}"
