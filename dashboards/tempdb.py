"""The endurance dashboard's tempdb rows, beside the tempdb alerts (alerts/tempdb.py): tempdb's writes,
its space and layout, and I/O latency per volume."""

from __future__ import annotations

from mssql_memory_exporter.collectors import (
    sys_info,
    tempdb,
    tempdb_files,
    tempdb_governance,
    tempdb_log,
    tempdb_usage,
    volumes,
)
from mssql_memory_exporter.host import collector as host_collector

from alerts import names as names_
from alerts.spec import number as num

from .empty import AZURE_SQL_DATABASE, off
from .grafana import (
    GREEN,
    ORANGE,
    RED,
    Panel,
    Query,
    Row,
    Step,
    Thresholds,
    merge_and_organize,
    override,
    override_query,
)
from .limits import Limits, duration, pct
from .panels import ANY, STACKED, UNSTACKED
from .pools import enough_instance_data
from .queries import HOST, NO_HOST, m, rate
from .tempdb_governance import governance_panels


def endurance_row_tempdb(lim: Limits) -> list[Panel | Row]:
    """The endurance dashboard's row "tempdb"."""
    short_w = lim.tempdb_short_window
    return [
        Row("tempdb"),
        Panel(
            "timeseries",
            "tempdb writes per file",
            "Bytes per second written to each tempdb file (sys.dm_io_virtual_file_stats). Healthy: spread "
            "evenly over the data files, which should be equal in size; one file taking most writes points "
            "at unequal sizes or autogrowth.",
            "Bps",
            [
                Query(
                    f"sum by (file, volume) ({rate(tempdb.WRITTEN_BYTES.name)})",
                    "{{file}} ({{volume}})",
                )
            ],
            min=0,
            # Stacked: evenly spread files are equal bands (eight identical lines hid each other), and the
            # top edge is tempdb's total.
            custom=STACKED,
            no_value=off(tempdb),
        ),
        Panel(
            "timeseries",
            "tempdb writes per volume",
            f"tempdb writes summed per volume, with this instance's tempdb total averaged over {short_w} and "
            f"{lim.tempdb_long_window} (drawn once it rests on "
            f"{duration(lim.endurance.projection_min_coverage_seconds)} of data, as the stat above). No "
            "healthy range of its own: the volumes are where the wear lands, so put them in SSD pools to "
            "weigh it against the drives' rating.",
            "Bps",
            [
                Query(f"sum by (volume) ({rate(tempdb.WRITTEN_BYTES.name)})", "{{volume}}"),
                Query(m(lim.rule("tempdb_short")), f"all tempdb files, {short_w} average"),
                Query(
                    enough_instance_data(lim, m(lim.rule("tempdb_long"))),
                    f"all tempdb files, {lim.tempdb_long_window} average",
                ),
            ],
            min=0,
            no_value=off(tempdb, lacking=AZURE_SQL_DATABASE),
        ),
        Panel(
            "timeseries",
            "tempdb write latency per file",
            "Average wait per write to each tempdb file (write stall time ÷ writes). Healthy: flat and close "
            "to the drives' datasheet latency; rising latency with rising writes means the volume is "
            "saturated.",
            "s",
            [
                Query(
                    f"{rate(tempdb.WRITE_STALL_SECONDS.name)}\n/ ({rate(tempdb.WRITES.name)} > 0)",
                    "{{file}} ({{volume}})",
                )
            ],
            min=0,
            no_value=off(tempdb, also="No tempdb writes in this range"),
        ),
        Panel(
            "timeseries",
            "Database file writes per volume",
            "Bytes per second SQL Server writes to all its database files (data, log, tempdb) per volume and "
            f"file type, and per volume over {lim.window} (the recording rule). This is the sqlserver source "
            "of the pools; the host's own counters are below. No healthy range of its own: the SSD pools "
            "below weigh it against the drives' rating.",
            "Bps",
            [
                Query(
                    f"sum by (volume, file_type) ({rate(volumes.WRITTEN_BYTES.name)})",
                    "{{volume}} {{file_type}}",
                ),
                Query(m(lim.rule("volume")), f"{{{{volume}}}} all files, {lim.window} average"),
            ],
            min=0,
            no_value=off(volumes, lacking=AZURE_SQL_DATABASE),
        ),
        Panel(
            "timeseries",
            "Host disk writes",
            "Bytes per second written to each physical disk of the host whose exporter is chosen as Host "
            f"({host_collector.DISK_WRITTEN}, exporter started with --collector.host on the SQL Server "
            "host). The Host variable is not tied to the chosen instance, since no metric says which "
            f"exporter runs on its host: it starts at {NO_HOST} (this panel empty); choose the exporter on "
            "this instance's host. Counts every writer and each mirror member; compare with the database "
            "file writes to see what the OS, backups and RAID add. No healthy range of its own: put the "
            "disks in an SSD pool (host_disks) to weigh them against their rating. Empty when no exporter "
            "runs with --collector.host.",
            "Bps",
            [
                Query(
                    f"sum by (instance, device) (rate({host_collector.DISK_WRITTEN}"
                    f"{{{lim.spec.exporter_selector}, {HOST}}}"
                    "[$__rate_interval]))",
                    "{{device}} ({{instance}})",
                )
            ],
            width=24,
            min=0,
            no_value=f"No host metrics: Host is {NO_HOST}, or no exporter runs with --collector.host",
        ),
    ]


