"""Opt-in alerts on the collector files shipped with the exporter (docs/custom-collectors.md): SQL Server
Agent jobs that failed or run too long, full and log backups that are too old, and a blocked wait that
lasts. Written to alerts/rules/optional/ like the other opt-in groups: a site that switches the files on
loads this file too; loaded without them, the rules would select nothing.

The metric names are read from the shipped files themselves, so a renamed metric fails the generator
instead of leaving an alert on a series nobody exports.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import yaml
from mssql_memory_exporter.config.custom import SHIPPED_DIR

from . import group_names
from . import names as N
from .rule_parts import INSTANCE, alert, metric
from .spec import Spec, duration_seconds, number

FILE_NAME = "optional/mssql.shipped-collectors.rules.yml"


@cache
def shipped_metrics() -> frozenset[str]:
    """Every metric name the shipped collector files declare."""
    found: set[str] = set()
    for path in sorted(Path(SHIPPED_DIR).glob("*.yml")):
        for collector in yaml.safe_load(path.read_text())["collectors"]:
            found.update(m["name"] for m in collector["metrics"])
    return frozenset(found)


def shipped(name: str) -> str:
    if name not in shipped_metrics():
        raise ValueError(f"{name} is not a metric of the shipped collector files ({SHIPPED_DIR})")
    return name


JOB_FAILED = shipped("mssql_custom_agent_job_last_run_failed")
JOB_ENABLED = shipped("mssql_custom_agent_job_enabled")
JOB_RUNNING = shipped("mssql_custom_agent_job_running_seconds")
BACKUP_AGE = shipped("mssql_custom_backup_age_seconds")
# Only these recovery models keep the log until it is backed up (the shipped query leaves SIMPLE's out too).
LOGGED = 'recovery_model=~"FULL|BULK_LOGGED"'
BLOCKED_WAIT = shipped("mssql_custom_blocked_wait_longest_seconds")


def _backups(spec: Spec, backup_type: str, extra: str = "") -> str:
    excluded = spec.shipped_collectors.backup_exclude_databases
    matchers = [f'backup_type="{backup_type}"']
    if excluded:
        matchers.append(f'database_name!~"{excluded}"')
    if extra:
        matchers.append(extra)
    return metric(spec, BACKUP_AGE, ", ".join(matchers))


def alert_rules(spec: Spec) -> list[dict[str, Any]]:
    s = spec.shipped_collectors
    max_run = duration_seconds(s.agent_job_max_run)
    full_age = duration_seconds(s.backup_full_max_age)
    log_age = duration_seconds(s.backup_log_max_age)
    blocked = duration_seconds(s.blocked_wait_max)
    enabled = metric(spec, JOB_ENABLED)
    return [
        alert(
            spec,
            N.AGENT_JOB_FAILED,
            f"{metric(spec, JOB_FAILED)} == 1\nand on ({INSTANCE}, agent_job)\n{enabled} == 1",
            s.agent_job_failed_for,
            "warning",
            "SQL Server Agent job {{ $labels.agent_job }} failed on its last run",
            "The last completed run of the enabled Agent job {{ $labels.agent_job }} on"
            " {{ $labels.instance }} failed (msdb.dbo.sysjobhistory, step 0: last_run_failed {{ $value }})."
            " The job history says which step failed and why.",
        ),
        alert(
            spec,
            N.AGENT_JOB_LONG_RUNNING,
            f"{metric(spec, JOB_RUNNING)} > {number(max_run)}",
            s.agent_job_long_run_for,
            "warning",
            "SQL Server Agent job {{ $labels.agent_job }} has run for {{ $value | humanizeDuration }}",
            "Agent job {{ $labels.agent_job }} on {{ $labels.instance }} has been running for"
            f" {{{{ $value | humanizeDuration }}}} (limit: {s.agent_job_max_run}). A job that usually ends"
            " sooner is blocked, waiting, or working on far more data than usual.",
        ),
        alert(
            spec,
            N.BACKUP_FULL_OLD,
            f"{_backups(spec, 'full')} > {number(full_age)}",
            s.backup_for,
            "warning",
            "Database {{ $labels.database_name }} has no full backup for {{ $value | humanizeDuration }}",
            "The last full backup of database {{ $labels.database_name }} on {{ $labels.instance }} finished"
            f" {{{{ $value | humanizeDuration }}}} ago (limit: {s.backup_full_max_age}); a database never"
            " backed up counts from its creation (mssql_custom_backup_present 0). Copy-only backups do not"
            " count.",
        ),
        alert(
            spec,
            N.BACKUP_LOG_OLD,
            f"{_backups(spec, 'log', LOGGED)} > {number(log_age)}",
            s.backup_for,
            "warning",
            "Database {{ $labels.database_name }} has no log backup for {{ $value | humanizeDuration }}",
            "Database {{ $labels.database_name }} on {{ $labels.instance }} is in"
            " {{ $labels.recovery_model }} recovery and its last log backup finished"
            " {{ $value | humanizeDuration }} ago"
            f" (limit: {s.backup_log_max_age}): its log cannot be truncated and grows, and a restore would"
            " lose everything since.",
        ),
        alert(
            spec,
            N.BLOCKED_WAIT_LONG,
            f"{metric(spec, BLOCKED_WAIT)} > {number(blocked)}",
            s.blocked_wait_for,
            "warning",
            "A request on {{ $labels.instance }} has been blocked for {{ $value | humanizeDuration }}",
            "The longest-blocked request on {{ $labels.instance }} has waited {{ $value | humanizeDuration }}"
            f" for another session's lock (limit: {s.blocked_wait_max}); mssql_custom_head_blockers counts"
            " the sessions at the head of the chains.",
        ),
    ]


def groups(spec: Spec) -> dict[str, Any]:
    return {"groups": [{"name": group_names.SHIPPED_COLLECTORS, "rules": alert_rules(spec)}]}
