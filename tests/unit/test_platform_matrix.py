"""docs/platforms.md's collectors-by-platform table is what the exporter does, row by row (issue 28).

The table is generated from the code (mssql_memory_exporter.platform_table: the collector registry and
platform.py); here it is checked three ways: not stale against the code, against real scrapes of a
stand-in playing each platform, through FreeTDS over TDS, every enabled collector succeeding, and
against the hand-written matrix above it, row by row.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from mssql_memory_exporter.collectors import COLLECTORS, tempdb
from mssql_memory_exporter.collectors.base import CollectorRecord, Section

from generators import platform_table
from tests.conftest import make_config, scrape, value

DOCS = Path(__file__).resolve().parents[2] / "docs" / "platforms.md"
GENEROUS = 60.0  # seconds: nothing here is about a timeout
# Every platform scenario the stand-in plays, and where it runs.
SCENARIOS = {
    "healthy-oltp": "SQL Server 2022 on Linux (the default)",
    "windows-mount-folders": "SQL Server 2022 on Windows",
    "sql2016-rtm": "SQL Server 2016 RTM, the oldest supported",
    "sql2025": "SQL Server 2025 (17.x)",
    "managed-instance": "Azure SQL Managed Instance (EngineEdition 8)",
    "azure-sql-database": "Azure SQL Database (EngineEdition 5)",
    "ag-pair-a": "the primary replica of an availability group",
    "ag-pair-b": "the secondary replica of an availability group",
}


def test_the_page_is_not_stale():
    assert platform_table.main(["--docs", str(DOCS), "--check"]) == 0, "stale: run `make generate`"


def test_a_stale_or_unmarked_page_is_reported(tmp_path):
    page = tmp_path / "platforms.md"
    text = DOCS.read_text()
    page.write_text(text.replace("| `tempdb` |", "| `tempdb_old` |"))
    assert platform_table.main(["--docs", str(page), "--check"]) == 1
    page.write_text(text.replace(platform_table.BEGIN, ""))
    assert platform_table.main(["--docs", str(page), "--check"]) == 2


def test_a_new_collector_gets_its_row_and_what_a_platform_lacks_is_left_out():
    """As the SQL Server 2025 collectors will when they join the registry: no one writes their rows. One
    that reads sys.master_files is left out on Azure SQL Database with the reason, one that needs it too."""
    reading = CollectorRecord(
        name="new_files",
        sections=("new_files",),
        collect=tempdb.COLLECTOR.collect,
        defines=(
            Section("new_files", "SELECT N'new_files' AS section, mf.size FROM sys.master_files AS mf"),
        ),
    )
    needing = CollectorRecord(
        name="new_needs", sections=(), collect=tempdb.COLLECTOR.collect, needs=("new_files",)
    )
    page = platform_table.parse(platform_table.render(DOCS.read_text(), (*COLLECTORS, reading, needing)))
    assert page["new_files"] == {
        1: "runs",
        2: "runs",
        3: "runs",
        4: "runs",
        8: "runs",
        5: "left out: reads sys.master_files",
    }
    assert page["new_needs"][5] == "left out: needs new_files" and page["new_needs"][8] == "runs"


def _scrapes(standin, scraper_for, scenario: str, count: int = 2) -> list[dict]:
    s = standin(scenario)
    config = make_config(
        {"standin": s.target_yaml(query_timeout_seconds=GENEROUS, login_timeout_seconds=GENEROUS)}
    )
    scraper = scraper_for(config)
    return [scrape(scraper, config, timeout=GENEROUS) for _ in range(count)], s


def _by_collector(samples: dict, metric: str) -> dict[str, float]:
    return {dict(labels)["collector"]: v for (name, labels), v in samples.items() if name == metric}


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_each_platform_scrapes_as_the_page_says(standin, scraper_for, scenario):
    """From the first scrape on: the collectors the page leaves out for the scenario's EngineEdition are
    the ones the exporter reports as off, every other one is on and succeeds."""
    page = platform_table.parse(DOCS.read_text())
    got, s = _scrapes(standin, scraper_for, scenario)
    edition = int(str(s.instance.scenario.properties.get("EngineEdition", 3)))
    left_out = {c for c, cells in page.items() if cells[edition].startswith(platform_table.LEFT_OUT)}
    # And, whatever the edition, what reads an object this release lacks (SQL Server 2025's memory health
    # view before 17.x): left out from the first scrape too (docs/platforms.md, above the matrix).
    left_out |= {
        r.name
        for r in COLLECTORS
        if r.left_out_when_missing
        and not any(s.instance.object_exists(o) for sec in r.defines for o in sec.requires)
    }
    for samples in got:
        assert value(samples, "mssql_up") == 1
        enabled = _by_collector(samples, "mssql_exporter_collector_enabled")
        assert set(enabled) == set(page), "a row per collector, a collector per row"
        assert {c for c, on in enabled.items() if on == 0} == left_out, SCENARIOS[scenario]
        success = _by_collector(samples, "mssql_exporter_collector_success")
        assert {c for c, ok in success.items() if ok != 1} == set(), SCENARIOS[scenario]
        assert set(success) == set(page) - left_out


def _editions(detected: str) -> list[int]:
    """'EngineEdition 1-4', 'EngineEdition 2 or 3', 'EngineEdition 5' -> the numbers."""
    text = detected.split("EngineEdition", 1)[1].split(",")[0].split("(")[0]
    if (span := re.match(r"\s*(\d+)-(\d+)", text)) is not None:
        return list(range(int(span[1]), int(span[2]) + 1))
    return [int(n) for n in re.findall(r"\d+", text)]


def test_the_matrix_above_it_agrees_row_by_row():
    """The hand-written matrix's "Collectors left out" says, per platform row, what the generated table
    says for that row's EngineEdition: "none" where nothing is, else the very collectors left out."""
    text = DOCS.read_text()
    page = platform_table.parse(text)
    matrix = text.split("## The matrix", 1)[1].split("\n\n")
    [table] = [block for block in matrix if block.lstrip().startswith("| Platform |")]
    rows = [line.strip().strip("|").split(" | ") for line in table.strip().splitlines()[2:]]
    assert len(rows) >= 6, rows
    for platform, detected, left_cell, *_ in ([c.strip() for c in row] for row in rows):
        said = set(re.findall(r"`(\w+)`", left_cell.split(":", 1)[0])) & set(page)
        for edition in _editions(detected):
            generated = {c for c, cells in page.items() if cells[edition].startswith(platform_table.LEFT_OUT)}
            if left_cell.startswith("none"):
                assert generated == set(), (platform, edition, generated)
            else:
                assert said == generated, (platform, edition, said ^ generated)
