"""The availability_recovery collector: data movement states, failover readiness, the group's health and
the primary's view of every partner replica, on the stand-in's rows in process (tests/offline.py).

Scenarios: ag-pair-a/b (a synchronous pair that fails over at t=300 s), ag-dr-lagging (the primary with an
asynchronous DR replica nobody scrapes, 5,400 s behind), ag-redo-stuck (a secondary whose redo stopped),
ag-replica-left (a partner gone, a suspended copy, a group being removed).
"""

from __future__ import annotations

import pytest
from mssql_memory_exporter.collectors import availability_groups, availability_recovery
from mssql_memory_exporter.collectors.base import ScrapeContext
from mssql_memory_exporter.metrics.builder import FamilyBuilder, ImpossibleValue

from tests.conftest import value
from tests.offline import results_for, run_with, samples_offline

R = availability_recovery
BOTH = (availability_groups.COLLECTOR, availability_recovery.COLLECTOR)
FAILOVER = 300.0
AG1 = {"availability_group": "ag1"}
SALES = {**AG1, "database": "sales"}


def partner_series(samples: dict) -> dict:
    return {k: v for k, v in samples.items() if k[0].startswith("mssql_ag_partner_")}


def test_the_primary_tells_the_data_loss_of_a_dr_replica_nobody_scrapes():
    """Microsoft's RPO estimate: the primary copy's last commit (1 s ago) minus the DR copy's (5,401 s
    ago); the synchronized sqlag2 is failover ready, so 0 there whatever its commit times say."""
    got = samples_offline("ag-dr-lagging", *BOTH, at=60)
    loss = R.PARTNER_DATA_LOSS.name
    assert value(got, loss, **SALES, replica="sqlag3") == 5400
    assert value(got, loss, **SALES, replica="sqlag2") == 0
    assert value(got, R.PARTNER_LAG.name, **SALES, replica="sqlag3") == 5400
    assert value(got, R.PARTNER_SEND_QUEUE.name, **SALES, replica="sqlag3") == 4 * 1024**3
    assert value(got, R.PARTNER_SYNC_STATE.name, **SALES, replica="sqlag3") == 1
    assert value(got, R.PARTNER_FAILOVER_READY.name, **SALES, replica="sqlag3") == 0
    assert value(got, R.PARTNER_SYNCHRONOUS.name, **AG1, replica="sqlag3") == 0
    assert value(got, R.PARTNER_SYNCHRONOUS.name, **AG1, replica="sqlag2") == 1
    assert value(got, R.GROUP_HEALTH.name, **AG1) == 1
    # The gap follows the scenario's step at t=120 s: it is a reading, not a constant.
    later = samples_offline("ag-dr-lagging", *BOTH, at=400)
    assert value(later, loss, **SALES, replica="sqlag3") == 5460


def test_partners_are_spoken_for_by_the_primary_only_and_never_under_the_self_names():
    """Before the failover sqlag1 (ag-pair-a) is the primary and speaks for sqlag2; after it, sqlag2
    (ag-pair-b) speaks for sqlag1. A secondary exports no partner series, and the partner's absurd
    999,999 KB queues never reach the availability_groups names (summed over the pair: 2,048 KB)."""
    for at, primary, secondary, partner in (
        (60, "ag-pair-a", "ag-pair-b", "sqlag2"),
        (FAILOVER + 60, "ag-pair-b", "ag-pair-a", "sqlag1"),
    ):
        on_primary = samples_offline(primary, *BOTH, at=at)
        on_secondary = samples_offline(secondary, *BOTH, at=at)
        assert not partner_series(on_secondary), at
        replicas = {dict(k[1])["replica"] for k in partner_series(on_primary)}
        assert replicas == {partner}, at
        redo = [
            v
            for s in (on_primary, on_secondary)
            for k, v in s.items()
            if k[0] == "mssql_ag_database_redo_queue_bytes"
        ]
        assert sum(redo) == 2048 * 1024
        assert value(on_primary, R.PARTNER_REDO_QUEUE.name, **SALES, replica=partner) == 999999 * 1024


