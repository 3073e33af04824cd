"""The resource_semaphores collector (sys.dm_exec_query_resource_semaphores): its facts from the
stand-in's rows in process."""

from __future__ import annotations

from mssql_memory_exporter.collectors import resource_semaphores

from tests.conftest import scrape, value
from tests.offline import (
    samples_offline,
)

KIB = 1024


def test_semaphores_are_labelled_by_pool_and_id_and_null_columns_are_absent():
    got = samples_offline("healthy-oltp", resource_semaphores.COLLECTOR)
    pairs = {
        (dict(labels)["pool_id"], dict(labels)["resource_semaphore_id"])
        for (name, labels), _ in got.items()
        if name == "mssql_resource_semaphore_target_bytes"
    }
    assert pairs == {("1", "0"), ("1", "1"), ("2", "0"), ("2", "1")}  # the id repeats per pool
    regular = {"pool_id": "2", "resource_semaphore_id": "0"}
    small = {"pool_id": "2", "resource_semaphore_id": "1"}
    assert value(got, "mssql_resource_semaphore_granted_bytes", **regular) == 20480 * KIB
    assert value(got, "mssql_resource_semaphore_timeout_errors_total", **regular) == 0
    # the small-query semaphore's NULL counts are left out, not exported as 0
    for name in (
        "mssql_resource_semaphore_timeout_errors_total",
        "mssql_resource_semaphore_forced_grants_total",
    ):
        assert (name, tuple(sorted(small.items()))) not in got
    assert value(got, "mssql_resource_semaphore_waiters", **small) == 0


def test_grant_starvation_shows_waiters_and_rising_timeouts(offline_standin, scraper_for):
    s = offline_standin("grant-starvation")
    config = s.config()
    scraper = scraper_for(config)
    s.clock.advance(30)
    first = scrape(scraper, config)
    s.clock.advance(10)
    second = scrape(scraper, config)
    regular = {"pool_id": "2", "resource_semaphore_id": "0"}
    assert value(second, "mssql_resource_semaphore_waiters", **regular) == 6
    assert value(second, "mssql_memory_grants_pending") == 6
    timeouts = "mssql_resource_semaphore_timeout_errors_total"
    assert value(second, timeouts, **regular) - value(first, timeouts, **regular) == 2  # 0.2/s over 10 s
    assert value(second, "mssql_resource_semaphore_available_bytes", **regular) == 8000 * KIB
    assert value(second, "mssql_os_memory_low_signal") == 0  # the OS is calm: an inside shortage
