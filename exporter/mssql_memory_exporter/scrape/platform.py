"""Where a target runs, from SERVERPROPERTY('EngineEdition'), and the collectors that platform cannot answer.

The first scrape of a target reads the edition (server_properties) and the scrape leaves out, from then
on, every collector whose SQL reads an object the platform does not have: it would otherwise fail on every
scrape (`mssql_exporter_collector_success 0` for good) for what the platform simply lacks. What is left
out is logged once per target; an edition this table does not know is logged once and nothing is left
out. Sources: Microsoft's SERVERPROPERTY page (EngineEdition values) and each object's "Applies to"
(docs/platforms.md cites them).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..collectors.base import CollectorRecord, SectionResult
from ..connection.batch import sections_of

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Platform:
    name: str
    # Objects Microsoft's pages do not list for this platform ("Applies to"); any collector whose SQL
    # (own sections or the shared ones it defines) names one is left out.
    lacks: frozenset[str] = frozenset()


SQL_SERVER = Platform("sql_server")
PLATFORMS: Mapping[int, Platform] = {
    1: SQL_SERVER,  # Personal or Desktop Engine
    2: SQL_SERVER,  # Standard (also Web, Business Intelligence)
    3: SQL_SERVER,  # Enterprise (also Developer, Evaluation)
    4: SQL_SERVER,  # Express
    # Azure SQL Database: sys.master_files and sys.dm_os_volume_stats apply to SQL Server only.
    5: Platform("azure_sql_database", frozenset({"sys.master_files", "sys.dm_os_volume_stats"})),
    8: Platform("azure_sql_managed_instance"),
}


def _sql_read_by(record: CollectorRecord, sql_of: Mapping[str, str]) -> str:
    tags = {*record.sections, *(s.tag for s in record.defines)}
    return " ".join(sql_of.get(tag, "") for tag in tags)


def sql_by_tag(collectors: Sequence[CollectorRecord]) -> dict[str, str]:
    """Each section's SQL, lower-cased, the shared performance-counter section included."""
    return {s.tag: s.sql.lower() for s in sections_of(collectors)}


def reads(record: CollectorRecord, sql_of: Mapping[str, str]) -> frozenset[str]:
    """The system objects a collector's sections name (`sys.x`, `tempdb.sys.x`), lower-cased."""
    return frozenset(re.findall(r"\b(?:tempdb\.)?sys\.\w+", _sql_read_by(record, sql_of)))


# SQL Server's major versions by release, for a collector's min_major_version in messages.
RELEASES = {13: "2016", 14: "2017", 15: "2019", 16: "2022", 17: "2025"}


def major_version(version: object) -> int | None:
    """The major version of a ProductVersion such as 16.0.4135.4, None if it is not one."""
    head = str(version or "").strip().split(".")[0]
    return int(head) if head.isdigit() else None


def why_left_out(
    platform: Platform, collectors: Sequence[CollectorRecord], version: object = None
) -> dict[str, str]:
    """Each collector the platform cannot answer, with why: "reads OBJECT" for what the platform lacks
    (named anywhere in its sections' SQL, three-part names included), "runs on PLATFORMS only" for one
    declared for other platforms, "needs SQL Server RELEASE or later" for one declared for a newer
    release (SQL Server only: Azure reports 12.x whatever its engine), or "needs COLLECTOR" for one that
    depends (`needs`) on a collector left out."""
    sql_of = sql_by_tag(collectors)
    major = major_version(version) if platform is SQL_SERVER else None
    why: dict[str, str] = {}
    for record in collectors:
        text = _sql_read_by(record, sql_of)
        missing = sorted(obj for obj in platform.lacks if obj in text)
        needed = [n for n in record.needs if n in why]
        if missing:
            why[record.name] = "reads " + ", ".join(missing)
        elif record.platforms and platform.name not in record.platforms:
            why[record.name] = "runs on " + ", ".join(sorted(record.platforms)) + " only"
        elif major is not None and major < record.min_major_version:
            release = RELEASES.get(record.min_major_version, f"{record.min_major_version}.x")
            why[record.name] = f"needs SQL Server {release} or later (this one is {version})"
        elif needed:
            why[record.name] = "needs " + ", ".join(needed)
    return why


def collectors_lacking(platform: Platform, collectors: Sequence[CollectorRecord]) -> frozenset[str]:
    """Collectors that read (or depend, through `needs`, on one that reads) an object the platform lacks."""
    return frozenset(why_left_out(platform, collectors))


def decide(
    edition: object, collectors: Sequence[CollectorRecord], target: str, version: object = None
) -> dict[str, str]:
    """The collectors to leave out for a target of this EngineEdition and ProductVersion, with why,
    logging the decision once (the caller keeps the answer for the target's lifetime)."""
    try:
        platform = PLATFORMS.get(int(str(edition).strip()))
    except ValueError:
        platform = None
    if platform is None:
        log.warning(
            "unknown engine edition %r on target %s: all collectors stay on; those that fail show in"
            " mssql_exporter_collector_success (docs/platforms.md)",
            edition,
            target,
        )
        return {}
    left = why_left_out(platform, collectors, version)
    if left:
        log.info(
            "target %s runs on %s (EngineEdition %s): left out %s",
            target,
            platform.name,
            edition,
            "; ".join(f"{name} ({why})" for name, why in sorted(left.items())),
        )
    return left


def missing_text(record: CollectorRecord) -> str:
    """Why a collector left out where its objects are missing was: the objects, named."""
    objects = sorted({obj for s in record.defines if s.tag in record.sections for obj in s.requires})
    return "this server does not have " + ", ".join(objects)


def missing_objects(record: CollectorRecord, results: Mapping[str, SectionResult], target: str) -> bool:
    """True when a collector that is left out where its objects are missing (`left_out_when_missing`) got
    "unavailable" from every one of its sections: the server has none of them (an older release, or a
    Managed Instance whose update policy lacks them). Logs the decision; the caller keeps it until SQL
    Server restarts (scrape.py), so it is logged once per start."""
    if not record.left_out_when_missing or not record.sections:
        return False
    if not all(tag in results and results[tag].unavailable for tag in record.sections):
        return False
    objects = sorted({obj for s in record.defines if s.tag in record.sections for obj in s.requires})
    log.info(
        "target %s: left out %s, which reads what this server does not have (%s; docs/platforms.md)",
        target,
        record.name,
        ", ".join(objects),
    )
    return True
