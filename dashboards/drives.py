"""The endurance dashboard's row on what the drives say about themselves (drive_health), beside the
drive alerts (alerts/drives.py)."""

from __future__ import annotations

from mssql_memory_exporter.collectors import ssd_pools
from mssql_memory_exporter.host import drive_metrics

from alerts import names as names_
from alerts.spec import number as num

from .grafana import BLUE, GREEN, ORANGE, Panel, Query, Row, Step, Thresholds, merge_and_organize, override
from .limits import Limits, duration, pct
from .pools import (
    POOL,
    RETIRED_FIRST,
    enough_data,
    share_ranges,
    worn_apart,
    worn_in_service,
    worn_ranges,
    worn_text,
)
from .queries import HOST, m

MODEL_COLUMN_PX = 260  # "Micron_7300_MTFDHBE960TDF", "INTEL SSDSC2BB016T4" and their kin


def drive_coverage(lim: Limits, expr: str) -> str:
    """`expr` (a pool figure without `source`) once the drives' own write rate rests on enough data."""
    coverage = m(lim.rule("pool_long_coverage"), f'{POOL}, source="drive"')
    return (
        f"{expr}\nand on (job, instance, pool) {coverage}"
        f" >= {num(lim.endurance.projection_min_coverage_seconds)}"
    )


