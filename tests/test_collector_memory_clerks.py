"""The memory_clerks collector (sys.dm_os_memory_clerks, folded to a fixed set of clerk types in SQL):
its facts, in process."""

from __future__ import annotations

import pytest
from mssql_memory_exporter.collectors import memory_clerks
from mssql_memory_exporter.collectors.base import ScrapeContext, SectionResult
from mssql_memory_exporter.metrics.builder import FamilyBuilder, ImpossibleValue

from tests.conftest import exposition, samples_of, value
from tests.offline import (
    collect,
    results_for,
    run_with,
)

KIB = 1024


def clerks_of(got: dict) -> dict[str, float]:
    return {
        dict(labels)["clerk"]: v for (name, labels), v in got.items() if name == "mssql_memory_clerk_bytes"
    }


@pytest.mark.parametrize("scenario", ["healthy-oltp", "plan-cache-bloat", "numa-4-nodes"])
def test_the_clerks_add_up_to_total_server_memory(scenario):
    got = samples_of(collect(results_for(scenario)))
    clerks = clerks_of(got)
    assert set(clerks) == set(memory_clerks.LABELS)
    assert sum(clerks.values()) == pytest.approx(value(got, "mssql_memory_total_bytes"), rel=0.02)
    # the buffer pool clerk holds the database pages and the free list
    database_and_free = value(got, "mssql_memory_database_cache_bytes") + value(
        got, "mssql_memory_free_bytes"
    )
    assert clerks["MEMORYCLERK_SQLBUFFERPOOL"] == pytest.approx(database_and_free, rel=0.01)


def test_an_unknown_clerk_type_lands_in_other_summed_in_sql():
    before = clerks_of(samples_of(collect(results_for("healthy-oltp"))))

    def add_clerks(views):
        views["dm_os_memory_clerks"]["MEMORYCLERK_FROM_A_LATER_RELEASE"] = [
            {"memory_node_id": 0, "pages_kb": 4096},
            {"memory_node_id": 1, "pages_kb": 1024},
        ]

    results = run_with("healthy-oltp", add_clerks)
    # The server sends one row per label: the new type was folded into "other" by the SQL, not in Python.
    labels = [row["clerk"] for row in results[memory_clerks.TAG].rows]
    assert sorted(labels) == sorted(memory_clerks.LABELS)
    after = clerks_of(samples_of(collect(results)))
    assert set(after) == set(before)
    assert after["other"] - before["other"] == 5120 * KIB
    assert {k: v for k, v in after.items() if k != "other"} == {
        k: v for k, v in before.items() if k != "other"
    }


def test_a_listed_clerk_type_the_server_lacks_is_zero_so_the_series_stay_put():
    results = run_with("healthy-oltp", lambda views: views["dm_os_memory_clerks"].pop("MEMORYCLERK_XTP"))
    clerks = clerks_of(samples_of(collect(results)))
    assert len(clerks) == len(memory_clerks.CLERKS) + 1 == 16
    assert clerks["MEMORYCLERK_XTP"] == 0


def clerk_rows(*rows: tuple[object, object]) -> dict[str, SectionResult]:
    return {
        memory_clerks.TAG: SectionResult(
            rows=[{"section": "memory_clerks", "clerk": c, "pages_kb": kb} for c, kb in rows]
        )
    }


def test_a_clerk_name_the_sql_did_not_fold_never_makes_a_new_series():
    out = FamilyBuilder({})
    results = clerk_rows(
        ("cachestore_sqlcp ", 10), ("SOMETHING_ELSE", 5), ("other", 1), ("CACHESTORE_SQLCP", 2)
    )
    memory_clerks.collect(results, ScrapeContext(now=0.0, workload="oltp", memo={}), out)
    clerks = clerks_of(samples_of(exposition(out.families())))
    assert len(clerks) == 16
    assert clerks["CACHESTORE_SQLCP"] == 12 * KIB and clerks["other"] == 6 * KIB


def test_a_negative_clerk_fails_the_collector_rather_than_shrink_a_sum():
    with pytest.raises(ImpossibleValue, match="pages_kb"):
        memory_clerks.collect(
            clerk_rows(("other", 100), ("other", -50)),
            ScrapeContext(now=0.0, workload="oltp", memo={}),
            FamilyBuilder({}),
        )
