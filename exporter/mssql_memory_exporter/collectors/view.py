"""What a collector may know about its target and the host: read-only views, typed by what is read.

Collectors never import the config package. The config's models satisfy these protocols structurally
(mypy or pyright check that at the one place the scraper hands a TargetConfig over), so a test can hand
in any small object with the same fields, and a config change that would break a collector shows up as
a type error instead of an attribute that silently reads as its default.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date
from typing import Protocol


class DrivesView(Protocol):
    """The drives of one SSD pool: how many, and their endurance rating in one of two forms."""

    @property
    def count(self) -> int: ...
    @property
    def tbw_per_drive_tb(self) -> float | None: ...
    @property
    def dwpd(self) -> float | None: ...
    @property
    def capacity_tb(self) -> float | None: ...
    @property
    def warranty_years(self) -> float | None: ...


class KnownWrittenView(Protocol):
    """A reading of the drives' own written-bytes figure, and the day it was read."""

    @property
    def written_tb(self) -> float: ...
    @property
    def read_date(self) -> date: ...


class PoolView(Protocol):
    @property
    def volumes(self) -> Collection[str]: ...
    @property
    def host_disks(self) -> Collection[str]: ...
    @property
    def smart_drives(self) -> Collection[str]: ...
    @property
    def drives(self) -> DrivesView: ...
    @property
    def planned_lifetime_years(self) -> float: ...
    @property
    def in_service_date(self) -> date: ...
    @property
    def known_written(self) -> KnownWrittenView | None: ...


class TargetView(Protocol):
    """The fields of a target's config that collectors read."""

    @property
    def name(self) -> str: ...
    @property
    def volume_map(self) -> Mapping[str, str]: ...
    @property
    def volume_refresh_seconds(self) -> float: ...
    @property
    def pmem_volumes(self) -> Collection[str]: ...
    @property
    def ssd_pools(self) -> Mapping[str, PoolView]: ...


class HostView(Protocol):
    """The exporter's own host, when it runs on the target's host (`colocated: true`)."""

    def mount_point_for(self, path: str) -> str | None: ...
    def dax_mount_points(self) -> Collection[str]: ...
    def written_bytes_by_disk(self) -> Mapping[str, float]: ...
    def boot_time(self) -> float: ...
    def drive_names(self) -> Collection[str]: ...
    def drive_written_bytes(self, names: Iterable[str]) -> float | None: ...
    def drive_wear(self, names: Iterable[str]) -> Mapping[str, tuple[float | None, float | None]]: ...


@dataclass(frozen=True)
class TargetFacts:
    """A TargetView with every field at the config's default: what a collector sees when it is run on its
    own (tests, benchmarks) without a configured target."""

    name: str = ""
    volume_map: Mapping[str, str] = field(default_factory=dict)
    volume_refresh_seconds: float = 300.0
    pmem_volumes: Collection[str] = ()
    ssd_pools: Mapping[str, PoolView] = field(default_factory=dict)


NO_TARGET = TargetFacts()