def endurance_row_drives(lim: Limits) -> list[Panel | Row]:
    """The endurance dashboard's row "Drives": what the drives say about themselves (drive_health)."""
    d = lim.spec.drives
    own = f"{lim.spec.exporter_selector}, {HOST}"
    no_drives = "No drive health for this instance's pools (drive_health)"
    factor = d.disagreement_factor
    young = (
        f"No pool whose drives all report {pct(d.implied_min_life_used)} used, with "
        f"{duration(lim.endurance.projection_min_coverage_seconds)} of data, "
        f"or collector {ssd_pools.COLLECTOR.name} off"
    )
    columns = [
        ("Life used", drive_metrics.LIFE_USED, "percentunit"),
        ("Spare", drive_metrics.AVAILABLE_SPARE, "percentunit"),
        ("Spare min", drive_metrics.AVAILABLE_SPARE_THRESHOLD, "percentunit"),
        ("Critical bits", drive_metrics.CRITICAL_WARNING, "none"),
        ("SMART ok", drive_metrics.SMART_PASSED, "none"),
        ("Temp", drive_metrics.TEMPERATURE, "celsius"),
        ("Write ampl.", drive_metrics.WRITE_AMPLIFICATION, "none"),
    ]
    renames = {f"Value #{chr(ord('A') + i)}": name for i, (name, _, _) in enumerate(columns)}
    wear = Thresholds.healthy_below(lim.endurance.exhaustion_share, warn=d.life_used_warning)
    # When the drives say they are worn out, judged as the rating's time left is (pools.worn_in_service).
    by_pool = "job, instance, pool"
    drives_left = m(lim.rule("drive_remaining"), POOL)
    worn = drive_coverage(
        lim, f"(\n{worn_in_service(lim, drives_left, m(lim.rule('drive_share'), POOL), by_pool)}\n)"
    )
    said, said_overrides = worn_apart(
        Query(worn, "{{pool}}", instant=True),
        Query(f"{drive_coverage(lim, drives_left)}\nunless on ({by_pool}) (\n{worn}\n)", "{{pool}}", True),
        worn_ranges(lim),
    )
    return [
        Row("Drives: what they say about themselves"),
        Panel(
            "timeseries",
            "Projected share: from the rating and from the drives' wear",
            f"Per pool, the {lim.pool_long_window} write rate of the drives' own counters (source=drive) x "
            "planned life, divided two ways: by the rated endurance (drives x TBW), and by the endurance "
            "the drives imply (their host bytes ÷ the share of life they say they used, once each has used "
            f"{pct(d.implied_min_life_used)}). Healthy: both under "
            f"{pct(lim.endurance.budget_high_share)}. Apart, the rating does not describe this workload: "
            "trust the drives' line (their wear follows the flash, write amplification included).",
            "percentunit",
            [
                Query(
                    enough_data(lim, m(lim.rule("share"), f'{POOL}, source="drive"')),
                    "{{pool}} from the rating",
                ),
                Query(drive_coverage(lim, m(lim.rule("drive_share"), POOL)), "{{pool}} from the drives"),
            ],
            width=12,
            thresholds=share_ranges(lim),
            min=0,
            no_value=young,
            links=[lim.runbook(names_.DRIVE_WEAR_DISAGREES)],
        ),
        Panel(
            "stat",
            "The drives say 100% in",
            f"Per pool: (endurance the drives imply - their host bytes) ÷ the {lim.pool_long_window} write "
            "rate of their own counters: when the drives will report 100% of their life used. "
            f"{worn_text(lim)} (The share here is the drives' own projection.) Healthy: green. Empty until "
            f"every drive of the pool has used {pct(d.implied_min_life_used)}.",
            "s",
            said,
            width=6,
            thresholds=RETIRED_FIRST,
            overrides=said_overrides,
            options={"textMode": "value_and_name"},
            no_value=young,
        ),
        Panel(
            "stat",
            "Endurance the drives imply ÷ rated",
            "Per pool: 1 when the drives wear exactly as their rating says for the bytes written; under 1 "
            "they wear faster (more write amplification than the rating assumed), over 1 slower. Healthy: "
            f"from {num(round(1 / factor, 3))} to {num(factor)} (orange under: plan from the drives' "
            "projection, not the rating).",
            "none",
            [Query(m(lim.rule("drive_to_rated"), POOL), "{{pool}}", instant=True)],
            width=6,
            decimals=2,
            thresholds=Thresholds((Step(ORANGE, None), Step(GREEN, 1 / factor), Step(BLUE, factor))),
            options={"textMode": "value_and_name"},
            no_value=no_drives,
            links=[lim.runbook(names_.DRIVE_WEAR_DISAGREES)],
        ),
        Panel(
            "bargauge",
            "Drive life used",
            "Share of its rated life each drive says it has used (NVMe percentage used, or its family's wear "
            "attribute), read by the exporter chosen as Host. Healthy: under "
            f"{pct(d.life_used_warning)} (orange from there: order the replacement; red past "
            f"{pct(lim.endurance.exhaustion_share)}: past its rating). Not capped at the rating.",
            "percentunit",
            [Query(f"{drive_metrics.LIFE_USED}{{{own}}}", "{{device}} {{model}}", instant=True)],
            width=8,
            min=0,
            max=lim.endurance.exhaustion_share,
            thresholds=wear,
            no_value=no_drives,
            links=[lim.runbook(names_.DRIVE_WEAR_HIGH)],
        ),
        Panel(
            "timeseries",
            "Drive reading age",
            "Seconds since each drive's last good smartctl reading. Healthy: under the read interval (10 "
            f"minutes by default); the alert fires past {duration(d.reading_stale_seconds)}.",
            "s",
            [Query(f"{drive_metrics.READING_AGE}{{{own}}}", "{{device}}")],
            width=16,
            min=0,
            thresholds=Thresholds.healthy_below(d.reading_stale_seconds),
            no_value=no_drives,
            links=[lim.runbook(names_.DRIVE_HEALTH_UNREAD)],
        ),
        Panel(
            "table",
            "Drive health",
            "One row per drive, as smartctl last read it (the exporter chosen as Host). Healthy: spare "
            "above its minimum (the drive's own threshold), critical bits 0 (NVMe: 1 spare, 2 temperature, "
            "4 reliability, 8 read-only, 16 backup), SMART ok 1, write amplification near 1 (flash writes ÷ "
            "host writes, where the drive reports it).",
            "none",
            # One row per drive: by these labels only, so the columns' series (each with its own
            # metric name) join into one row; a drive in no pool has pool "".
            [
                Query(f"max by (device, model, serial, pool) ({metric}{{{own}}})", instant=True, table=True)
                for _, metric, _ in columns
            ],
            width=24,
            overrides=[
                *(override(name, ("unit", unit)) for name, _, unit in columns),
                # Room for a whole model name (Grafana 12.4 clips a cell without an ellipsis). A width, not
                # a minimum: 12.4 gives every other column an equal share of the row, and a minimum on top
                # of it pushed the last column past the right edge.
                override("model", ("custom.width", MODEL_COLUMN_PX)),
            ],
            transformations=merge_and_organize(
                renames,
                ["device", "model", "pool"] + [name for name, _, _ in columns],
                # The serial is on the drive series (when not redacted); the table needs the room.
                ("Time", "__name__", "job", "instance", "serial"),
            ),
            links=[lim.runbook(names_.DRIVE_CRITICAL_WARNING), lim.runbook(names_.DRIVE_SPARE_LOW)],
            no_value=no_drives,
        ),
    ]