def headroom_stat(
    lim: Limits,
    title: str,
    what: str,
    red_means: str,
    rule_and_alert: tuple[str, str],
    width: int,
    height: int,
    filling: str | None = None,
    *,
    no_value: str,
) -> Panel:
    """A tempdb headroom ratio against the one pair of limits its alert uses. `filling`: the instances
    whose projection says this room runs out within the horizon; their headroom is never green, however
    much is left now, so it never contradicts the time until full beside it."""
    t = lim.spec.tempdb
    rule, alert_name = rule_and_alert
    ratio = m(lim.rule(rule))
    queries, overrides = [Query(ratio, instant=True)], []
    text = (
        f"{what} Healthy: above {pct(t.headroom_warning_share)} (orange under it, red under "
        f"{pct(t.headroom_critical_share)}: {red_means})."
    )
    if filling is not None:
        queries = [
            Query(f"{ratio}\nand on (job, instance) (\n{filling}\n)", instant=True),
            Query(f"{ratio}\nunless on (job, instance) (\n{filling}\n)", instant=True),
        ]
        filling_ranges = Thresholds((Step(RED, None), Step(ORANGE, t.headroom_critical_share)))
        overrides = [override_query("A", ("thresholds", filling_ranges.json()))]
        text += (
            " Never green while tempdb is projected full within "
            f"{duration(t.projection_horizon_seconds)} (the stat beside), however much room is left now."
        )
    return Panel(
        "stat",
        title,
        text,
        "percentunit",
        queries,
        width=width,
        height=height,
        decimals=1,
        thresholds=Thresholds.healthy_above(t.headroom_critical_share, warn=t.headroom_warning_share),
        overrides=overrides,
        links=[lim.runbook(alert_name)],
        no_value=no_value,
    )


