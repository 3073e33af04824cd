"""Optional rules for sites that already read their drives with prometheus-community/smartctl_exporter:
its series, translated into the bundle's own drive series, so the drive alerts, the pool rules and the
dashboards work unchanged and nobody runs two SMART readers (docs/endurance.md, "smartctl_exporter").

Written to alerts/rules/optional/, outside the `rules/*.rules.yml` the bundle loads everywhere: loaded
by default, the rules would turn every drive a site's smartctl_exporter watches (file servers included)
into MSSQL alerts under a job name that is only a guess. A site opts in by loading the file.

Two translations, each recorded under the name the exporter itself exports:

- Per drive, `mssql_drive_*` under the exporter's job (the spec's exporter_selector, which the drive
  alerts and dashboards select), smartctl_exporter's instance and device, and reader="smartctl_exporter"
  saying where it came from. A drive the exporter reads itself (same serial number) is left out: its
  own reading wins and no alert comes twice.
- Per pool drive, `mssql_ssd_pool_drive_*` under the SQL Server target (the spec's selector job, and
  the instance the operator names in a `target_instance` label on the drive's series), for pools the
  target has and whose drives the exporter does not read itself.
"""

from __future__ import annotations

import re
from typing import Any

from mssql_memory_exporter.collectors import endurance, ssd_pools
from mssql_memory_exporter.host import drive_metrics

from .names import SMARTCTL_EXPORTER_GROUP
from .spec import Spec, SpecError

FILE_NAME = "optional/mssql.smartctl-exporter.rules.yml"
READER = "smartctl_exporter"
# The label an operator adds to a drive's smartctl_exporter series (metric_relabel_configs), with
# `pool`, to put the drive in a pool: the `instance` label of the SQL Server target that has the pool.
LINK = "target_instance"
# smartctl_exporter's labels for the drive's identity (on smartctl_device), and the bundle's.
IDENTITY = {"model": "model_name", "serial": "serial_number"}
# smartctl_device_statistics carries its table and flags besides the device: dropped to leave the device.
STATISTIC_LABELS = "statistic_table, statistic_name, statistic_flags_short, statistic_flags_long"
DRIVE = "job, instance, device"
POOL = "job, instance, pool"


def selector_job(selector: str, key: str) -> str:
    """The job of a `job="..."` selector: these rules set the job label to it, so nothing else will do."""
    match = re.fullmatch(r'\s*job\s*=\s*"([^"]+)"\s*', selector)
    if match is None:
        raise SpecError(f'{key}: the smartctl_exporter rules need one job="..." matcher, got {selector!r}')
    return match.group(1)


def _set(expr: str, label: str, value: str) -> str:
    return f'label_replace(\n{_indent(expr)},\n  "{label}", "{value}", "", ""\n)'


def _rename(expr: str, new: str, old: str) -> str:
    moved = f'label_replace(\n{_indent(expr)},\n  "{new}", "$1", "{old}", "(.*)"\n)'
    return _set(moved, old, "")


def _indent(expr: str) -> str:
    return "\n".join("  " + line for line in expr.splitlines())


def _statistic(spec: Spec, name: str) -> str:
    """One ATA Device Statistics figure (standard units on every drive that has the log), per device."""
    sel = spec.smartctl_exporter_selector
    series = f'smartctl_device_statistics{{{sel}, statistic_name="{name}"}}'
    return f"max without ({STATISTIC_LABELS}) (\n  {series}\n)"


