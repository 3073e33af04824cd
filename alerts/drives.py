"""Rules on the drives' own health (smartctl, read by the exporter's drive_health): per-drive alerts, and
the endurance the pool's drives imply set beside the rated one.

The drive series (`mssql_drive_*`) come from the exporter's own /metrics (the spec's exporter selector);
the pool's copies of them (`mssql_ssd_pool_drive_*`) come with the target's series, like the pool's other
figures, so the two projections join on the target's labels. Thresholds: alerts/thresholds.yml `drives.*`.

A drive's life used moves in whole percent and says nothing about when: the projection from the drive
therefore takes the *endurance the drive implies* (its host bytes ÷ its life used, once it has used
enough for one step to matter little) and the pool's measured write rate, never a trend of the percentage.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from mssql_memory_exporter.collectors import endurance, ssd_pools
from mssql_memory_exporter.host import drive_metrics

from . import names as N
from .names import RuleNames
from .rule_parts import INSTANCE, alert, exporter_metric, metric
from .spec import Spec, number

POOL = f"{INSTANCE}, pool"
# The bits of NVMe's critical_warning, as the alert's description spells them out.
FINDINGS = {
    1: "available spare under its threshold",
    2: "temperature out of range",
    4: "NVM subsystem reliability degraded",
    8: "media placed in read-only mode",
    16: "volatile memory backup failed",
    32: "persistent memory region read-only",
}


def recording_rules(spec: Spec) -> list[dict[str, Any]]:
    m = partial(metric, spec)
    names = RuleNames.from_spec(spec)
    used, written = m(ssd_pools.DRIVE_LIFE_USED.name), m(ssd_pools.DRIVE_HOST_WRITTEN.name)
    least = number(spec.drives.implied_min_life_used)
    drive_rate = f'{names.pool(names.pool_long)}{{source="drive"}}'
    return [
        {
            # Summed over the pool's drives; none while any of them has used too little to say (a new
            # or replaced drive) or reports no wear at all: part of a pool would pass for all of it.
            "record": N.DRIVE_IMPLIED,
            "expr": (
                f"sum without (device) (\n  {written}\n  / ({used} >= {least})\n)\n"
                f"unless on ({POOL}) (\n  {used} < {least}\n"
                f"  or ({written} unless on ({POOL}, device) {used})\n)"
            ),
        },
        {
            # 1: the drives wear exactly as rated for the bytes written. Under 1 they wear faster (more
            # write amplification than the rating assumed), over 1 slower.
            "record": N.DRIVE_TO_RATED,
            "expr": f"{N.DRIVE_IMPLIED}\n/ {m(endurance.RATED_ENDURANCE.name)}",
        },
        {
            # Until the drives say 100% at the pool's 7-day write rate (their own host-byte counters):
            # what the drives have left, divided by how fast it goes.
            "record": N.DRIVE_REMAINING,
            "expr": (
                f"clamp_min(\n  {N.DRIVE_IMPLIED}\n  - sum without (device) ({written}),\n  0\n)\n"
                f"/ ignoring (source) {drive_rate}"
            ),
        },
        {
            # The projection of pool:mssql_ssd_endurance_projected_used:ratio with the drives' implied
            # endurance in place of the rated one.
            "record": N.DRIVE_SHARE,
            "expr": (
                f"{drive_rate}\n* ignoring (source) {m(endurance.PLANNED_LIFETIME.name)}\n"
                f"/ ignoring (source) {N.DRIVE_IMPLIED}"
            ),
        },
    ]


def alert_rules(spec: Spec) -> list[dict[str, Any]]:
    d = spec.drives
    x = partial(exporter_metric, spec)
    drive = "{{ $labels.device }}{{ with $labels.pool }} (pool {{ . }}){{ end }} on {{ $labels.instance }}"
    factor = number(d.disagreement_factor)
    findings = "; ".join(f"{bit}: {what}" for bit, what in FINDINGS.items())
    return [
        alert(
            spec,
            N.DRIVE_WEAR_HIGH,
            f"{x(drive_metrics.LIFE_USED)} >= {number(d.life_used_warning)}",
            d.wear_for,
            "warning",
            f"Drive {drive} has used {{{{ $value | humanizePercentage }}}} of its rated life",
            f"The drive itself reports it has used {{{{ $value | humanizePercentage }}}} of its rated life "
            f"(NVMe percentage used, or its family's wear attribute; limit {number(d.life_used_warning)})."
            " Order its replacement; the endurance dashboard shows how fast the pool wears.",
        ),
        alert(
            spec,
            N.DRIVE_SPARE_LOW,
            f"{x(drive_metrics.AVAILABLE_SPARE)}\n< {x(drive_metrics.AVAILABLE_SPARE_THRESHOLD)}",
            d.critical_for,
            "critical",
            f"Drive {drive} is out of spare blocks",
            "The drive's available spare ({{ $value | humanizePercentage }}) is under the threshold the drive"
            " itself sets: it can no longer replace worn-out blocks and may turn read-only. Replace it now.",
        ),
        alert(
            spec,
            N.DRIVE_CRITICAL_WARNING,
            f"{x(drive_metrics.CRITICAL_WARNING)} > 0\nor {x(drive_metrics.SMART_PASSED)} == 0",
            d.critical_for,
            "critical",
            f"Drive {drive} reports a critical warning",
            "The drive reports a critical warning (NVMe critical_warning bit mask, value {{ $value }}; "
            f"{findings}) or failed its SMART overall-health check (value 0). Replace it.",
        ),
        alert(
            spec,
            N.DRIVE_HEALTH_UNREAD,
            f"{x(drive_metrics.READ_SUCCESS)} == 0\n"
            f"or {x(drive_metrics.READING_AGE)} > {number(d.reading_stale_seconds)}",
            d.unread_for,
            "warning",
            f"Drive {drive}: no health reading",
            "The exporter cannot read this drive's health with smartctl (the last attempt failed: 0), or"
            f" its last good reading is older than {number(d.reading_stale_seconds)} s (its age in seconds);"
            " value {{ $value }}. Wear, spare and the pool's source=drive bytes are stale; see the"
            " exporter's log line for the drive.",
        ),
        alert(
            spec,
            N.DRIVE_WEAR_DISAGREES,
            f"{N.DRIVE_TO_RATED} > {factor}\nor {N.DRIVE_TO_RATED} < 1 / {factor}",
            d.disagreement_for,
            "info",
            "SSD pool {{ $labels.pool }}: the drives wear unlike their rating",
            "Bytes written per percent of life used, the pool's drives imply {{ $value | printf \"%.2f\" }}"
            " times the rated endurance (outside 1/" + factor + " to " + factor + "). Under 1 the"
            " workload wears the drives faster than the rating assumed (write amplification): trust the"
            " drives' projection, not the rated one. Over 1 they wear slower.",
        ),
    ]