def endurance_row_tempdb_space(lim: Limits) -> list[Panel | Row]:
    """The endurance dashboard's row "tempdb space": what fills tempdb, its room and its layout."""
    t = lim.spec.tempdb
    data = 'file_type="data"'
    size = f"sum({m(tempdb_files.SIZE_BYTES.name, data)})"
    layout = [
        ("Data files", tempdb_files.DATA_FILES.name),
        ("CPUs", sys_info.LOGICAL_CPUS.name),
        ("Equal size", tempdb_files.EQUAL_SIZE.name),
        ("Equal growth", tempdb_files.EQUAL_GROWTH.name),
        ("% growth", tempdb_files.PERCENT_GROWTH_FILES.name),
        ("System volume", tempdb_files.SYSTEM_VOLUME_FILES.name),
    ]
    renames = {f"Value #{chr(ord('A') + i)}": name for i, (name, _) in enumerate(layout)}
    # The headroom and the time until full judge each other: neither is green while the other is not.
    full_in = m(lim.rule("tempdb_exhausted_in"))
    low = f"{m(lim.rule('tempdb_headroom_ratio'))} < {num(t.headroom_warning_share)}"
    soon_full = Thresholds((Step(RED, None), Step(ORANGE, t.projection_horizon_seconds)))  # never green
    return [
        Row("tempdb space"),
        Panel(
            "timeseries",
            "What fills tempdb's data files",
            "tempdb's data files by what holds their pages (sys.dm_db_file_space_usage), stacked, against "
            "the files' size and what autogrowth can still add (up to each file's maximum and the volume's "
            "free space, in whole growths of all the files at once). Healthy: unallocated a good part of "
            "the size, the version store flat. A rising "
            "version store is a transaction left open; internal objects jumping are sorts and hashes "
            "spilling (queries short of workspace memory).",
            "bytes",
            [
                Query(f"sum by (usage) ({m(tempdb_usage.SPACE_BYTES.name)})", "{{usage}}"),
                Query(size, "data files' size"),
                Query(f"{size} + sum({m(lim.rule('tempdb_room'))})", "size + growth room"),
            ],
            width=12,
            height=9,
            min=0,
            custom={"stacking": {"group": "A", "mode": "normal"}, "fillOpacity": 40},
            overrides=[override(name, *UNSTACKED) for name in ("data files' size", "size + growth room")],
            no_value=off(tempdb_usage, tempdb_files, lacking=AZURE_SQL_DATABASE),
        ),
        headroom_stat(
            lim,
            "Headroom",
            "Free inside tempdb's data files plus what autogrowth can still add, as a share of that plus "
            "what is allocated.",
            "queries needing tempdb are about to fail with error 1105",
            ("tempdb_headroom_ratio", names_.TEMPDB_HEADROOM_LOW),
            width=4,
            height=9,
            filling=f"{full_in} < {num(t.projection_horizon_seconds)}",
            no_value=off(tempdb_usage, narrow=True),
        ),
        Panel(
            "stat",
            "tempdb full in",
            f"At the headroom's trend over the last {t.projection_window}: when tempdb is full. Empty while "
            "the headroom does not shrink (healthy). Red under "
            f"{duration(t.projection_horizon_seconds)}: the projection alert's horizon. Never green while "
            f"the headroom beside is under {pct(t.headroom_warning_share)}: a slow trend does not make a "
            "nearly full tempdb healthy.",
            "s",
            [
                Query(f"{full_in}\nand on (job, instance) (\n{low}\n)", instant=True),
                Query(f"{full_in}\nunless on (job, instance) (\n{low}\n)", instant=True),
            ],
            width=4,
            height=9,
            thresholds=Thresholds.healthy_above(t.projection_horizon_seconds),
            overrides=[override_query("A", ("thresholds", soon_full.json()))],
            no_value="Not shrinking",
            links=[lim.runbook(names_.TEMPDB_PROJECTED_FULL)],
        ),
        Panel(
            "stat",
            "Layout faults",
            "How many of the layout checks fail: data files fewer than min(logical CPUs, "
            f"{num(t.advised_max_data_files)}), unequal sizes, unequal growth, files growing by a "
            "percentage, files on the system volume (the table beside says which). Healthy: 0.",
            "none",
            [Query(m(lim.rule("tempdb_layout")), instant=True)],
            width=4,
            height=9,
            thresholds=Thresholds((Step(GREEN, None), Step(ORANGE, ANY))),
            links=[lim.runbook(names_.TEMPDB_LAYOUT)],
            no_value=off(tempdb_files, narrow=True),
        ),
        Panel(
            "table",
            "tempdb layout",
            f"The facts behind the checks. Healthy, as advised: as many data files as logical CPUs up to "
            f"{num(t.advised_max_data_files)}, equal sizes (1) and equal growth (1), no percent growth (0), "
            "nothing on the system volume (0; empty where the exporter cannot tell the volume).",
            "none",
            [Query(f"max by (job, instance) ({m(fact)})", instant=True, table=True) for _, fact in layout],
            width=12,
            height=5,
            transformations=merge_and_organize(
                renames, [name for name, _ in layout], ("Time", "__name__", "job", "instance")
            ),
            links=[lim.runbook(names_.TEMPDB_LAYOUT)],
            no_value=off(tempdb_files, sys_info, lacking=AZURE_SQL_DATABASE),
        ),
        Panel(
            "timeseries",
            "tempdb version store",
            "Space the version store reserves in tempdb (row versions of snapshot isolation, read committed "
            "snapshot, online index builds, triggers). Healthy: flat or falling back; growing for an hour "
            f"and above {num(t.version_store_min_bytes / 2**30)} GiB is the alert. With accelerated "
            "database recovery on in tempdb (SQL Server 2025), tempdb's own row versions go to a persistent "
            "version store in tempdb: its own series (sys.dm_tran_persistent_version_store_stats), not added "
            "to the first, since Microsoft does not say which page count of dm_db_file_space_usage holds it.",
            "bytes",
            [
                Query(m(lim.rule("tempdb_version_store")), "version store"),
                Query(m(tempdb_governance.PVS_BYTES.name), "persistent version store (ADR in tempdb)"),
            ],
            width=12,
            height=5,
            min=0,
            links=[lim.runbook(names_.TEMPDB_VERSION_STORE)],
            no_value=off(tempdb_usage, tempdb_governance, lacking=AZURE_SQL_DATABASE),
        ),
        Panel(
            "timeseries",
            "tempdb's log",
            "What tempdb's log holds (tempdb.sys.dm_db_log_space_usage) against its size. Healthy: used "
            "rises and falls back at each checkpoint, well under the size. Used climbing without falling "
            "back is a transaction left open (the reuse wait beside says ACTIVE_TRANSACTION): the log grows "
            "while it can (the headroom beside counts that room, usually far larger than the log) and then "
            "changes in tempdb fail with error 9002.",
            "bytes",
            [
                Query(m(tempdb_log.USED_BYTES.name), "used"),
                Query(m(tempdb_log.SIZE_BYTES.name), "log size"),
            ],
            width=12,
            height=7,
            min=0,
            links=[lim.runbook(names_.TEMPDB_LOG_HEADROOM_LOW)],
            no_value=off(tempdb_log),
        ),
        headroom_stat(
            lim,
            "tempdb log headroom",
            "Free inside tempdb's log plus what its autogrowth can still add, as a share of that plus its "
            "size.",
            "changes in tempdb are about to fail with error 9002",
            ("tempdb_log_headroom_ratio", names_.TEMPDB_LOG_HEADROOM_LOW),
            width=6,
            height=7,
            no_value=off(tempdb_log),
        ),
        Panel(
            # A table of the one label: a stat of names only showed nothing when empty (12.4 shows a
            # stat's no-data text as its value), and one with an empty value drew its name at size 0.
            "table",
            "tempdb log reuse wait",
            "What keeps SQL Server from reusing tempdb's log (sys.databases.log_reuse_wait_desc). Healthy: "
            "NOTHING or CHECKPOINT. ACTIVE_TRANSACTION for long is a transaction left open: it holds the "
            "log and the version store.",
            "none",
            [Query(m(tempdb_log.REUSE_WAIT.name), instant=True, table=True)],
            width=6,
            height=7,
            # The value is always 1: only the reason is shown. One query's value column is "Value".
            transformations=merge_and_organize(
                {}, ["reason"], ("Time", "__name__", "job", "instance", "Value", "Value #A")
            ),
            links=[lim.runbook(names_.TEMPDB_LOG_HEADROOM_LOW)],
            no_value=off(tempdb_log),
        ),
        *governance_panels(lim),
    ]