def test_a_stuck_redo_shows_as_a_queue_with_no_redo_rate_and_the_copy_still_failover_ready():
    got = samples_offline("ag-redo-stuck", *BOTH, at=60)
    assert value(got, "mssql_ag_database_redo_queue_bytes", **SALES) == 512 * 1024**2
    assert value(got, "mssql_ag_database_redo_rate_bytes_per_second", **SALES) == 0
    # Hardened, so no data lost at a failover; only its recovery would take long.
    assert value(got, R.DATABASE_FAILOVER_READY.name, **SALES) == 1
    assert value(got, R.DATABASE_SYNC_STATE.name, **SALES) == 2
    assert value(got, R.REPLICA_SYNCHRONOUS.name, **AG1, replica="sqlag2") == 1
    assert not partner_series(got)


def test_a_suspended_copy_carries_its_reason_and_a_gone_partner_gives_no_made_up_loss():
    got = samples_offline("ag-replica-left", *BOTH, at=60)
    assert (
        value(
            got,
            R.DATABASE_SUSPENDED.name,
            availability_group="ag2",
            database="inventory",
            reason="suspend_from_partner",
        )
        == 1
    )
    assert value(got, R.DATABASE_SUSPENDED.name, **SALES, reason="none") == 0
    # sqlag2 has gone: not failover ready and no commit time, so Microsoft's estimate is "not available".
    assert value(got, R.PARTNER_FAILOVER_READY.name, **SALES, replica="sqlag2") == 0
    assert not [k for k in got if k[0] == R.PARTNER_DATA_LOSS.name]
    assert value(got, R.PARTNER_CONNECTED.name, **AG1, replica="sqlag2") == 0
    assert value(got, R.GROUP_HEALTH.name, availability_group="ag2") == 0
    # ag2's replica is RESOLVING: no group of which this target is the primary, so no partner of ag2.
    assert not [k for k in partner_series(got) if dict(k[1])["availability_group"] != "ag1"]


def test_a_partner_ahead_of_the_primary_gives_no_estimate():
    """Microsoft's procedure answers "not available" when the difference is negative (clocks, a commit
    racing the read): no series rather than a negative loss or a made-up 0."""

    def ahead(views: dict) -> None:
        for row in views["dm_hadr_database_replica_states"]:
            if row["replica_id"].endswith("c3"):
                row["last_commit_time"] = {"ago": 0}
            if row["is_local"] == 1:
                row["last_commit_time"] = {"ago": 30}

    results = run_with("ag-dr-lagging", ahead)
    out = FamilyBuilder({})
    R.COLLECTOR.collect(results, ScrapeContext(now=0, workload="oltp", memo={}), out)
    names = {(f.name, tuple(sorted(s.labels.items()))) for f in out.families() for s in f.samples}
    assert (
        R.PARTNER_DATA_LOSS.name,
        (("availability_group", "ag1"), ("database", "sales"), ("replica", "sqlag3")),
    ) not in names


@pytest.mark.parametrize(("column", "bad"), [("is_suspended", 2), ("secondary_lag_seconds", -5)])
def test_an_impossible_reading_fails_the_collector(column, bad):
    results = results_for("ag-dr-lagging", 60)
    for row in results["ag_databases"].rows:
        row[column] = bad  # type: ignore[index]
    with pytest.raises(ImpossibleValue, match=column):
        R.COLLECTOR.collect(results, ScrapeContext(now=0, workload="oltp", memo={}), FamilyBuilder({}))


def test_managed_instance_lacks_the_cluster_states_and_answers_unavailable():
    """sys.dm_hadr_database_replica_cluster_states applies to SQL Server only; Azure SQL Database has
    none of the HADR views. Both answer "unavailable", never a failure."""
    for scenario, tags in (
        ("managed-instance", (R.CLUSTER_STATES_TAG,)),
        ("azure-sql-database", (R.CLUSTER_STATES_TAG, R.GROUP_STATES_TAG)),
    ):
        results = results_for(scenario, 60)
        for tag in tags:
            assert results[tag].unavailable and results[tag].error is None, (scenario, tag)


def test_a_server_in_no_group_exports_nothing():
    assert samples_offline("healthy-oltp", R.COLLECTOR) == {}
