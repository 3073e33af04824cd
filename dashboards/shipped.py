"""The memory dashboard's row for the collector files shipped with the exporter (docs/custom-collectors.md):
SQL Server Agent jobs, backup age, blocking. Beside their opt-in alerts (alerts/shipped_collectors.py),
with the same limits from the spec and the same metric names, read from the shipped files themselves.

On the per-instance dashboard because that is where a DBA diagnoses one server: a failed job, an old
backup or a blocked chain is a fact of that instance, read beside its memory. The fleet board compares
capacity across instances and the endurance board tempdb's drives; neither is where these are looked for.
The files are off by default: the row is collapsed, so a site without them sees one line, and each panel
says, when empty, which file switches it on.
"""

from __future__ import annotations

from mssql_memory_exporter.scrape import scrape_metrics

from alerts import names as N
from alerts.shipped_collectors import (
    BACKUP_AGE,
    BLOCKED_WAIT,
    JOB_ENABLED,
    JOB_FAILED,
    JOB_RUNNING,
    shipped,
    shipped_file,
)
from alerts.spec import duration_seconds

from .empty import AZURE_SQL_DATABASE
from .grafana import (
    GREEN,
    RED,
    Panel,
    Query,
    Row,
    Thresholds,
    cell_colour,
    merge_and_organize,
    override,
    value_map,
)
from .limits import Limits
from .panels import ANY
from .queries import m, rate

BLOCKED = shipped("mssql_custom_blocked_requests")
HEAD_BLOCKERS = shipped("mssql_custom_head_blockers")
DEADLOCKS = shipped("mssql_custom_deadlocks_total")

ROW_TITLE = "Agent jobs, backups and blocking (shipped collector files)"
TABLE_HIDDEN = ("Time", "__name__")


def shipped_off(*metrics: str, lacking: str = "") -> str:
    """Empty while the shipped file that declares `metrics` is off (the default) or failing: which file,
    and the line of the exporter's config that switches it on."""
    files = sorted({shipped_file(metric) for metric in metrics})
    where = f"; {lacking}" if lacking else ""
    return (
        f"No data: the shipped collector file {', '.join(files)} is off by default. Switch it on with "
        f"collector_files: [{', '.join(files)}] in the exporter's config (docs/custom-collectors.md); "
        f"or it is failing ({scrape_metrics.COLLECTOR_SUCCESS.name}){where}"
    )


def _by(labels: str, metric: str, extra: str = "") -> Query:
    """One column of a table: the metric of the chosen instance, one row per `labels`."""
    return Query(f"max by ({labels}) ({m(metric, extra)})", instant=True, table=True)


def agent_jobs_panel(lim: Limits) -> Panel:
    s = lim.spec.shipped_collectors
    max_run = duration_seconds(s.agent_job_max_run)
    renames = {"Value #A": "Enabled", "Value #B": "Last run", "Value #C": "Running for"}
    return Panel(
        "table",
        "SQL Agent jobs",
        "One row per Agent job (msdb.dbo.sysjobs): enabled or not, whether its last completed run failed "
        "(sysjobhistory, step 0), and how long its current run has lasted (empty when it is not running). "
        f"Healthy: no enabled job failed, no run past {s.agent_job_max_run} ({N.AGENT_JOB_FAILED} and "
        f"{N.AGENT_JOB_LONG_RUNNING} warn after {s.agent_job_failed_for} and {s.agent_job_long_run_for}). "
        "A disabled job's failure is shown but not alerted on.",
        "none",
        [
            _by("agent_job", JOB_ENABLED),
            _by("agent_job", JOB_FAILED),
            _by("agent_job", JOB_RUNNING),
        ],
        width=12,
        overrides=[
            override("Enabled", ("mappings", value_map({0: ("disabled", RED), 1: ("enabled", GREEN)}))),
            override(
                "Last run",
                ("mappings", value_map({0: ("succeeded", GREEN), 1: ("failed", RED)})),
                ("thresholds", Thresholds.healthy_below(ANY).json()),
                cell_colour(background=True),
            ),
            override(
                "Running for",
                ("unit", "s"),
                ("thresholds", Thresholds.healthy_below(max_run).json()),
                cell_colour(background=False),
            ),
        ],
        transformations=merge_and_organize(renames, ["agent_job", *renames.values()], TABLE_HIDDEN),
        options={"sortBy": [{"desc": True, "displayName": "Last run"}]},
        links=[lim.runbook(N.AGENT_JOB_FAILED), lim.runbook(N.AGENT_JOB_LONG_RUNNING)],
        no_value=shipped_off(JOB_ENABLED, lacking=AZURE_SQL_DATABASE),
    )


