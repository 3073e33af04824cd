"""Availability groups: each replica a target, each speaking only for itself, through a failover.

The stand-in plays the pair (scenarios ag-pair-a and ag-pair-b): sqlag1 primary until t=300 s, then
sqlag2. The batch is the real one, run by the stand-in's strict interpreter, so a column the catalog does
not document, or a filter the interpreter drops, fails here.
"""

from __future__ import annotations

import logging
import re

import pytest
from mssql_memory_exporter.collectors import COLLECTORS, availability_groups
from mssql_memory_exporter.collectors.base import ScrapeContext, SectionResult
from mssql_memory_exporter.connection.batch import ResultSet, render_batch, route, sections_of
from mssql_memory_exporter.metrics.builder import FamilyBuilder

from tests.conftest import exposition, make_config, scrape, value
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


# Bad input (issue 28): a replica that has left, a login that may read the AG views on one replica and not
# on the other. One exporter, the real batch, answered by the stand-in in process (tests/inprocess.py).

AG1, AG3 = "ag1", "6f1c2a1e-0000-4000-8000-00000000a003"  # ag3 is being removed: its catalog rows are gone
SCRAPES_AT = (0.0, 15.0, 30.0)
COLLECTOR_LOG = "mssql_memory_exporter.collectors.availability_groups"
SCRAPE_LOG = "mssql_memory_exporter.scrape.scraper"


def ag_samples(samples: dict) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    out: dict[str, dict] = {}
    for (name, labels), v in samples.items():
        if name.startswith("mssql_ag_"):
            out.setdefault(name, {})[labels] = v
    return out


def successes(samples: dict) -> dict[str, float]:
    return {
        dict(k)["collector"]: v for (n, k), v in samples.items() if n == "mssql_exporter_collector_success"
    }


def test_a_replica_that_has_left_leaves_no_made_up_figures_and_the_scrape_intact(
    offline_standin, scraper_for, caplog
):
    """ag-replica-left: ag1's partner gone (no role, disconnected), ag2 RESOLVING with NULL queues, ag3
    being removed (no names, no role, two databases already dropped). Three scrapes, one exporter."""
    s = offline_standin("ag-replica-left")
    config = s.config()
    scraper = scraper_for(config)
    got = []
    with caplog.at_level(logging.INFO):
        for at in SCRAPES_AT:
            s.clock.advance(at - s.clock.now())
            got.append(scrape(scraper, config))
    for samples in got:
        assert value(samples, "mssql_up") == 1
        assert set(successes(samples).values()) == {1.0}, successes(samples)
        assert value(samples, "mssql_page_life_expectancy_seconds") > 0
    ag = ag_samples(got[-1])
    info = {(dict(k)["availability_group"], dict(k)["role"]) for k in ag["mssql_ag_replica_info"]}
    assert info == {(AG1, "primary"), ("ag2", "resolving"), (AG3, "unknown")}
    # Only this server's replicas: sqlag2 (gone) and sqlag3 (no state row) are the primary's to know of.
    replicas = {dict(k)["replica"] for k in ag["mssql_ag_replica_info"]}
    assert replicas == {"sqlag1", "6f1c2a1e-0000-4000-8000-0000000003a1"}
    # A NULL role is not "not the primary": no is_primary series rather than a made-up 0.
    primary = {dict(k)["availability_group"]: v for k, v in ag["mssql_ag_replica_is_primary"].items()}
    assert primary == {AG1: 1, "ag2": 0}
    health = {
        dict(k)["availability_group"]: v for k, v in ag["mssql_ag_replica_synchronization_health"].items()
    }
    connected = {dict(k)["availability_group"]: v for k, v in ag["mssql_ag_replica_connected"].items()}
    assert (health, connected) == ({AG1: 1, "ag2": 0}, {AG1: 1, "ag2": 0})
    # NULL queue figures give no series at all, never 0 bytes.
    for name in ag_collector_queues():
        assert name not in ag, name
    # Databases already dropped (DB_NAME NULL) keep their id: two of them must not collide on "".
    databases = {dict(k)["database"] for k in ag["mssql_ag_database_synchronization_health"]}
    assert databases == {"sales", "inventory", "41", "42"}
    # At most one line about all this, not one per scrape: ag3's missing names, said once.
    lines = [r.getMessage() for r in caplog.records if r.name == COLLECTOR_LOG]
    assert len(lines) == 1 and AG3 in lines[0] and "VIEW ANY DEFINITION" in lines[0], lines
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING and r.name != COLLECTOR_LOG]


