"""Availability groups: each replica a target, each speaking only for itself, through a failover.

The stand-in plays the pair (scenarios ag-pair-a and ag-pair-b): sqlag1 primary until t=300 s, then
sqlag2. The batch is the real one, run by the stand-in's strict interpreter, so a column the catalog does
not document, or a filter the interpreter drops, fails here.
"""

from __future__ import annotations

import re

import pytest
from mssql_memory_exporter.batch import ResultSet, render_batch, route, sections_of
from mssql_memory_exporter.collectors import COLLECTORS, availability_groups
from mssql_memory_exporter.collectors.base import FamilyBuilder, ScrapeContext, SectionResult

from tests.conftest import exposition
from tests.standin.scenario import Clock, Instance, Scenario
from tests.standin.tsql import Interpreter

SECTIONS = sections_of(COLLECTORS)
BATCH = render_batch(SECTIONS)
FAILOVER = 300.0


def results_for(scenario: str, at: float) -> dict[str, SectionResult]:
    clock = Clock(manual=True)
    instance = Instance(Scenario.load(scenario), clock)
    clock.advance(at)
    reply = Interpreter(instance).run(BATCH)
    return route([ResultSet(tuple(c.name for c in r.columns), list(r.rows)) for r in reply], SECTIONS)


def ag_series(scenario: str, at: float) -> dict[str, float]:
    results = results_for(scenario, at)
    for tag in availability_groups.COLLECTOR.sections:
        assert results[tag].error is None, (tag, results[tag].error)
    out = FamilyBuilder({})
    availability_groups.COLLECTOR.collect(results, ScrapeContext(now=at, workload="oltp", memo={}), out)
    series = {}
    for line in exposition(out.families()).splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            series[name] = float(value)
    return series


def roles(series: dict[str, float]) -> set[str]:
    return {m.group(1) for name in series if (m := re.search(r'mssql_ag_replica_info\{.*role="(\w+)"', name))}


def test_each_replica_reports_its_own_role_and_the_roles_swap_at_the_failover():
    before_a, before_b = ag_series("ag-pair-a", 60), ag_series("ag-pair-b", 60)
    after_a, after_b = ag_series("ag-pair-a", FAILOVER + 60), ag_series("ag-pair-b", FAILOVER + 60)
    assert (roles(before_a), roles(before_b)) == ({"primary"}, {"secondary"})
    assert (roles(after_a), roles(after_b)) == ({"secondary"}, {"primary"})
    assert before_a['mssql_ag_replica_is_primary{availability_group="ag1",replica="sqlag1"}'] == 1
    assert after_a['mssql_ag_replica_is_primary{availability_group="ag1",replica="sqlag1"}'] == 0
    assert after_b['mssql_ag_replica_is_primary{availability_group="ag1",replica="sqlag2"}'] == 1
    # One replica, one info series per target: the primary's row for its partner is not exported.
    for series in (before_a, before_b, after_a, after_b):
        assert sum(name.startswith("mssql_ag_replica_info{") for name in series) == 1


@pytest.mark.parametrize("at", [60.0, FAILOVER + 60])
def test_a_queue_is_counted_once_from_the_replica_that_holds_it(at):
    """The primary also lists its secondary's database row (is_local 0, queues of 999,999 KB in the
    scenario): summing the pair's redo queue must give the secondary's own 2,048 KB, not more."""
    pair = [ag_series("ag-pair-a", at), ag_series("ag-pair-b", at)]
    redo = [v for s in pair for k, v in s.items() if k.startswith("mssql_ag_database_redo_queue_bytes{")]
    send = [v for s in pair for k, v in s.items() if k.startswith("mssql_ag_database_log_send_queue_bytes{")]
    assert sum(redo) == 2048 * 1024
    assert sum(send) == 64 * 1024
    secondary = pair[1] if at < FAILOVER else pair[0]
    key = '{availability_group="ag1",database="sales"}'
    assert secondary["mssql_ag_database_redo_rate_bytes_per_second" + key] == 8192 * 1024
    assert secondary["mssql_ag_database_synchronization_health" + key] == 2
    assert (
        secondary[
            'mssql_ag_replica_connected{availability_group="ag1",replica="sqlag2"}'.replace(
                "sqlag2", "sqlag2" if at < FAILOVER else "sqlag1"
            )
        ]
        == 1
    )


