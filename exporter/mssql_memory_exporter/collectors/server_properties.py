"""SERVERPROPERTY: version and edition as `mssql_build_info`, and the target's workload profile.

Reads no DMV, so it needs no permission and still works when VIEW SERVER STATE is missing.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..metrics.builder import FamilyBuilder
from ..metrics.declare import Label, MetricSpec
from .base import CollectorRecord, ScrapeContext, Section, SectionResult, rows_of

TAG = "server"
ENGINE_EDITION_KEY = "engine_edition"  # ctx.memo; read by the scrape (platform.py)
PRODUCT_VERSION_KEY = "product_version"  # ctx.memo; a collector's min_major_version is checked on it

PROPERTIES = {
    "version": "ProductVersion",
    "product_level": "ProductLevel",
    "update_level": "ProductUpdateLevel",
    "edition": "Edition",
    "engine_edition": "EngineEdition",
}

SECTION = Section(
    tag=TAG,
    sql="SELECT N'server' AS section, "
    + ", ".join(
        f"CAST(SERVERPROPERTY(N'{prop}') AS nvarchar(128)) AS {col}" for col, prop in PROPERTIES.items()
    )
    + ";",
)

BUILD_INFO = MetricSpec(
    name="mssql_build_info",
    type="gauge",
    help="SQL Server version and edition; always 1.",
    unit="always 1",
    source="`SERVERPROPERTY('ProductVersion')`, `('ProductLevel')`, `('ProductUpdateLevel')`, `('Edition')`, "
    "`('EngineEdition')`; a NULL property (`ProductUpdateLevel` on a build without a CU) is an empty value",
    question="Which version, update and edition is this server (the example and `engine_edition`'s "
    "numbers are below)?",
    labels=(
        Label("version"),
        Label("product_level"),
        Label("update_level"),
        Label("edition"),
        Label("engine_edition"),
    ),
)
TARGET_INFO = MetricSpec(
    name="mssql_target_info",
    type="gauge",
    help="The exporter's configuration of this target; always 1.",
    unit="always 1",
    source="Not from SQL Server: the target's `workload` setting (`oltp` or `olap`, default `oltp`)",
    question="Which hit-ratio threshold applies (rules join on it: 0.95 OLTP, 0.90 OLAP)? Exported whenever "
    "`mssql_up` is 1, even if the `server` section returned nothing.",
    labels=(Label("workload", "`oltp` or `olap`"),),
)


def collect(results: Mapping[str, SectionResult], ctx: ScrapeContext, out: FamilyBuilder) -> None:
    for row in rows_of(results, TAG):
        labels = {col: "" if row.get(col) is None else str(row.get(col)).strip() for col in PROPERTIES}
        out.emit(BUILD_INFO, 1.0, labels)
        # The platform (platform.py) is decided from it once per target, by the scrape.
        ctx.memo[ENGINE_EDITION_KEY] = labels["engine_edition"]
        ctx.memo[PRODUCT_VERSION_KEY] = labels["version"]
        break
    # Alert thresholds that depend on the workload (hit ratio 0.95 OLTP, 0.90 OLAP) join on this.
    out.emit(TARGET_INFO, 1.0, {"workload": ctx.workload})


COLLECTOR = CollectorRecord(
    name="server_properties",
    sections=(TAG,),
    collect=collect,
    defines=(SECTION,),
    metrics=(BUILD_INFO, TARGET_INFO),
)
