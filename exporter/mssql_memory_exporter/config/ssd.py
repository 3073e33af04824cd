"""SSD endurance pools: the drives, their rating, planned life and in-service date."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from typing import Annotated, Any, Literal, Self

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    model_validator,
)
from pydantic_core import PydanticCustomError

from .drives import DriveName
from .errors import error_at
from .fields import Strict
from .volumes import DriveCount, HostDisk, PositiveNumber, VolumeLabel, list_twice


class SsdDrives(Strict):
    """The drives of a pool and their rated endurance, in decimal TB (10^12 bytes) as vendors rate them:
    either the TBW per drive, or DWPD with the capacity and warranty period it is quoted against."""

    count: DriveCount
    tbw_per_drive_tb: PositiveNumber | None = None
    dwpd: PositiveNumber | None = None
    capacity_tb: PositiveNumber | None = None
    warranty_years: PositiveNumber | None = None

    @model_validator(mode="after")
    def _one_rating(self) -> Self:
        dwpd_fields = {
            "dwpd": self.dwpd,
            "capacity_tb": self.capacity_tb,
            "warranty_years": self.warranty_years,
        }
        given = [key for key, value in dwpd_fields.items() if value is not None]
        if self.tbw_per_drive_tb is not None and given:
            raise PydanticCustomError(
                "drive_rating",
                "set either tbw_per_drive_tb or dwpd with capacity_tb and warranty_years, not both",
            )
        if self.tbw_per_drive_tb is None and not given:
            raise PydanticCustomError(
                "drive_rating", "set tbw_per_drive_tb, or dwpd with capacity_tb and warranty_years"
            )
        if self.tbw_per_drive_tb is None and len(given) < len(dwpd_fields):
            missing = " and ".join(key for key in dwpd_fields if key not in given)
            raise PydanticCustomError(
                "drive_rating",
                "dwpd, capacity_tb and warranty_years go together; missing: {missing}",
                {"missing": missing},
            )
        return self

    @property
    def rating(self) -> Literal["tbw", "dwpd"]:
        return "tbw" if self.tbw_per_drive_tb is not None else "dwpd"


def _calendar_date(value: Any) -> Any:
    # pydantic would also take a unix timestamp or a datetime at midnight; only a plain date says what is
    # meant. Unquoted, YAML has already turned 2023-01-15 into a date.
    if isinstance(value, datetime) or not isinstance(value, date | str):
        raise PydanticCustomError("date_syntax", "must be a date written YYYY-MM-DD")
    if isinstance(value, str) and not re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
        raise PydanticCustomError("date_syntax", "must be a date written YYYY-MM-DD")
    return value


def _not_in_future(what: str) -> Callable[[date], date]:
    def check(value: date) -> date:
        # Today anywhere on Earth is accepted: the easternmost time zone is UTC+14, so an operator there
        # may write a date that is still tomorrow in UTC.
        latest = (datetime.now(UTC) + timedelta(hours=14)).date()
        if value > latest:
            raise PydanticCustomError(
                "date_future",
                "{value} is in the future; give the date {what}",
                {"value": value.isoformat(), "what": what},
            )
        return value

    return check


# Lax (strict=False) after _calendar_date: a quoted "2021-11-30" is as clear as an unquoted date.
InServiceDate = Annotated[
    date,
    Field(strict=False),
    BeforeValidator(_calendar_date),
    AfterValidator(_not_in_future("the drives went into service")),
]
ReadDate = Annotated[
    date,
    Field(strict=False),
    BeforeValidator(_calendar_date),
    AfterValidator(_not_in_future("the counters were read")),
]
NonNegativeNumber = Annotated[float, Field(ge=0, strict=True)]


class KnownWritten(Strict):
    """What the drives themselves say they have written, read once by the operator: the sum over the
    pool's drives of their lifetime host-write counters, in decimal TB, and the day it was read."""

    written_tb: NonNegativeNumber
    read_date: ReadDate


class SsdPool(Strict):
    """SSDs whose write endurance is tracked together (design.md, Endurance math)."""

    drives: SsdDrives
    planned_lifetime_years: PositiveNumber
    in_service_date: InServiceDate
    known_written: KnownWritten | None = None
    volumes: list[VolumeLabel] = Field(default_factory=list)
    host_disks: list[HostDisk] = Field(default_factory=list)
    # Drives under drive_health that are not host disks by that name (behind a RAID controller, say);
    # host_disks that drive_health reads are linked to the pool without being listed here.
    smart_drives: list[DriveName] = Field(default_factory=list)

    @model_validator(mode="after")
    def _where_writes_are_counted(self) -> Self:
        if not self.volumes and not self.host_disks and not self.smart_drives:
            raise PydanticCustomError(
                "pool_sources",
                "set volumes, host_disks or smart_drives: the pool needs something to count writes on",
            )
        list_twice(self.volumes, "volumes")
        list_twice(self.host_disks, "host_disks")
        list_twice(self.smart_drives, "smart_drives")
        for index, name in enumerate(self.smart_drives):
            if name in self.host_disks:
                raise error_at(
                    ("smart_drives", index), f"{name} is already linked to this pool through host_disks"
                )
        return self

    @model_validator(mode="after")
    def _read_in_service(self) -> Self:
        # A reading from before the drives went into service is of other drives, or a typo; the rules
        # count from the later of the two dates.
        known = self.known_written
        if known is not None and known.read_date < self.in_service_date:
            raise error_at(
                ("known_written", "read_date"),
                f"{known.read_date.isoformat()} is before in_service_date "
                f"{self.in_service_date.isoformat()}; the reading must be of these drives in service",
            )
        return self
