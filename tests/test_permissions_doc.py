"""docs/permissions.md's tables come from the collectors' own SQL and one permission per object
(generators/permissions.py): a collector that reads objects already declared needs no docs edit."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from mssql_memory_exporter.collectors import COLLECTORS, plan_cache
from mssql_memory_exporter.collectors.base import CollectorRecord, Section
from mssql_memory_exporter.collectors.perf import perf_object

from generators import permission_reference, reference
from generators.permissions import (
    BY_NAME,
    OBJECTS,
    VAD,
    VSS,
    objects_in,
    objects_read,
    undeclared,
)

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "permissions.md"
METRICS = ROOT / "docs" / "metrics.md"
CATALOG = ROOT / "tests" / "standin" / "catalog.yaml"


def _nothing(results, ctx, out) -> None:
    """A collect function for records that are only read, never scraped."""


def test_the_tables_are_written_from_the_collectors():
    assert reference.main(["--docs", str(METRICS), "--permissions", str(PAGE), "--check"]) == 0, (
        "stale: run `make generate`"
    )


def test_a_stale_table_is_caught_and_rewritten_leaving_the_prose(tmp_path: Path):
    page = tmp_path / "permissions.md"
    text = PAGE.read_text(encoding="utf-8")
    stale = text.replace("| `plan_cache` |", "| `plan_cache_old` |").replace(
        "## Summary", "## Summary, edited"
    )
    page.write_text(stale, encoding="utf-8")
    assert reference.main(["--docs", str(METRICS), "--permissions", str(page), "--check"]) == 1
    assert reference.main(["--docs", str(METRICS), "--permissions", str(page)]) == 0
    assert page.read_text(encoding="utf-8") == text.replace("## Summary", "## Summary, edited")


def test_missing_markers_name_the_table():
    text = PAGE.read_text(encoding="utf-8").replace(permission_reference.end("objects"), "")
    with pytest.raises(LookupError, match="no markers for its objects table"):
        permission_reference.render(text)


def test_every_object_read_has_its_permission_declared_and_every_declared_object_is_read():
    assert undeclared(COLLECTORS) == {}
    read = {o for record in COLLECTORS for o in objects_read(record, COLLECTORS)}
    assert sorted(set(BY_NAME) - read) == [], "declared for no collector: remove, or a collector lost it"
    assert len(BY_NAME) == len(OBJECTS), "an object declared twice"


def test_every_declared_object_is_a_documented_object_of_the_stand_ins_catalog():
    catalog = yaml.safe_load(CATALOG.read_text(encoding="utf-8"))["objects"]
    names = {o.name.removeprefix("tempdb.") for o in OBJECTS}
    assert sorted(names - set(catalog)) == []


def test_a_collector_reading_an_undeclared_object_fails_naming_both():
    odd = CollectorRecord(
        name="odd",
        sections=("odd",),
        collect=_nothing,
        defines=(Section("odd", "SELECT N'odd' AS section, x FROM sys.dm_os_schedulers;"),),
    )
    with pytest.raises(LookupError, match=r"odd: sys\.dm_os_schedulers"):
        permission_reference.render(PAGE.read_text(encoding="utf-8"), (*COLLECTORS, odd))


def test_a_new_perf_collector_gets_its_row_and_its_place_in_the_lists_without_an_edit():
    """What adding plan_cache needed by hand before: its perf row and its name under `VIEW SERVER STATE`."""
    new = replace(
        plan_cache.COLLECTOR, name="latches", reads=(perf_object("Latches", ("Latch Waits/sec",)),)
    )
    collectors = (*COLLECTORS, new)
    table = permission_reference.collectors_table(collectors)
    row = "| `latches` | `sys.dm_os_performance_counters` (object `Latches`) | `VIEW SERVER STATE` |"
    assert row in table
    denied = permission_reference.denied_list(collectors)
    assert "`latches`" in denied.splitlines()[0] and "`latches`" not in denied.splitlines()[1]


def test_what_each_collector_reads_is_found_in_its_own_sql():
    by_name = {r.name: r for r in COLLECTORS}
    assert objects_read(by_name["server_properties"], COLLECTORS) == ()  # SERVERPROPERTY() only
    assert objects_read(by_name["plan_cache"], COLLECTORS) == ("sys.dm_os_performance_counters",)
    # ssd_pools brings no section: it reads what volumes read, and volumes reads sys_info's start tick.
    assert set(objects_read(by_name["ssd_pools"], COLLECTORS)) >= {"sys.master_files", "sys.dm_os_sys_info"}
    # The volume lookups for Windows paths come with the file list, and only label.
    assert "sys.dm_os_volume_stats" in objects_read(by_name["tempdb"], COLLECTORS)
    assert "sys.dm_os_volume_stats" not in objects_read(by_name["tempdb"], COLLECTORS, lookups=False)
    wrapped = Section(
        "x", "SELECT N'x' AS section FROM tempdb.sys.database_files AS f JOIN sys.databases AS d"
    )
    assert objects_in(wrapped) == ("tempdb.sys.database_files", "sys.databases")
    assert objects_in(Section("x", "EXEC sys.sp_executesql N'SELECT 1'")) == ()


def test_the_lists_of_who_a_missing_permission_touches_follow_the_tables():
    denied = permission_reference.denied_list(COLLECTORS).splitlines()
    without_state, without_definition = denied
    assert VSS in without_state and VAD in without_definition
    assert "`server_properties`" not in without_state  # SERVERPROPERTY() needs no permission
    assert "`tempdb_files`" not in without_state and "`tempdb_files`" in without_definition
    assert "`memory_clerks`" in without_state and "`memory_clerks`" not in without_definition