def _figures(spec: Spec) -> dict[str, str]:
    """The bundle's drive series and the smartctl_exporter expression each comes from, per device."""
    sel = spec.smartctl_exporter_selector
    x = {
        name: f"smartctl_device_{name}{{{sel}}}"
        for name in (
            "percentage_used",
            "available_spare",
            "available_spare_threshold",
            "critical_warning",
            "smart_status",
        )
    }
    # Bytes from smartctl_exporter's own arithmetic only where it is right: NVMe (its SCSI figure is the
    # error counter log's "gigabytes processed", not the lifetime host writes) and only from exporters
    # that say their version: smartctl_device_bytes_written was data units x 1,024 x the sector size
    # up to 0.9.1 and x 1,000 x the sector size up to 0.12.0 (8 times too high on drives formatted with
    # 4 KiB sectors); 0.13.0 took 512,000 bytes per unit, and 0.14.0 is the first to export
    # smartctl_exporter_build_info, so it is the one release the rules can recognise as right.
    nvme_bytes = (
        f"smartctl_device_bytes_written{{{sel}}}\n"
        f'and on ({DRIVE}) smartctl_device{{{sel}, interface="nvme"}}\n'
        f"and on (job, instance) smartctl_exporter_build_info{{{sel}}}"
    )
    # SATA: Device Statistics' logical sectors x the logical sector size, both as smartctl reads them.
    ata_bytes = (
        f"{_statistic(spec, 'Logical Sectors Written')}\n"
        # group_left even one to one: a plain `on` would keep only the on labels (pool, env lost).
        f'* on ({DRIVE}) group_left () smartctl_device_block_size{{{sel}, blocks_type="logical"}}'
    )
    return {
        # NVMe percentage used, or on SATA the Device Statistics endurance indicator; percent to ratio.
        drive_metrics.LIFE_USED: (
            f"{x['percentage_used']} / 100\n"
            f"or\n{_statistic(spec, 'Percentage Used Endurance Indicator')} / 100"
        ),
        drive_metrics.AVAILABLE_SPARE: f"{x['available_spare']} / 100",
        drive_metrics.AVAILABLE_SPARE_THRESHOLD: f"{x['available_spare_threshold']} / 100",
        drive_metrics.CRITICAL_WARNING: x["critical_warning"],
        # smart_status is smartctl's smart_status.passed: 1 passed, 0 failing, as the bundle's.
        drive_metrics.SMART_PASSED: x["smart_status"],
        drive_metrics.HOST_WRITTEN: f"(\n{_indent(nvme_bytes)}\n)\nor\n{ata_bytes}",
    }


def _per_drive(spec: Spec, figure: str) -> str:
    sel = spec.smartctl_exporter_selector
    identity = ", ".join(IDENTITY.values())
    expr = f"(\n{_indent(figure)}\n)\n* on ({DRIVE}) group_left ({identity}) smartctl_device{{{sel}}}"
    for ours, theirs in IDENTITY.items():
        expr = _rename(expr, ours, theirs)
    own_job = selector_job(spec.exporter_selector, "exporter_selector")
    expr = _set(_set(expr, "job", own_job), "reader", READER)
    # The exporter's own reading of the same drive wins (a redacted serial cannot be matched: see the
    # docs); an empty serial on either side says nothing about which drive it is.
    return f'{expr}\nunless on (serial) {drive_metrics.INFO}{{{spec.exporter_selector}, serial!=""}}'


def _per_pool_drive(spec: Spec, drive_series: str) -> str:
    translated = f'{drive_series}{{{spec.exporter_selector}, reader="{READER}", pool!="", {LINK}!=""}}'
    moved = f'label_replace(\n{_indent(translated)},\n  "instance", "$1", "{LINK}", "(.+)"\n)'
    moved = _set(moved, "job", selector_job(spec.selector, "selector"))
    # Left with the labels the exporter's own series have: the pool rules match them one to one with the
    # target's (mssql_ssd_pool_rated_endurance_bytes), so the drive's scrape labels must be the target's.
    return (
        f"max without ({', '.join(IDENTITY)}, reader, {LINK}) (\n{_indent(moved)}\n)\n"
        # Only pools the target has; and where the exporter reads the pool's drives itself (it then
        # exports source="drive" and these same series), its reading wins.
        f"and on ({POOL}) {endurance.RATED_ENDURANCE.name}{{{spec.selector}}}\n"
        f'unless on ({POOL}) {endurance.WRITTEN.name}{{{spec.selector}, source="drive"}}'
    )


def recording_rules(spec: Spec) -> list[dict[str, Any]]:
    rules = [{"record": name, "expr": _per_drive(spec, figure)} for name, figure in _figures(spec).items()]
    pool = {
        ssd_pools.DRIVE_LIFE_USED.name: drive_metrics.LIFE_USED,
        ssd_pools.DRIVE_HOST_WRITTEN.name: drive_metrics.HOST_WRITTEN,
    }
    rules += [{"record": name, "expr": _per_pool_drive(spec, drive)} for name, drive in pool.items()]
    return rules


def groups(spec: Spec) -> dict[str, Any]:
    # One job, like the others: the docs' relabelling example and the promtool cases name it.
    selector_job(spec.smartctl_exporter_selector, "smartctl_exporter_selector")
    return {"groups": [{"name": SMARTCTL_EXPORTER_GROUP, "rules": recording_rules(spec)}]}
