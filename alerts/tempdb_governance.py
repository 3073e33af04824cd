"""Rules on SQL Server 2025's tempdb space resource governance: a workload group's use against its limit,
and the requests its limit stopped (error 1138).

Both warn and neither pages. A violation is the governor doing its job: one group's request failed so
that tempdb, and every other group, kept their room; the instance is healthy and the fix (a larger
limit, or the query that spilled) is daytime work. tempdb itself running out pages through
MSSQLTempdbHeadroomLow. Thresholds: alerts/thresholds.yml `tempdb.workload_group_*`.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from mssql_memory_exporter.collectors import tempdb_governance as gov

from . import names as N
from .rule_parts import alert, metric
from .spec import Spec, number


def recording_rules(spec: Spec) -> list[dict[str, Any]]:
    m = partial(metric, spec)
    return [
        {
            # Only groups with a limit in effect have a limit series, so only they get a share. Both
            # series come from the same scrape of the same target: matching on every label keeps the
            # target's own labels (a site's env, region, ...) on the result.
            "record": N.TEMPDB_GROUP_LIMIT_USED,
            "expr": f"{m(gov.SPACE_BYTES.name)}\n/ ({m(gov.LIMIT_BYTES.name)} > 0)",
        }
    ]


def _group_limit(otherwise: str) -> str:
    """Template text quoting the alerting group's own limit (humanized bytes), or `otherwise`."""
    lookup = f"{gov.LIMIT_BYTES.name}{{job='%s',instance='%s',workload_group='%s'}}"
    return (
        f'{{{{ with printf "{lookup}" $labels.job $labels.instance $labels.workload_group | query }}}}'
        f"{{{{ . | first | value | humanize1024 }}}}B{{{{ else }}}}{otherwise}{{{{ end }}}}"
    )


def alert_rules(spec: Spec) -> list[dict[str, Any]]:
    t = spec.tempdb
    window = spec.window(t.workload_group_violations_window)
    return [
        alert(
            spec,
            N.TEMPDB_GROUP_LIMIT_HIT,
            f"increase({metric(spec, gov.VIOLATIONS.name)}[{window}]) > 0",
            None,
            "warning",
            "Workload group {{ $labels.workload_group }} on {{ $labels.instance }} hit its tempdb limit",
            "{{ $value | humanize }} requests of workload group {{ $labels.workload_group }} were aborted"
            f" with error 1138 in the last {t.workload_group_violations_window}: they would have taken the"
            f" group over its tempdb limit ({_group_limit('not in effect now')}). tempdb and the other groups"
            " kept their room.",
        ),
        alert(
            spec,
            N.TEMPDB_GROUP_NEAR_LIMIT,
            f"{N.TEMPDB_GROUP_LIMIT_USED} > {number(t.workload_group_near_limit_share)}",
            t.workload_group_near_limit_for,
            "warning",
            "Workload group {{ $labels.workload_group }} on {{ $labels.instance }} is near its tempdb limit",
            "Workload group {{ $labels.workload_group }} holds {{ $value | humanizePercentage }} of its"
            f" tempdb limit of {_group_limit('unknown')} (warning above"
            f" {number(t.workload_group_near_limit_share * 100)}%): its next request that needs more tempdb"
            " fails with error 1138.",
        ),
    ]
