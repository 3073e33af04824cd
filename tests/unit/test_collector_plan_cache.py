"""The plan_cache collector (perf object Plan Cache): its facts, from the stand-in's rows in process."""

from __future__ import annotations

import pytest
from mssql_memory_exporter.collectors import plan_cache
from mssql_memory_exporter.scrape.scraper import Scraper

from tests.conftest import exposition, samples_of, value
from tests.timeouts import PATIENT_SECONDS

CACHES = ("sql_plans", "object_plans", "bound_trees", "extended_stored_procedures", "temporary_tables")
PAGE = 8192


def probe(offline_standin, scraper_for, scenario: str) -> list:
    s = offline_standin(scenario)
    config = s.config()
    scraper: Scraper = scraper_for(config)
    return scraper.probe(config.targets["standin"], PATIENT_SECONDS)


def test_every_cache_type_is_exported_with_its_bytes_plans_and_hit_ratio(offline_standin, scraper_for):
    got = samples_of(exposition(probe(offline_standin, scraper_for, "healthy-oltp")))
    assert value(got, "mssql_exporter_collector_success", collector="plan_cache") == 1
    assert value(got, "mssql_plan_cache_bytes", cache="sql_plans") == 65536 * PAGE
    assert value(got, "mssql_plan_cache_bytes", cache="object_plans") == 32768 * PAGE
    assert value(got, "mssql_plan_cache_objects", cache="sql_plans") == 12000
    assert value(got, "mssql_plan_cache_objects_in_use", cache="temporary_tables") == 2
    assert value(got, "mssql_plan_cache_hit_ratio", cache="object_plans") == pytest.approx(0.99)
    for cache in CACHES:
        for name in ("mssql_plan_cache_bytes", "mssql_plan_cache_objects", "mssql_plan_cache_hit_ratio"):
            value(got, name, cache=cache)
    # _Total is left out: sum() over the types gives it, and would count it twice if it were there.
    assert not [k for k in got if k[0].startswith("mssql_plan_cache") and ("cache", "total") in k[1]]
    # The sizes agree with the plan-cache clerk: SQL Plans are CACHESTORE_SQLCP.
    assert value(got, "mssql_plan_cache_bytes", cache="sql_plans") == value(
        got, "mssql_memory_clerk_bytes", clerk="CACHESTORE_SQLCP"
    )


def test_bloat_shows_as_gigabytes_of_sql_plans_that_are_not_found_again(offline_standin, scraper_for):
    got = samples_of(exposition(probe(offline_standin, scraper_for, "plan-cache-bloat")))
    assert value(got, "mssql_plan_cache_bytes", cache="sql_plans") == 6 * 1024**3
    assert value(got, "mssql_plan_cache_hit_ratio", cache="sql_plans") < 0.1
    assert value(got, "mssql_plan_cache_hit_ratio", cache="object_plans") > 0.9
    assert value(got, "mssql_plan_cache_objects", cache="sql_plans") == 160000


@pytest.mark.parametrize(
    "instance, label",
    [
        ("SQL Plans", "sql_plans"),
        ("Sql Plans", "sql_plans"),  # SQL Server 2014 and earlier spell it so
        ("Temporary Tables & Table Variables", "temporary_tables"),
        ("Extended Stored Procedures", "extended_stored_procedures"),
    ],
)
def test_cache_label_is_stable_across_spellings(instance, label):
    assert plan_cache.cache_label(instance) == label
