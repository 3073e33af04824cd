"""Rules on tempdb's room and layout, and on I/O latency per volume and file type.

tempdb's room (its data files; the log has its own limits): what is free inside the files, plus what
autogrowth can still add. Files share volumes, so the growth room is computed per volume: the volume's
free space when a data file on it grows without a maximum, otherwise the room up to the capped files'
maximums, never more than the volume's free space. Growth comes in whole steps: since SQL Server 2016
tempdb grows all its data files together (AUTOGROW_ALL_FILES), so one growth needs the steps of every
growing file on a volume at once, and a volume's free space counts only in whole such events (a volume
with less free space than one event can add nothing). The exporter reads the pieces
(`mssql_tempdb_file_*`, `mssql_tempdb_volume_free_bytes`); these rules combine them. Thresholds:
alerts/thresholds.yml `tempdb.*` and `io_latency.*`.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from mssql_memory_exporter.collectors import (
    sys_info,
    tempdb_files,
    tempdb_log,
    tempdb_usage,
    tempdb_volumes,
    volumes,
)

from . import names as N
from .names import RuleNames
from .rule_parts import alert, instance_value, metric, with_instance_series
from .spec import Spec, number

DATA = 'file_type="data"'
UNALLOCATED = 'usage="unallocated"'
VERSION_STORE = 'usage="version_store"'


def _growth_rules(spec: Spec, file_type: str, event: str, room: str, together: bool) -> list[dict[str, Any]]:
    """What one growth takes from each volume and what autogrowth can still add there, for tempdb's data
    files (`together`: they all grow at once, so one growth takes every growing file's step) or its log
    (its files grow one at a time, so the smallest step is what a growth needs)."""
    m = partial(metric, spec)
    kind = f'file_type="{file_type}"'
    growing = (
        f"(\n    {m(tempdb_files.GROWTH_BYTES.name, kind)} > 0\n"
        f"    or {m(tempdb_files.GROWTH_RATIO.name, kind)} > 0\n  )"
    )
    size, maximum = m(tempdb_files.SIZE_BYTES.name, kind), m(tempdb_files.MAX_SIZE_BYTES.name, kind)
    capped = f"sum without (file, file_type) (\n  clamp_min({maximum} - {size}, 0)\n  and {growing}\n)"
    unlimited = (
        "count without (file, file_type) (\n"
        f"  {m(tempdb_files.MAX_SIZE_UNLIMITED.name, kind)} == 1\n  and {growing}\n)"
    )
    free = m(tempdb_volumes.FREE_BYTES.name)
    # The volume's free space in whole growth events: what growth can actually use of it.
    usable = f"floor({free} / {event}) * {event}"
    return [
        {
            # The next step of every file that may still grow (a percentage step at today's size; the
            # next ones are larger). A file at its maximum takes nothing.
            "record": event,
            "expr": (
                f"{'sum' if together else 'min'} without (file, file_type) (\n"
                "  (\n"
                f"    {m(tempdb_files.GROWTH_BYTES.name, kind)} > 0\n"
                f"    or\n    ({m(tempdb_files.GROWTH_RATIO.name, kind)} > 0) * {size}\n"
                "  )\n"
                f"  and (\n    {m(tempdb_files.MAX_SIZE_UNLIMITED.name, kind)} == 1\n"
                f"    or\n    {maximum} - {size} > 0\n  )\n)"
            ),
        },
        {
            # The volume's free space in whole growth events where a file grows without a maximum; else
            # the capped files' room, at most that; 0 where no file may grow.
            "record": room,
            "expr": (
                f"(\n  {usable}\n  and\n  {_indent(unlimited)}\n)\n"
                f"or\n(\n  {_indent(capped)}\n  < {usable}\n)\n"
                f"or\n(\n  {usable}\n  and\n  {_indent(capped)}\n)\n"
                f"or\n{free} * 0"
            ),
        },
    ]


def recording_rules(spec: Spec) -> list[dict[str, Any]]:
    m = partial(metric, spec)
    t = spec.tempdb
    names = RuleNames.from_spec(spec)
    data_size = f"sum without (file, file_type, volume) ({m(tempdb_files.SIZE_BYTES.name, DATA)})"
    log_size, log_used = m(tempdb_log.SIZE_BYTES.name), m(tempdb_log.USED_BYTES.name)
    fact = partial(_fact, spec)
    rules: list[dict[str, Any]] = [
        {
            "record": N.TEMPDB_FREE_IN_FILES,
            "expr": (
                "sum without (file, file_type, usage) (\n"
                f"  {m(tempdb_usage.SPACE_BYTES.name, UNALLOCATED)}\n)"
            ),
        },
        *_growth_rules(spec, "data", N.TEMPDB_GROWTH_EVENT, N.TEMPDB_GROWTH_ROOM, together=True),
        {
            # Absent when either part is unknown (a refused view): a headroom of 0 would page for nothing.
            "record": N.TEMPDB_HEADROOM,
            "expr": (
                f"sum without (volume) ({N.TEMPDB_FREE_IN_FILES})\n"
                f"+ sum without (volume) ({N.TEMPDB_GROWTH_ROOM})"
            ),
        },
        {
            # The headroom as a share of all tempdb's data could take: its data files now plus the room.
            "record": N.TEMPDB_HEADROOM_RATIO,
            "expr": (
                f"{N.TEMPDB_HEADROOM}\n/ (\n  (\n    {data_size}\n"
                f"    + sum without (volume) ({N.TEMPDB_GROWTH_ROOM})\n  ) > 0\n)"
            ),
        },
        *_growth_rules(spec, "log", N.TEMPDB_LOG_GROWTH_EVENT, N.TEMPDB_LOG_GROWTH_ROOM, together=False),
        {
            # The log's room: what its active part leaves free, plus what its autogrowth can still add.
            "record": N.TEMPDB_LOG_HEADROOM,
            "expr": f"{log_size} - {log_used}\n+ sum without (volume) ({N.TEMPDB_LOG_GROWTH_ROOM})",
        },
        {
            "record": N.TEMPDB_LOG_HEADROOM_RATIO,
            "expr": (
                f"{N.TEMPDB_LOG_HEADROOM}\n/ (\n  (\n    {log_size}\n"
                f"    + sum without (volume) ({N.TEMPDB_LOG_GROWTH_ROOM})\n  ) > 0\n)"
            ),
        },
        {
            # The headroom the trend over the projection window predicts projection_horizon_seconds ahead.
            "record": names.tempdb_predicted,
            "expr": (
                f"predict_linear({N.TEMPDB_HEADROOM}[{spec.window(t.projection_window)}],"
                f" {number(t.projection_horizon_seconds)})"
            ),
        },
        {
            # Seconds until the headroom is gone at the trend over the projection window; only while it
            # shrinks.
            "record": names.tempdb_exhausted_in,
            "expr": (
                f"{N.TEMPDB_HEADROOM}\n"
                f"/ (-deriv({N.TEMPDB_HEADROOM}[{spec.window(t.projection_window)}]) > 0)"
            ),
        },
        {
            "record": N.TEMPDB_VERSION_STORE_BYTES,
            "expr": (
                "sum without (file, file_type, volume, usage) (\n"
                f"  {m(tempdb_usage.SPACE_BYTES.name, VERSION_STORE)}\n)"
            ),
        },
        {
            # How many of the layout checks fail (0 is the advised layout). Facts the exporter cannot
            # tell yet (settings not read, a volume it cannot name) count as passing.
            "record": N.TEMPDB_LAYOUT_PROBLEMS,
            "expr": (
                f"(\n  {m(tempdb_files.DATA_FILES.name)}\n"
                f"  < bool clamp_max({m(sys_info.LOGICAL_CPUS.name)}, "
                f"{number(t.advised_max_data_files)})\n)\n"
                f"+ {fact(tempdb_files.EQUAL_SIZE.name, '== bool 0')}\n"
                f"+ {fact(tempdb_files.EQUAL_GROWTH.name, '== bool 0')}\n"
                f"+ {fact(tempdb_files.PERCENT_GROWTH_FILES.name, '> bool 0')}\n"
                f"+ {fact(tempdb_files.SYSTEM_VOLUME_FILES.name, '> bool 0')}"
            ),
        },
    ]
    w = spec.window(spec.rate_window)

    def per_volume(counter: str) -> str:
        return f"rate({m(counter)}[{w}])"

    for what, stall, ops in (
        ("read", volumes.READ_STALL_SECONDS.name, volumes.READS.name),
        ("write", volumes.WRITE_STALL_SECONDS.name, volumes.WRITES.name),
    ):
        rules.append({"record": names.volume_io(f"{what}s"), "expr": per_volume(ops)})
        rules.append(
            {
                # Stall time summed over the operations ÷ operations: the average wait of one.
                "record": names.volume_io(f"{what}_latency_seconds"),
                "expr": f"{per_volume(stall)}\n/ ({names.volume_io(what + 's')} > 0)",
            }
        )
    for what, size, ops in (
        ("read", volumes.READ_BYTES.name, "reads"),
        ("write", volumes.WRITTEN_BYTES.name, "writes"),
    ):
        rules.append(
            {
                "record": names.volume_io(f"{what}_size_bytes"),
                "expr": f"{per_volume(size)}\n/ ({names.volume_io(ops)} > 0)",
            }
        )
    return rules


def _fact(spec: Spec, name: str, check: str) -> str:
    """A 0/1 check of a layout fact, 0 where the fact is absent (not known yet)."""
    return f"(\n  {metric(spec, name)} {check}\n  or {metric(spec, tempdb_files.DATA_FILES.name)} * 0\n)"


def _indent(text: str) -> str:
    return text.replace("\n", "\n  ")


def _headroom_alerts(
    spec: Spec, name: str, ratio: str, headroom: str, what: tuple[str, str], consequence: str
) -> list[dict[str, Any]]:
    """The warning and the critical of one headroom ratio, at tempdb's one pair of limits. `what`: the
    summary's subject and the description's opening."""
    t = spec.tempdb
    subject, opening = what
    return [
        alert(
            spec,
            name,
            f"{ratio} < {number(share)}",
            t.headroom_for,
            severity,
            subject + " on {{ $labels.instance }} is running out of room",
            f"{opening} still add leave {{{{ $value | humanizePercentage }}}} of its room free"
            f" (limit {number(share)}): "
            + instance_value(headroom, "humanize1024", "B")
            + " left."
            + consequence,
        )
        for severity, share in (
            ("warning", t.headroom_warning_share),
            ("critical", t.headroom_critical_share),
        )
    ]


def alert_rules(spec: Spec) -> list[dict[str, Any]]:
    t = spec.tempdb
    names = RuleNames.from_spec(spec)
    reuse_wait = (
        with_instance_series(tempdb_log.REUSE_WAIT.name)
        + "{{ (first .).Labels.reason }}{{ else }}unknown{{ end }}"
    )
    rules = _headroom_alerts(
        spec,
        N.TEMPDB_HEADROOM_LOW,
        N.TEMPDB_HEADROOM_RATIO,
        N.TEMPDB_HEADROOM,
        ("tempdb", "tempdb's data files and what autogrowth can"),
        " A full tempdb stops every query that needs it (error 1105).",
    )
    rules += _headroom_alerts(
        spec,
        N.TEMPDB_LOG_HEADROOM_LOW,
        N.TEMPDB_LOG_HEADROOM_RATIO,
        N.TEMPDB_LOG_HEADROOM,
        ("tempdb's log", "tempdb's log and what its autogrowth can"),
        f" Its log_reuse_wait_desc: {reuse_wait}. A full tempdb log (error 9002) stops every change in"
        " tempdb.",
    )
    rules += [
        alert(
            spec,
            N.TEMPDB_PROJECTED_FULL,
            f"{names.tempdb_predicted} < 0",
            t.projected_full_for,
            "warning",
            "tempdb on {{ $labels.instance }} is projected to fill up",
            f"At its trend over the last {t.projection_window}, tempdb's headroom runs out within "
            f"{number(t.projection_horizon_seconds / 3600)} hours (predicted headroom then: "
            "{{ $value | humanize1024 }}B; out in "
            + instance_value(names.tempdb_exhausted_in, "humanizeDuration")
            + "). Now: "
            + instance_value(N.TEMPDB_HEADROOM, "humanize1024", "B")
            + " left.",
        ),
        alert(
            spec,
            N.TEMPDB_VERSION_STORE,
            f"deriv({N.TEMPDB_VERSION_STORE_BYTES}[{spec.window(t.version_store_window)}]) > 0\n"
            f"and {N.TEMPDB_VERSION_STORE_BYTES} > {number(t.version_store_min_bytes)}",
            t.version_store_for,
            "warning",
            "tempdb's version store on {{ $labels.instance }} keeps growing",
            f"The version store has grown over every {t.version_store_window} window for"
            f" {t.version_store_for} (now {{{{ $value | humanize }}}}B/s;"
            " size " + instance_value(N.TEMPDB_VERSION_STORE_BYTES, "humanize1024", "B") + "). A transaction"
            " that stays open keeps every row version since it began: find it before tempdb fills.",
        ),
        alert(
            spec,
            N.TEMPDB_LAYOUT,
            f"{N.TEMPDB_LAYOUT_PROBLEMS} > 0",
            t.layout_for,
            "info",
            "tempdb on {{ $labels.instance }} is not laid out as advised",
            "{{ $value }} of tempdb's layout checks fail. Data files: "
            + instance_value(tempdb_files.DATA_FILES.name, "printf \"%.0f\"")
            + " for "
            + instance_value(sys_info.LOGICAL_CPUS.name, "printf \"%.0f\"")
            + f" logical CPUs (advised: as many, up to {number(t.advised_max_data_files)}); equal sizes: "
            + instance_value(tempdb_files.EQUAL_SIZE.name, "printf \"%.0f\"")
            + "; equal growth: "
            + instance_value(tempdb_files.EQUAL_GROWTH.name, "printf \"%.0f\"")
            + "; files growing by a percentage: "
            + instance_value(tempdb_files.PERCENT_GROWTH_FILES.name, "printf \"%.0f\"")
            + "; files on the system volume: "
            + instance_value(tempdb_files.SYSTEM_VOLUME_FILES.name, "printf \"%.0f\"")
            + ".",
        ),
    ]
    io = spec.io_latency
    busy = number(io.min_operations_per_second)
    for name, what, file_type, limit in (
        (N.LOG_WRITE_LATENCY, "write", "log", io.log_write_max_seconds),
        (N.DATA_READ_LATENCY, "read", "data", io.data_read_max_seconds),
    ):
        latency = f'{names.volume_io(what + "_latency_seconds")}{{file_type="{file_type}"}}'
        rules.append(
            alert(
                spec,
                name,
                f"{latency} > {number(limit)}\n"
                f"and on (job, instance, volume, file_type) {names.volume_io(what + 's')} > {busy}",
                io.for_,
                "warning",
                f"Slow {file_type} {what}s on {{{{ $labels.volume }}}} of {{{{ $labels.instance }}}}",
                f"{file_type.capitalize()} file {what}s on volume {{{{ $labels.volume }}}} take"
                f" {{{{ $value | humanizeDuration }}}} on average over {spec.rate_window} (limit"
                f" {number(limit * 1000)} ms, Microsoft's 10-15 ms I/O bottleneck range; only with more than"
                f" {busy} {what}s/s).",
            )
        )
    return rules
