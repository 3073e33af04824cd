"""The tempdb_governance collector (SQL Server 2025 tempdb space resource governance, and the persistent
version store ADR keeps in tempdb): its facts from the stand-in's rows in process, and what it leaves out
on servers that lack the columns."""

from __future__ import annotations

import logging

import pytest
from mssql_memory_exporter.collectors import tempdb_governance as gov

from tests.conftest import exposition, samples_of, value
from tests.timeouts import PATIENT_SECONDS

KIB, MIB = 1024, 1024 * 1024
MINE = ("mssql_tempdb_workload_group", "mssql_tempdb_persistent_version_store")


def started(offline_standin, scraper_for, scenario: str = "sql2025"):
    s = offline_standin(scenario)
    config = s.config()
    return s, config, scraper_for(config)


def probe(scraper, config) -> list:
    return scraper.probe(config.targets["standin"], PATIENT_SECONDS)


def mine(samples: dict) -> dict:
    return {k: v for k, v in samples.items() if k[0].startswith(MINE)}


def test_each_workload_group_shows_its_tempdb_use_against_its_limit(offline_standin, scraper_for):
    _s, config, scraper = started(offline_standin, scraper_for)
    got = samples_of(exposition(probe(scraper, config)))
    assert value(got, "mssql_exporter_collector_success", collector="tempdb_governance") == 1
    used = "mssql_tempdb_workload_group_space_bytes"
    assert value(got, used, workload_group="reporting") == 262144 * KIB
    assert value(got, used, workload_group="default") == 65536 * KIB
    assert value(got, used, workload_group="internal") == 0
    assert value(got, "mssql_tempdb_workload_group_peak_space_bytes", workload_group="default") == 256 * MIB
    # The fixed limit, MB to bytes; no limit where none is set, nor where a percent limit is not in
    # effect (base's tempdb files grow without a maximum, so SQL Server does not enforce etl's 25 %).
    limits = {dict(k[1])["workload_group"]: v for k, v in got.items() if k[0].endswith("_limit_bytes")}
    assert limits == {"reporting": 1024 * MIB}
    assert value(got, "mssql_tempdb_workload_group_limit_violations_total", workload_group="reporting") == 0
    # The persistent version store in tempdb: database 2's row only.
    assert value(got, "mssql_tempdb_persistent_version_store_bytes") == 200 * MIB


def test_the_group_runs_into_its_limit_and_its_violations_count_up(offline_standin, scraper_for):
    s, config, scraper = started(offline_standin, scraper_for)
    seen = []
    for _ in range(4):
        got = samples_of(exposition(probe(scraper, config)))
        seen.append(
            (
                value(got, "mssql_tempdb_workload_group_limit_violations_total", workload_group="reporting"),
                value(got, "mssql_tempdb_workload_group_space_bytes", workload_group="reporting")
                / value(got, "mssql_tempdb_workload_group_limit_bytes", workload_group="reporting"),
            )
        )
        s.clock.advance(60)
    assert [v for v, _ in seen] == [0, 1, 3, 6]
    assert [round(share, 3) for _, share in seen] == [0.25, 0.75, 0.969, 0.969]
    assert value(got, "mssql_tempdb_persistent_version_store_bytes") == 400 * MIB
    # Exposed as a counter, so increase() and rate() apply (and a RESET STATISTICS reads as a reset).
    text = exposition(probe(scraper, config))
    assert "# TYPE mssql_tempdb_workload_group_limit_violations_total counter" in text


@pytest.mark.parametrize("scenario", ["healthy-oltp", "sql2016-rtm"])
def test_left_out_before_2025_without_failing_and_said_once(offline_standin, scraper_for, scenario, caplog):
    """SQL Server 2022 (healthy-oltp plays 16.x) has the view but not its tempdb columns; 2016 has no PVS
    view either: the collector succeeds with nothing to export, and says why once per target."""
    s, config, scraper = started(offline_standin, scraper_for, scenario)
    with caplog.at_level(logging.INFO, logger=gov.__name__):
        for _ in range(3):
            got = samples_of(exposition(probe(scraper, config)))
            assert value(got, "mssql_exporter_collector_success", collector="tempdb_governance") == 1
            assert value(got, "mssql_up") == 1
            assert mine(got) == {}
            s.clock.advance(30)
    lines = [r.getMessage() for r in caplog.records if r.name == gov.__name__]
    assert len(lines) == 1 and "SQL Server 2025" in lines[0], lines