def ag_collector_queues() -> list[str]:
    return [
        spec.name
        for spec in (
            availability_groups.LOG_SEND_QUEUE_BYTES,
            availability_groups.LOG_SEND_RATE,
            availability_groups.REDO_QUEUE_BYTES,
            availability_groups.REDO_RATE,
        )
    ]


def pair_config(a, b) -> object:
    return make_config({"sqlag1": a.target_yaml("sqlag1"), "sqlag2": b.target_yaml("sqlag2")})


def scrape_pair(scraper, config, a, b) -> list[tuple[dict, dict]]:
    got = []
    for at in SCRAPES_AT:
        for s in (a, b):
            s.clock.advance(at - s.clock.now())
        got.append((scrape(scraper, config, "sqlag1"), scrape(scraper, config, "sqlag2")))
    return got


@pytest.mark.parametrize(
    ("error", "permission"),
    [(300, "VIEW SERVER STATE"), (229, "SELECT permission was denied")],
    ids=["no-view-server-state", "deny-select"],
)
def test_a_login_denied_the_ag_views_on_one_replica_fails_only_that_targets_collector(
    offline_standin, scraper_for, caplog, error, permission
):
    a, b = offline_standin("ag-pair-a"), offline_standin("ag-pair-b")
    for view in (availability_groups.REPLICA_STATES, availability_groups.DATABASE_STATES):
        b.instance.denied.add(view, error)
    config = pair_config(a, b)
    scraper = scraper_for(config)
    with caplog.at_level(logging.INFO):
        got = scrape_pair(scraper, config, a, b)
    for first, second in got:
        # sqlag1's AG series are intact: its role, health and the primary's own database row.
        assert (
            value(
                first, availability_groups.REPLICA_IS_PRIMARY.name, availability_group=AG1, replica="sqlag1"
            )
            == 1
        )
        assert value(first, "mssql_exporter_collector_success", collector="availability_groups") == 1
        assert set(successes(first).values()) == {1.0}
        # sqlag2: up, its AG collectors failed (availability_recovery reads the same views), every other
        # collector intact, no AG series at all.
        assert value(second, "mssql_up") == 1
        assert value(second, "mssql_exporter_collector_success", collector="availability_groups") == 0
        assert {c for c, v in successes(second).items() if v != 1} == {
            "availability_groups",
            "availability_recovery",
        }
        assert not ag_samples(second)
    failed = [
        r
        for r in caplog.records
        if r.name == SCRAPE_LOG
        and getattr(r, "collector", None) == "availability_groups"
        and r.levelno >= logging.WARNING
    ]
    # Once, naming the target and what SQL Server refused; not once per scrape; never for sqlag1.
    assert len(failed) == 1, [(r.getMessage(), r.__dict__.get("err")) for r in failed]
    assert failed[0].target == "sqlag2" and permission in failed[0].err and str(error) in failed[0].err


def test_a_login_without_view_any_definition_on_one_replica_is_named_once(
    offline_standin, scraper_for, caplog
):
    """Without VIEW ANY DEFINITION SQL Server raises no error on a catalog view: metadata visibility
    leaves its rows out. The DMV rows still come, so sqlag2's series carry the group's and replica's ids
    where sqlag1's carry names; the collector succeeds and says why, once."""
    a, b = offline_standin("ag-pair-a"), offline_standin("ag-pair-b")
    b.instance.scenario.views["availability_groups"] = []
    b.instance.scenario.views["availability_replicas"] = []
    config = pair_config(a, b)
    scraper = scraper_for(config)
    with caplog.at_level(logging.INFO):
        got = scrape_pair(scraper, config, a, b)
    group_id = "6f1c2a1e-0000-4000-8000-00000000a001"
    for first, second in got:
        assert (
            value(
                first, availability_groups.REPLICA_IS_PRIMARY.name, availability_group=AG1, replica="sqlag1"
            )
            == 1
        )
        assert value(second, "mssql_exporter_collector_success", collector="availability_groups") == 1
        assert (
            value(
                second,
                availability_groups.REPLICA_IS_PRIMARY.name,
                availability_group=group_id,
                replica="6f1c2a1e-0000-4000-8000-0000000000b2",
            )
            == 0
        )
    lines = [(getattr(r, "target", None), r.getMessage()) for r in caplog.records if r.name == COLLECTOR_LOG]
    assert len(lines) == 1 and "VIEW ANY DEFINITION" in lines[0][1] and "sqlag2" in lines[0][1], lines
