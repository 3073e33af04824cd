"""Drive health as metrics: each drive's last good reading, its age, and whether the last read worked.

Built from memory on every scrape (drive_health.DriveMonitor keeps the readings); nothing here waits
on smartctl. The drive source has its own mssql_exporter_collector_success{collector="drive_health"},
0 while any drive's last read failed, so a broken smartctl never touches the SQL Server collectors.
"""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client.core import Metric

from ..metrics.builder import FamilyBuilder
from .drive_health import DriveMonitor, DriveView
from .drive_parse import DriveReading
from .metrics import collector_families

COLLECTOR = "drive_health"

# The names the rule and dashboard generators import (alerts/drives.py, smartctl_exporter.py, dashboards/).
LIFE_USED = "mssql_drive_life_used_ratio"
AVAILABLE_SPARE = "mssql_drive_available_spare_ratio"
AVAILABLE_SPARE_THRESHOLD = "mssql_drive_available_spare_threshold_ratio"
CRITICAL_WARNING = "mssql_drive_critical_warning"
TEMPERATURE = "mssql_drive_temperature_celsius"
WRITE_AMPLIFICATION = "mssql_drive_write_amplification_ratio"
READ_SUCCESS = "mssql_drive_read_success"
READING_AGE = "mssql_drive_reading_age_seconds"
SMART_PASSED = "mssql_drive_smart_passed"
HOST_WRITTEN = "mssql_drive_host_written_bytes_total"
INFO = "mssql_drive_info"

# (attribute of DriveReading, metric, kind, help)
_FIGURES = (
    (
        "life_used_ratio",
        LIFE_USED,
        "gauge",
        "Share of the drive's rated life used, as the drive reports it (NVMe percentage_used, SCSI endurance "
        "indicator, ATA per family) / 100. 1 = rated life reached; may exceed 1.",
    ),
    (
        "spare_ratio",
        AVAILABLE_SPARE,
        "gauge",
        "Spare capacity left, as a ratio of the full spare.",
    ),
    (
        "spare_threshold_ratio",
        AVAILABLE_SPARE_THRESHOLD,
        "gauge",
        "The drive's own threshold for available spare (below it the drive warns), as a ratio.",
    ),
    (
        "critical_warning",
        CRITICAL_WARNING,
        "gauge",
        "NVMe critical warning bits as a number (0 = none): 1 spare, 2 temperature, 4 reliability, "
        "8 read-only, 16 volatile memory backup, 32 persistent memory region.",
    ),
    (
        "media_errors",
        "mssql_drive_media_errors_total",
        "counter",
        "Unrecovered media and data integrity errors the drive has counted in its life.",
    ),
    (
        "power_on_seconds",
        "mssql_drive_power_on_seconds_total",
        "counter",
        "Time the drive has been powered on.",
    ),
    (
        "temperature_celsius",
        TEMPERATURE,
        "gauge",
        "Drive temperature at the last reading.",
    ),
    (
        "host_written_bytes",
        HOST_WRITTEN,
        "counter",
        "Bytes the host has written to the drive in its life, as the drive counts them (only for drive "
        "families whose unit is known).",
    ),
    (
        "nand_written_bytes",
        "mssql_drive_nand_written_bytes_total",
        "counter",
        "Bytes the drive has written to its flash in its life (host writes plus its own), where reported.",
    ),
    (
        "write_amplification",
        WRITE_AMPLIFICATION,
        "gauge",
        "Lifetime write amplification the drive reports: flash writes / host writes (Micron: "
        "(host + background program pages) / host program pages).",
    ),
)


def _base_labels(
    view: DriveView, reading: DriveReading, pools: Mapping[str, str], redact: bool
) -> dict[str, str]:
    labels = {"device": view.name, "model": reading.model}
    if not redact:
        labels["serial"] = reading.serial
    pool = pools.get(view.name)
    if pool is not None:
        labels["pool"] = pool
    return labels


def _status_labels(view: DriveView, pools: Mapping[str, str]) -> dict[str, str]:
    pool = pools.get(view.name)
    return {"device": view.name, **({"pool": pool} if pool is not None else {})}


def collect(monitor: DriveMonitor, pools: Mapping[str, str], out: FamilyBuilder) -> bool:
    """Add every drive's samples to `out`; True when no drive's last read failed."""
    ok = True
    for view in monitor.views():
        status = _status_labels(view, pools)
        ok = ok and view.ok
        out.gauge(
            READ_SUCCESS,
            "1 if the last smartctl read of the drive gave a reading (or found it asleep), 0 if it failed.",
            1.0 if view.ok else 0.0,
            status,
        )
        reading = view.reading
        if reading is None or view.age_seconds is None:
            continue
        out.gauge(
            READING_AGE,
            "Seconds since the drive's last good reading; every other mssql_drive_ figure is from then.",
            view.age_seconds,
            status,
        )
        labels = _base_labels(view, reading, pools, monitor.redact_serial)
        out.gauge(
            INFO,
            "A drive smartctl reads: family is the exporter's SATA family row its model_family matched ('' "
            "for NVMe, SCSI, disks and SATA drives of no row), kind ssd, hdd or unknown.",
            1.0,
            {**labels, "family": reading.family, "protocol": reading.protocol, "kind": reading.kind},
        )
        out.gauge(
            "mssql_drive_reading_partial",
            "1 if some of smartctl's commands to the drive failed (exit bit 2); what it read is exported.",
            1.0 if view.partial else 0.0,
            labels,
        )
        if reading.smart_passed is not None:
            out.gauge(
                SMART_PASSED,
                "1 if the drive's SMART health self-assessment passed, 0 if the drive says it is failing.",
                1.0 if reading.smart_passed else 0.0,
                labels,
            )
        for finding, present in sorted(view.findings.items()):
            out.gauge(
                "mssql_drive_smartctl_finding",
                "1 if smartctl's exit status at the last reading carried this finding (exit bits 3-7): "
                "failing, prefail_below_threshold, was_below_threshold, error_log, self_test_errors.",
                1.0 if present else 0.0,
                {**labels, "finding": finding},
            )
        for attribute, metric, kind, help_text in _FIGURES:
            value = getattr(reading, attribute)
            if value is None:
                continue
            if kind == "counter":
                out.counter(metric, help_text, float(value), labels)
            else:
                out.gauge(metric, help_text, float(value), labels)
        for origin, pages in (("host", reading.host_pages), ("background", reading.background_pages)):
            if pages is not None:
                out.counter(
                    "mssql_drive_nand_program_pages_total",
                    "NAND pages the drive has programmed in its life, for host writes or for its own "
                    "background work (Micron 5100/5200/5300/5400): write amplification = (host + background) "
                    "/ host.",
                    pages,
                    {**labels, "origin": origin},
                )
    return ok


def drive_families(monitor: DriveMonitor, pools: Mapping[str, str]) -> list[Metric]:
    return collector_families(COLLECTOR, "drive health", lambda scratch: collect(monitor, pools, scratch))