def endurance_row_latency(lim: Limits) -> list[Panel | Row]:
    """The endurance dashboard's row "I/O latency per volume": every volume and file type, not tempdb's."""
    io = lim.spec.io_latency
    legend = "{{volume}} {{file_type}}"
    return [
        Row("I/O latency per volume"),
        Panel(
            "timeseries",
            "Read latency per volume and file type",
            f"Average wait per read as SQL Server measures it (stall ÷ reads, over {lim.window}), per volume "
            f"and file type. Healthy: data reads under {num(io.data_read_max_seconds * 1000)} ms (the line; "
            "Microsoft's 10-15 ms bottleneck range), SSDs well under 1 ms. Rising with page reads while page "
            "life expectancy falls: memory pressure turned into I/O.",
            "s",
            [Query(m(lim.rule("read_latency")), legend)],
            width=12,
            min=0,
            thresholds=Thresholds.healthy_below(io.data_read_max_seconds),
            links=[lim.runbook(names_.DATA_READ_LATENCY)],
            no_value=off(volumes, also="No reads in this range"),
        ),
        Panel(
            "timeseries",
            "Write latency per volume and file type",
            f"Average wait per write (stall ÷ writes, over {lim.window}). Log writes hold every commit: "
            f"healthy under {num(io.log_write_max_seconds * 1000)} ms (the line), SSDs under 1 ms.",
            "s",
            [Query(m(lim.rule("write_latency")), legend)],
            width=12,
            min=0,
            thresholds=Thresholds.healthy_below(io.log_write_max_seconds),
            links=[lim.runbook(names_.LOG_WRITE_LATENCY)],
            no_value=off(volumes, also="No writes in this range"),
        ),
        Panel(
            "timeseries",
            "Operations per second per volume",
            f"Reads and writes per second per volume and file type (over {lim.window}). No healthy range of "
            f"its own; under {num(io.min_operations_per_second)} per second the latency alerts stay quiet "
            "(an idle volume's average is noise).",
            "iops",
            [
                Query(m(lim.rule("reads")), "{{volume}} {{file_type}} reads"),
                Query(m(lim.rule("writes")), "{{volume}} {{file_type}} writes"),
            ],
            width=12,
            min=0,
            no_value=off(volumes, lacking=AZURE_SQL_DATABASE),
        ),
        Panel(
            "timeseries",
            "Average I/O size per volume",
            "Bytes per read and per write. Large reads are scans and read-ahead (64 KiB and up); log writes "
            "are as large as the commits they flush. No healthy range: a change of shape explains a change "
            "of latency.",
            "bytes",
            [
                Query(m(lim.rule("read_size")), "{{volume}} {{file_type}} reads"),
                Query(m(lim.rule("write_size")), "{{volume}} {{file_type}} writes"),
            ],
            width=12,
            min=0,
            no_value=off(volumes, also="No I/O in this range"),
        ),
    ]