def test_a_server_in_no_availability_group_exports_nothing_and_does_not_fail():
    results = results_for("healthy-oltp", 60)
    assert all(results[t].error is None for t in availability_groups.COLLECTOR.sections)
    out = FamilyBuilder({})
    availability_groups.COLLECTOR.collect(results, ScrapeContext(now=60, workload="oltp", memo={}), out)
    assert out.families() == []


def test_a_server_without_the_views_answers_unavailable_not_failed():
    clock = Clock(manual=True)
    instance = Instance(Scenario.load("ag-pair-a"), clock)
    instance.missing.update(
        {"sys.dm_hadr_availability_replica_states", "sys.dm_hadr_database_replica_states"}
    )
    clock.advance(60)
    reply = Interpreter(instance).run(BATCH)
    results = route([ResultSet(tuple(c.name for c in r.columns), list(r.rows)) for r in reply], SECTIONS)
    assert results["ag_replica"].unavailable and results["ag_replica"].error is None
    assert results["ag_databases"].unavailable and results["ag_databases"].error is None


def test_a_denied_view_fails_only_this_collector():
    clock = Clock(manual=True)
    instance = Instance(Scenario.load("ag-pair-a"), clock)
    instance.denied.add("sys.availability_replicas")
    clock.advance(60)
    reply = Interpreter(instance).run(BATCH)
    results = route([ResultSet(tuple(c.name for c in r.columns), list(r.rows)) for r in reply], SECTIONS)
    assert results["ag_replica_names"].error is not None
    assert results["ag_replica"].error is None and results["perf"].error is None


def test_secondary_warns_only_must_name_paging_alerts():
    """A typo, or a warning-only alert, in availability_groups.secondary_warns_only is refused by name:
    it would otherwise leave the page on the secondary without a word."""
    from alerts import availability_groups as ag_rules
    from alerts.generate import alert_rules
    from alerts.spec import SpecError, load

    spec = load()
    changed = spec.model_copy(
        update={
            "availability_groups": spec.availability_groups.model_copy(
                update={"secondary_warns_only": ("MSSQLMemoryPresure", "MSSQLPageLifeExpectancyLow")}
            )
        }
    )
    with pytest.raises(SpecError, match="MSSQLMemoryPresure, MSSQLPageLifeExpectancyLow is not a paging"):
        alert_rules(changed)
    # The shipped spec splits exactly the named alerts, one critical and one warning rule each.
    rules = alert_rules(spec)
    for name in spec.availability_groups.secondary_warns_only:
        split = [r for r in rules if r.get("alert") == name and ag_rules.IS_PRIMARY in r["expr"]]
        assert sorted(r["labels"]["severity"] for r in split) == ["critical", "warning"], name


def test_on_azure_sql_database_the_views_are_absent_and_the_collector_answers_unavailable():
    """The AG views' pages name SQL Server (and Managed Instance), not Azure SQL Database: the stand-in's
    catalog says so (`platforms`), and the sections answer "unavailable", never a failure."""
    results = results_for("azure-sql-database", 60)
    for tag in availability_groups.COLLECTOR.sections:
        assert results[tag].unavailable and results[tag].error is None, tag
    instance = Instance(Scenario.load("azure-sql-database"), Clock(manual=True))
    assert not instance.object_exists("sys.dm_hadr_database_replica_states")
    assert Instance(Scenario.load("managed-instance"), Clock(manual=True)).object_exists(
        "sys.dm_hadr_database_replica_states"
    )
