"""One `smartctl --json` document turned into the figures the exporter exports for a drive.

smartmontools 7.3 (Debian 12) has no generic wear or bytes-written fields (`endurance_used` and friends
arrived in 7.5), so each protocol's own fields are read: the NVMe health log, the SCSI endurance
indicator, and for ATA the Device Statistics log where the drive has one (standard units: logical
sectors, percent) or else the attribute table through the per-family table in drive_table.py.
Everything absent stays None and is not exported; nothing is guessed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .drive_table import Family, Meaning, family_of

NVME_DATA_UNIT = 512_000  # the NVMe spec's data unit: 1,000 units of 512 bytes, whatever the sector size


@dataclass(frozen=True)
class DriveReading:
    protocol: str  # nvme, ata or scsi (smartctl's device.protocol, lower case)
    kind: str  # ssd, hdd or unknown
    model: str
    serial: str
    family: str  # the table's family name when understood, else "" (the drive exports no wear)
    smart_passed: bool | None = None
    life_used_ratio: float | None = None
    spare_ratio: float | None = None
    spare_threshold_ratio: float | None = None
    critical_warning: int | None = None
    media_errors: float | None = None
    power_on_seconds: float | None = None
    temperature_celsius: float | None = None
    host_written_bytes: float | None = None
    nand_written_bytes: float | None = None
    host_pages: float | None = None
    background_pages: float | None = None

    @property
    def write_amplification(self) -> float | None:
        """Lifetime NAND writes over host writes, where the drive says both (or Micron's page counts)."""
        if self.host_pages and self.background_pages is not None:
            return (self.host_pages + self.background_pages) / self.host_pages
        if self.host_written_bytes and self.nand_written_bytes is not None:
            return self.nand_written_bytes / self.host_written_bytes
        return None


def _number(value: Any) -> float | None:
    # bool is an int in Python; a JSON true is never a count.
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _section(doc: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = doc.get(key)
    return value if isinstance(value, Mapping) else {}


def _kind(doc: Mapping[str, Any], protocol: str, family: Family | None) -> str:
    if protocol == "nvme":
        return "ssd"
    rotation = _number(doc.get("rotation_rate"))
    if rotation is not None:
        return "ssd" if rotation == 0 else "hdd"
    # Old drives report no rotation rate; one of the SSD families in the table is still an SSD.
    return "ssd" if family is not None else "unknown"


def parse(doc: Any) -> DriveReading:
    """The figures in one smartctl JSON document; ValueError when it is not a drive's reading at all."""
    if not isinstance(doc, Mapping):
        raise ValueError("smartctl's output is not a JSON object")
    device = _section(doc, "device")
    protocol = str(device.get("protocol") or "").lower()
    if not protocol:
        raise ValueError("smartctl's output names no device protocol (no drive was read)")
    if protocol == "ata":
        family = family_of(doc.get("model_family") if isinstance(doc.get("model_family"), str) else None)
    else:
        family = None
    kind = _kind(doc, protocol, family)
    model = doc.get("model_name") or doc.get("scsi_model_name") or ""
    figures: dict[str, Any] = {
        "protocol": protocol,
        "kind": kind,
        "model": str(model).strip(),
        "serial": str(doc.get("serial_number") or "").strip(),
        "family": family.name if family is not None and kind == "ssd" else "",
    }
    status = _section(doc, "smart_status")
    if isinstance(status.get("passed"), bool):
        figures["smart_passed"] = status["passed"]
    power_on = _section(doc, "power_on_time")
    hours = _number(power_on.get("hours"))
    if hours is not None:
        figures["power_on_seconds"] = hours * 3600 + (_number(power_on.get("minutes")) or 0.0) * 60
    figures["temperature_celsius"] = _number(_section(doc, "temperature").get("current"))
    if protocol == "nvme":
        figures.update(_nvme(doc))
    elif protocol == "scsi":
        figures.update(_scsi(doc))
    elif protocol == "ata":
        figures.update(_ata(doc, family))
    if kind != "ssd":
        # A hard disk's "bytes written" and wear figures say nothing about endurance: health only.
        for key in (
            "life_used_ratio",
            "host_written_bytes",
            "nand_written_bytes",
            "host_pages",
            "background_pages",
        ):
            figures.pop(key, None)
    return DriveReading(**figures)


def _nvme(doc: Mapping[str, Any]) -> dict[str, Any]:
    log = _section(doc, "nvme_smart_health_information_log")
    out: dict[str, Any] = {}
    used = _number(log.get("percentage_used"))
    if used is not None:
        out["life_used_ratio"] = used / 100  # the spec lets it pass 100 (up to 255): not clamped
    for key, field in (
        ("available_spare", "spare_ratio"),
        ("available_spare_threshold", "spare_threshold_ratio"),
    ):
        value = _number(log.get(key))
        if value is not None:
            out[field] = value / 100
    warning = _number(log.get("critical_warning"))
    if warning is not None:
        out["critical_warning"] = int(warning)
    out["media_errors"] = _number(log.get("media_errors"))
    units = _number(log.get("data_units_written"))
    if units is not None:
        out["host_written_bytes"] = units * NVME_DATA_UNIT
    # NVMe has no standard NAND-writes field; vendors keep it in their own log pages smartctl 7.3 does
    # not read.
    return out


def _scsi(doc: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    used = _number(doc.get("scsi_percentage_used_endurance_indicator"))
    if used is not None:
        out["life_used_ratio"] = used / 100
    errors = _section(doc, "scsi_error_counter_log")
    uncorrected = [
        _number(_section(errors, direction).get("total_uncorrected_errors"))
        for direction in ("read", "write", "verify")
    ]
    counted = [value for value in uncorrected if value is not None]
    if counted:
        out["media_errors"] = sum(counted)
    # The error counter log's "gigabytes processed" is a vendor-rounded figure some drives reset; the
    # exporter does not pass it off as lifetime bytes written.
    return out


def _device_statistic(doc: Mapping[str, Any], page: int, name: str) -> float | None:
    for entry in _section(doc, "ata_device_statistics").get("pages") or []:
        if not isinstance(entry, Mapping) or entry.get("number") != page:
            continue
        for row in entry.get("table") or []:
            if not isinstance(row, Mapping) or row.get("name") != name:
                continue
            flags = row.get("flags")
            if isinstance(flags, Mapping) and flags.get("valid") is False:
                return None
            return _number(row.get("value"))
    return None


def _ata(doc: Mapping[str, Any], family: Family | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    sector = _number(doc.get("logical_block_size"))
    if family is not None:
        for row in _section(doc, "ata_smart_attributes").get("table") or []:
            if not isinstance(row, Mapping):
                continue
            attribute = family.attributes.get(str(row.get("name")))
            if attribute is None:
                continue
            normalized = _number(row.get("value"))
            raw = _number(_section(row, "raw").get("value"))
            if attribute.meaning is Meaning.LIFE_REMAINING and normalized is not None:
                out["life_used_ratio"] = (100 - normalized) / 100
            elif attribute.meaning is Meaning.SPARE and normalized is not None:
                out["spare_ratio"] = normalized / 100
                threshold = _number(row.get("thresh"))
                if threshold is not None:
                    out["spare_threshold_ratio"] = threshold / 100
            elif attribute.meaning in (Meaning.HOST_WRITTEN, Meaning.NAND_WRITTEN) and raw is not None:
                unit = sector if attribute.unit == "lba" else attribute.unit
                if isinstance(unit, int | float) and unit > 0:
                    out[attribute.meaning.value + "_bytes"] = raw * unit
            elif attribute.meaning is Meaning.HOST_PAGES and raw is not None:
                out["host_pages"] = raw
            elif attribute.meaning is Meaning.BACKGROUND_PAGES and raw is not None:
                out["background_pages"] = raw
    # Device Statistics (ACS General Statistics and Solid State pages) are in standard units on every
    # drive that has them, so they are preferred to the vendor attributes, and need no family.
    written = _device_statistic(doc, 1, "Logical Sectors Written")
    if written is not None and sector:
        out["host_written_bytes"] = written * sector
    used = _device_statistic(doc, 7, "Percentage Used Endurance Indicator")
    if used is not None:
        out["life_used_ratio"] = used / 100
    errors = _device_statistic(doc, 4, "Number of Reported Uncorrectable Errors")
    if errors is not None:
        out["media_errors"] = errors
    return out
