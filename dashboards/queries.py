"""PromQL pieces every dashboard uses: the label matchers of a per-target query, and rates."""

from __future__ import annotations

from alerts.spec import load

# Label matchers of every per-target query: the spec's SQL Server selector first, so the Job variable's
# "All" (.+) never reaches the exporter's own job (with default_target its /metrics carries a target's
# series too, and the fleet table listed the exporter as two more instances). $host selects the exporter
# whose /metrics has the host metrics.
INSTANCE = f'{load().selector}, job=~"$job", instance=~"$instance"'

HOST = 'instance=~"$host"'

# The host variable's first choice: matches no exporter (their instance is host:port), so the host panel
# stays empty until someone picks the exporter on the chosen instance's host.
NO_HOST = "(none)"


def m(metric: str, extra: str = "") -> str:
    """A metric (or recording rule) of the selected job and instance(s)."""
    return f"{metric}{{{INSTANCE}{', ' + extra if extra else ''}}}"


def rate(counter: str, extra: str = "") -> str:
    return f"rate({m(counter, extra)}[$__rate_interval])"


def with_workload(expr: str) -> str:
    """The series of `expr` with its target's workload label (oltp or olap, from mssql_target_info), for
    legends and per-workload colours."""
    return f"{expr}\n* on (job, instance) group_left (workload) {m('mssql_target_info')}"