def backup_age_panel(lim: Limits) -> Panel:
    s = lim.spec.shipped_collectors
    # Each backup type against its own alert's limit; a differential backup has no alert of its own.
    limits = {
        "full": ("Full", duration_seconds(s.backup_full_max_age)),
        "differential": ("Differential", None),
        "log": ("Log", duration_seconds(s.backup_log_max_age)),
    }
    renames = {f"Value #{chr(ord('A') + i)}": header for i, (header, _) in enumerate(limits.values())}
    return Panel(
        "table",
        "Backup age per database",
        "Time since each database's last full, differential and log backup finished (msdb.dbo.backupset, "
        "copy-only backups left out); a database never backed up counts from its creation. Log backups "
        "only for databases in FULL or BULK_LOGGED recovery, where the log grows until it is backed up. "
        f"Healthy: full under {s.backup_full_max_age} and log under {s.backup_log_max_age} (red from "
        f"there: {N.BACKUP_FULL_OLD} and {N.BACKUP_LOG_OLD} warn after {s.backup_for}, leaving out the "
        "databases the spec excludes).",
        "s",
        [_by("database_name, recovery_model", BACKUP_AGE, f'backup_type="{kind}"') for kind in limits],
        width=12,
        overrides=[
            override(header, ("thresholds", Thresholds.healthy_below(limit).json()), cell_colour(False))
            for header, limit in limits.values()
            if limit is not None
        ],
        transformations=merge_and_organize(
            renames, ["database_name", "recovery_model", *renames.values()], TABLE_HIDDEN
        ),
        options={"sortBy": [{"desc": True, "displayName": "Full"}]},
        links=[lim.runbook(N.BACKUP_FULL_OLD), lim.runbook(N.BACKUP_LOG_OLD)],
        no_value=shipped_off(BACKUP_AGE, lacking=AZURE_SQL_DATABASE),
    )


def blocking_panels(lim: Limits) -> list[Panel]:
    s = lim.spec.shipped_collectors
    return [
        Panel(
            "timeseries",
            "Longest blocked wait",
            "How long the longest-blocked request has waited so far for another session's lock "
            "(sys.dm_exec_requests, wait_time of the requests with a blocking_session_id); 0 when none is "
            f"blocked. Healthy: short spikes only. Past {s.blocked_wait_max} for {s.blocked_wait_for}, "
            f"{N.BLOCKED_WAIT_LONG} warns: the alert is on the wait, not on how many wait.",
            "s",
            [Query(m(BLOCKED_WAIT), "longest blocked wait")],
            width=8,
            min=0,
            thresholds=Thresholds.healthy_below(duration_seconds(s.blocked_wait_max)),
            links=[lim.runbook(N.BLOCKED_WAIT_LONG)],
            no_value=shipped_off(BLOCKED_WAIT),
        ),
        Panel(
            "timeseries",
            "Blocked requests and head blockers",
            "Requests waiting on a lock another session holds, and the sessions at the head of the chains "
            "(blocking others while not blocked themselves). Healthy: 0 most of the time; a few for "
            "moments is normal locking. One head blocker with many blocked requests behind it for minutes "
            "is a transaction left open or a long write: the longest wait beside says for how long.",
            "none",
            [Query(m(BLOCKED), "blocked requests"), Query(m(HEAD_BLOCKERS), "head blockers")],
            width=8,
            min=0,
            custom={"axisLabel": "requests, sessions"},
            links=[lim.runbook(N.BLOCKED_WAIT_LONG)],
            no_value=shipped_off(BLOCKED, HEAD_BLOCKERS),
        ),
        Panel(
            "timeseries",
            "Deadlocks",
            "Deadlocks per second (Locks object, Number of Deadlocks/sec, _Total): each one a transaction "
            "SQL Server chose as the victim and rolled back (error 1205). Healthy: 0; a steady rate is an "
            "access-order problem in the application, which the system_health session's deadlock graphs "
            "show.",
            "suffix: deadlocks/s",
            [Query(rate(DEADLOCKS), "deadlocks")],
            width=8,
            min=0,
            no_value=shipped_off(DEADLOCKS),
        ),
    ]


def memory_row_shipped(lim: Limits) -> list[Panel | Row]:
    """The memory dashboard's collapsed row of the shipped collector files' panels."""
    return [
        Row(ROW_TITLE, collapsed=True),
        agent_jobs_panel(lim),
        backup_age_panel(lim),
        *blocking_panels(lim),
    ]