def test_a_percent_limit_in_effect_is_a_share_of_the_capped_data_files(offline_standin, scraper_for):
    """tempdb-growth-capped: two data files that grow up to a max_size of 6,000 MB each, so a percent
    limit is in effect and 100 % is the sum of the maximums."""
    s = offline_standin("tempdb-growth-capped")
    s.instance.scenario.properties["ProductVersion"] = "17.0.1000.7"
    s.instance.scenario.views["dm_resource_governor_workload_groups"] = [
        {
            "group_id": 300,
            "name": "adhoc",
            "tempdb_data_space_kb": 1024,
            "peak_tempdb_data_space_kb": 2048,
            "total_tempdb_data_limit_violation_count": 0,
        }
    ]
    s.instance.scenario.views["resource_governor_configuration"] = {
        "classifier_function_id": 0,
        "is_enabled": 1,
    }
    s.instance.scenario.views["resource_governor_workload_groups"] = [
        {
            "group_id": 300,
            "name": "adhoc",
            "group_max_tempdb_data_mb": None,
            "group_max_tempdb_data_percent": 10.0,
        }
    ]
    config = s.config()
    got = samples_of(exposition(scraper_for(config).probe(config.targets["standin"], PATIENT_SECONDS)))
    pages = 2 * round(6000e6 / 8192)
    limit = value(got, "mssql_tempdb_workload_group_limit_bytes", workload_group="adhoc")
    assert limit == pytest.approx(0.10 * pages * 8192, rel=1e-3)


def test_no_limit_while_resource_governor_is_disabled(offline_standin, scraper_for, caplog):
    """Resource governor is off by default; its stored limits are then not enforced: no limit series,
    the groups' use still exported, and the reason logged once."""
    s, config, scraper = started(offline_standin, scraper_for)
    s.instance.scenario.views["resource_governor_configuration"] = {
        "classifier_function_id": 0,
        "is_enabled": 0,
    }
    with caplog.at_level(logging.INFO, logger=gov.__name__):
        for _ in range(2):
            got = samples_of(exposition(probe(scraper, config)))
            assert [k for k in got if k[0] == "mssql_tempdb_workload_group_limit_bytes"] == []
            assert value(got, "mssql_tempdb_workload_group_space_bytes", workload_group="reporting") > 0
    lines = [r.getMessage() for r in caplog.records if "disabled" in r.getMessage()]
    assert len(lines) == 1, lines


@pytest.mark.parametrize(
    "files, pages",
    [
        (
            [{"size": 100, "max_size": 1000, "growth": 64}, {"size": 100, "max_size": 3000, "growth": 64}],
            4000,
        ),
        ([{"size": 500, "max_size": -1, "growth": 0}, {"size": 700, "max_size": -1, "growth": 0}], 1200),
        # New instance's default: unlimited and growing, so not in effect; and mixed configurations.
        ([{"size": 100, "max_size": -1, "growth": 64}], None),
        ([{"size": 100, "max_size": 1000, "growth": 64}, {"size": 100, "max_size": -1, "growth": 0}], None),
        ([], None),
    ],
)
def test_tempdb_maximum_follows_microsofts_rule(files, pages):
    assert gov.tempdb_max_pages(files) == pages


def test_the_fixed_limit_wins_over_the_percent_one():
    row = {"group_max_tempdb_data_mb": 512.0, "group_max_tempdb_data_percent": 50.0}
    assert gov.limit_bytes(row, max_pages=1_000_000) == 512 * MIB
    assert gov.limit_bytes({"group_max_tempdb_data_percent": 50.0}, max_pages=1000) == 500 * 8192
    assert gov.limit_bytes({}, max_pages=1000) is None
