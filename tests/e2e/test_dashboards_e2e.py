"""Every dashboard query executed against a real Prometheus with the bundle's rules, while stand-in SQL
Servers play each panel's scenario (split from tests/unit/test_dashboards.py). An availability-group pair in
the stack fails over mid-run (the stand-ins' schedule), so the role-change annotation has its event too."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from mssql_memory_exporter.collectors import (
    availability_groups,
    availability_recovery,
    memory_health,
    resource_monitor,
    tempdb_governance,
)

from alerts import names as names_
from alerts.shipped_collectors import shipped_files
from alerts.spec import duration_seconds, number
from alerts.spec import load as load_spec
from dashboards import capacity, frame, limits
from dashboards.queries import building
from tests.conftest import PASSWORD_ENV, TEST_PASSWORD
from tests.e2e_stack import (
    Prometheus,
    Stack,
    Timeline,
    http_get,
    probe_scrape_config,
    prometheus_config,
)
from tests.fake_smartctl import FakeSmartctl
from tests.lint.dashboards import (
    ALL_QUERIES,
    BOARDS,
    Q,
    long_window_figures,
    panels,
    queries,
    substitute,
    variable_promql,
)
from tests.standin.schedule import FaultSchedule, MomentSpec, run_together
from tests.unit.test_dashboards import (
    BUILTINS,
    DEADLINE,
    FOR,
    HOST_JOB,
    JOB,
    MB,
    PLACEHOLDERS,
    POOL,
    RANGE_SECONDS,
    ROOT,
    TEMPDB_VOLUME,
    WINDOW,
    needs_prometheus,
    restart_annotation,
    value_time_marks,
)

AG_PAIR = {"sqlag1": "ag-pair-a", "sqlag2": "ag-pair-b"}  # an availability group, failed over mid-run
# The availability_recovery and resource_monitor panels' cases (issue 37).
RECOVERY_CASES = {"agdr": "ag-dr-lagging", "agleft": "ag-replica-left", "notify": "memory-notifications-busy"}
ROLE_SERIES = availability_groups.REPLICA_IS_PRIMARY.name
DRIVE_POOL = "micron-7300"
DRIVE_FIXTURE = "nvme-null-Micron_7300_MTFDHBE960TDF-nvme0.json"
SATA_FIXTURE = "sat-Intel_730_and_DC_S35x0_3610_3700_Series_SSDs-INTEL_SSDSC2BB016T4-sdf.json"

# --- PromQL: executed against the scenarios ----------------------------------------------------------


def _generate_rules(out: Path) -> list[Path]:
    result = subprocess.run(
        [sys.executable, "-m", "alerts.generate", "--out", str(out), "--for", FOR, "--window", WINDOW],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return sorted(out.glob("*.rules.yml"))


def _physical_disk() -> str:
    """A disk the exporter's host collector reports on this machine, for the pool's host source."""
    sys.path.insert(0, str(ROOT / "exporter"))
    from mssql_memory_exporter.host.collector import HostCollector

    disks = sorted(HostCollector().written_bytes_by_disk())
    assert disks, "the host collector finds no physical disk here: the host panels cannot be exercised"
    return disks[0]


def _wait_until_up(stack: Stack, exporter: str, target: str) -> None:
    # The stand-in checks each new batch text with sqlfluff once (seconds of CPU); two good probes in a row
    # pay for both texts the exporter sends, so Prometheus' 1 s scrapes that follow are quick.
    def up() -> bool:
        status, body = http_get(f"{exporter}/probe?target={target}", timeout=15)
        return status == 200 and "\nmssql_up 1" in f"\n{body}"

    stack.wait_for(lambda: up() and up(), 30, f"mssql_up 1 from the exporter for {target}", interval=0.5)


def _max_server_memory_mb(standin: Any) -> int:
    rows = standin.instance.view_rows("sys.configurations")
    [row] = [r for r in rows if r["name"] == "max server memory (MB)"]
    return int(row["value_in_use"])


def _role_change(q: Q) -> bool:
    return q.kind == "annotation" and ROLE_SERIES in q.expr


def _scenarios(board: str, q: Q, everyone: str) -> list[str]:
    """The stand-in(s) whose scenario the query must show data in (each of them)."""
    if _role_change(q):
        return list(AG_PAIR)  # failed over during the test
    if "mssql_start_time_seconds" in q.expr and q.kind == "annotation":
        return ["numa"]  # restarted during the test
    if board == frame.FLEET_UID:
        return [everyone]
    if "tempdb_headroom_exhausted" in q.expr:
        return ["filling"]  # only a tempdb that fills up has a time until it is full
    if any(name in q.expr for name in SQL2025_ONLY):
        return ["sql2025"]  # tempdb space governance and ADR in tempdb are SQL Server 2025's
    if board == frame.ENDURANCE_UID:
        return ["micron"]
    if "hybrid_buffer_pool_eligible" in q.expr:
        return ["hbp"]
    # Availability groups by recovery objectives (dashboards/availability.py): each panel where its case
    # plays, the failover pair's secondary for a redo that moves, a DR replica nobody scrapes for the
    # primary's view of a lagging partner, a replica that left for a suspended copy.
    if availability_recovery.PARTNER_DATA_LOSS.name in q.expr:
        return ["agdr"]
    if availability_recovery.DATABASE_SUSPENDED.name in q.expr:
        return ["agleft"]
    if availability_groups.REDO_RATE.name in q.expr:
        return ["sqlag2"]
    if availability_recovery.DATABASE_SYNC_STATE.name in q.expr:
        return list(AG_PAIR)
    if resource_monitor.NOTIFICATIONS_TOTAL.name in q.expr:
        return ["notify"]  # LOW notifications broadcast while the test runs
    if SHIPPED_METRIC in q.expr:
        return ["shipped"]  # a failed job, a long run, old backups, blocking: every panel of the row has data
    if "ALERTS" in q.expr and q.kind == "annotation":
        return ["pressure"]
    return ["pressure", "numa"]


# The shipped collector files' series (dashboards/shipped.py), switched on for every target of the stack.
SHIPPED_METRIC = "mssql_custom_"
SHIPPED_FILES = sorted(set(shipped_files().values()))

# Series only a SQL Server 2025 target has: its workload groups' tempdb figures and tempdb's persistent
# version store (collectors/tempdb_governance.py), and the rule built on them.
SQL2025_ONLY = (
    *(spec.name for spec in tempdb_governance.COLLECTOR.metrics),
    *(spec.name for spec in memory_health.COLLECTOR.metrics),  # its view is SQL Server 2025's too
    names_.TEMPDB_GROUP_LIMIT_USED,
)


def _short_window_expr(expr: str) -> str:
    """The stack's rules have WINDOW-long rates (--window), so a rate rests on at most WINDOW of data:
    the dashboards' projection minimum (an hour) comes down to half the window, as alerts.generate
    lowers the alerts' minimum under --window."""
    minimum = number(load_spec().endurance.projection_min_coverage_seconds)
    short = number(duration_seconds(WINDOW) / 2)
    return expr.replace(f" >= {minimum}", f" >= {short}") if "_coverage_seconds" in expr else expr


def _run(prom: Prometheus, q: Q, values: dict[str, str], now: float) -> list[dict[str, Any]]:
    expr = _short_window_expr(substitute(q.expr, values))
    if q.kind == "variable":
        return prom.query(variable_promql(expr)[0], at=now)
    if q.kind == "instant":
        return prom.query(expr, at=now)
    return prom.query_range(expr, now - RANGE_SECONDS, now, 1)


def _value(result: list[dict[str, Any]], **labels: str) -> float:
    got = [r for r in result if all(r["metric"].get(k) == v for k, v in labels.items())]
    assert len(got) == 1, f"{labels}: {got}"
    return float(got[0]["value"][1])


def _judged_apart(q: Q) -> bool:
    """A panel whose queries split its series by verdict (dashboards/pools.py worn_apart): in a scenario
    one of them is empty by design, and the panel has data when any of them has."""
    overrides = (q.panel or {}).get("fieldConfig", {}).get("overrides", [])
    return any(o["matcher"]["id"] == "byFrameRefID" for o in overrides)


def _labels_no_table_groups_by(results: dict[tuple[str, str, str, str], list[dict[str, Any]]]) -> list[str]:
    """A table groups its rows by the label columns it names (grafana.merge_and_organize, so that an empty
    table says why): a label its queries return that it does not name would vanish from the table."""
    problems = []
    for (board_uid, where, ref, scenario), got in results.items():
        tables = [p for p in panels(BOARDS[board_uid]) if p.get("title") == where and p["type"] == "table"]
        if not tables:
            continue  # another panel, a variable or an annotation
        [panel] = tables
        [group_by] = [t["options"]["fields"] for t in panel["transformations"] if t["id"] == "groupBy"]
        keys = {name for name, how in group_by.items() if how["operation"] == "groupby"}
        for series in got:
            dropped = set(series["metric"]) - keys - {"__name__"}
            if dropped:
                problems.append(f"{where} / {ref} [{scenario}]: labels {sorted(dropped)} are no row key")
    return sorted(set(problems))


def _target(board: str, title: str, ref: str = "A") -> Q:
    found = [q for q in ALL_QUERIES if q.board == board and q.where == title and q.ref == ref]
    assert len(found) == 1, f"no panel {title!r} / {ref} in {board}"
    return found[0]


@needs_prometheus
def test_every_query_returns_data_in_its_scenario(standin, tmp_path):
    timeline = Timeline()
    spec = load_spec()
    with Stack(tmp_path / "stack") as stack:
        stack.reports["timeline"] = lambda: str(timeline)
        rule_files = _generate_rules(tmp_path / "rules")
        started = time.monotonic()
        standins = {
            "pressure": standin("memory-pressure", manual_clock=False),
            "numa": standin("numa-4-nodes", manual_clock=False),
            "micron": standin("micron-960gb-8stream", manual_clock=False),
            "hbp": standin("hbp-dax", manual_clock=False),
            "filling": standin("tempdb-filling", manual_clock=False),
            "sql2025": standin("sql2025", manual_clock=False),
            "shipped": standin("shipped-collectors-failing", manual_clock=False),
            **{name: standin(scenario, manual_clock=False) for name, scenario in RECOVERY_CASES.items()},
            **{name: standin(scenario, manual_clock=False) for name, scenario in AG_PAIR.items()},
        }
        timeline.mark("stand-ins started")
        pool = {
            "drives": {"count": 4, "tbw_per_drive_tb": 7000},  # Micron's four 7450 PRO 3.84 TB
            "planned_lifetime_years": 5,
            "in_service_date": "2025-01-01",
            "volumes": [TEMPDB_VOLUME],
            "host_disks": [_physical_disk()],
        }
        # A Micron 7300 PRO 960 GB at 10% of its life after 1,297,577,305 data units, read through the fake
        # smartctl, in a pool of its own: the drive panels and the drives' projection have data.
        smartctl = FakeSmartctl(tmp_path / "smartctl")
        smartctl.replay("nvme0n1", DRIVE_FIXTURE)
        # And an Intel SATA SSD on the same host, in no pool: NVMe reports no flash writes, this one does.
        smartctl.replay("sdf", SATA_FIXTURE)
        drive_pool = {
            "drives": {"count": 1, "tbw_per_drive_tb": 1400},
            "planned_lifetime_years": 5,
            "in_service_date": "2025-01-01",
            "smart_drives": ["nvme0n1"],
        }
        targets = {
            "pressure": standins["pressure"].target_yaml(),
            "numa": standins["numa"].target_yaml(),
            "micron": standins["micron"].target_yaml(
                colocated=True,
                volume_map={TEMPDB_VOLUME: TEMPDB_VOLUME},
                ssd_pools={POOL: pool, DRIVE_POOL: drive_pool},
            ),
            "hbp": standins["hbp"].target_yaml(
                pmem_volumes=["/mnt/pmem0"], volume_map={"/mnt/pmem0": "/mnt/pmem0"}
            ),
            "filling": standins["filling"].target_yaml(),
            "sql2025": standins["sql2025"].target_yaml(),
            "shipped": standins["shipped"].target_yaml(),
            **{name: standins[name].target_yaml() for name in RECOVERY_CASES},
            **{name: standins[name].target_yaml() for name in AG_PAIR},
        }
        exporter = stack.start_exporter(
            {
                "auth_modules": {"standin": {"username": "exporter", "password_env": PASSWORD_ENV}},
                "targets": targets,
                "collector_files": SHIPPED_FILES,
                # As in the demo: the exporter's own /metrics carries micron's series too, under the
                # exporter's job, which no dashboard query may count as another instance.
                "default_target": "micron",
                "drive_health": {
                    "smartctl": str(smartctl.path),
                    "timeout_seconds": 5,
                    "drives": [{"name": "nvme0n1"}, {"name": "sdf"}],
                },
            },
            env={PASSWORD_ENV: TEST_PASSWORD},
            args=("--collector.host",),
        )
        for name in standins:
            _wait_until_up(stack, exporter, name)
        timeline.mark("exporter answers mssql_up 1 for every target")
        address = exporter.removeprefix("http://")
        host_job = {
            "job_name": HOST_JOB,
            "scrape_interval": "1s",
            "scrape_timeout": "1s",
            "static_configs": [{"targets": [address]}],
        }
        prom = stack.start_prometheus(
            prometheus_config([probe_scrape_config(JOB, address, list(standins)), host_job], rule_files)
        )
        stack.reports["prometheus rule errors"] = lambda: "\n".join(prom.rule_health()) or "(none)"
        timeline.mark("prometheus ready")

        def left() -> float:
            return max(1.0, started + DEADLINE - time.monotonic())

        # A restart for the restart annotations: numa's start time must move by more than the exporter's
        # 5 s tolerance, and Prometheus must have seen the old one.
        stack.wait_for(
            lambda: prom.query(f'mssql_up{{job="{JOB}",instance="numa"}} == 1') or None, 20, "numa up"
        )
        time.sleep(max(0.0, started + 10 - time.monotonic()) + 1)
        standins["numa"].instance.restart()
        restarted_at = time.time()
        timeline.mark("numa restarted")
        # A DBA raising micron's max server memory, for the memory-change marks beside tempdb's writes.
        old_mb, new_mb = _max_server_memory_mb(standins["micron"]), 262144
        standins["micron"].instance.configure("max server memory (MB)", new_mb)
        timeline.mark("micron's max server memory raised")
        # The AG pair fails over (the stand-ins' schedule) once Prometheus has seen each replica's role.
        pair = " or ".join(f'{ROLE_SERIES}{{instance="{name}"}}' for name in AG_PAIR)
        stack.wait_for(lambda: len(prom.query(pair)) == len(AG_PAIR) or None, left(), "both replicas' roles")
        stop = run_together(
            [
                FaultSchedule(standins[n].handler, [], [], moments=[MomentSpec("failover", 0.0)])
                for n in AG_PAIR
            ]
        )
        try:
            stack.wait_for(
                lambda: all(
                    standins[n].instance.moments["failover"] <= standins[n].clock.now() for n in AG_PAIR
                ),
                left(),
                "the AG pair to fail over",
            )
        finally:
            stop.set()
        timeline.mark("the AG pair failed over")

        for what, expr in (
            ("the restart", f'changes(mssql_start_time_seconds{{instance="numa"}}[{RANGE_SECONDS}s]) > 0'),
            (
                "the max server memory change marked",
                'instance:mssql_memory_sizing_change_bytes:delta5m{instance="micron",memory="max_server_memory"}',
            ),
            (
                "MSSQLSSDEnduranceExhaustionProjected firing for micron",
                'ALERTS{alertname="MSSQLSSDEnduranceExhaustionProjected",alertstate="firing",instance="micron"}',
            ),
            (
                "the failover marked on both replicas",
                f'count(changes({ROLE_SERIES}{{instance=~"sqlag1|sqlag2"}}[{RANGE_SECONDS}s]) > 0) == 2',
            ),
            (
                "MSSQLMemoryPressure firing for pressure",
                'ALERTS{alertname="MSSQLMemoryPressure",alertstate="firing",instance="pressure"}',
            ),
        ):
            stack.wait_for(lambda e=expr: prom.query(e) or None, left(), what, interval=0.5)
            timeline.mark(f"seen: {what}")

        # Subqueries step on whole seconds: let the alerts fire across a few of them before the queries run.
        time.sleep(3)
        now = time.time()
        everyone = "(" + "|".join(standins) + ")"
        failures: list[str] = []
        results: dict[tuple[str, str, str, str], list[dict[str, Any]]] = {}
        apart: dict[tuple[str, str, str], list[str]] = {}  # (board, panel, scenario): its empty queries
        for board_uid, board in BOARDS.items():
            for q in queries(board):
                for scenario in _scenarios(board_uid, q, everyone):
                    values = {"job": JOB, "instance": scenario, "pool": ".+", "host": address, **BUILTINS}
                    try:
                        got = _run(prom, q, values, now)
                    except AssertionError as err:
                        failures.append(f"{q} [{scenario}]: {err}")
                        continue
                    results[(board_uid, q.where, q.ref, scenario)] = got
                    if _judged_apart(q):
                        apart.setdefault((board_uid, q.where, scenario), []).extend([] if got else [q.ref])
                    elif not got:
                        shown = substitute(q.expr, values)
                        failures.append(f"{q} [{scenario}]: no series (Grafana: No data)\n    {shown}")
        for (board_uid, where, scenario), empty in apart.items():
            shown = [ref for (b, w, ref, s) in results if (b, w, s) == (board_uid, where, scenario)]
            if sorted(empty) == sorted(shown):
                failures.append(f"{board_uid} / {where} [{scenario}]: no query has data (Grafana: No data)")
        timeline.mark(f"{len(results)} queries run")
        failures += _labels_no_table_groups_by(results)
        if failures:
            raise stack.fail(f"{len(failures)} dashboard queries failed:\n" + "\n".join(failures))

        # Data that is there is also the right data: a few figures checked against the scenarios.
        m, e, f = frame.MEMORY_UID, frame.ENDURANCE_UID, frame.FLEET_UID
        ple_panel = "Page life expectancy per NUMA node vs its floor"
        nodes = prom.query(
            substitute(_target(m, ple_panel, "B").expr, {**PLACEHOLDERS, "instance": "numa"}), at=now
        )
        ple = spec.memory.page_life_expectancy
        floors = {r["metric"]["node"]: float(r["value"][1]) for r in nodes}
        assert set(floors) == {"0", "1", "2", "3"}, floors
        assert floors["3"] == ple.floor_seconds  # 60,000 pages: under one step, so Dell's floor
        step = ple.page_bytes / ple.buffer_pool_bytes_per_step * ple.seconds_per_buffer_pool_bytes
        assert floors["0"] == pytest.approx(2040000 * step)

        table = "Endurance per pool, in the shape of Micron's Table 4"
        micron = {"job": JOB, "instance": "micron", "pool": ".+", "host": address, **BUILTINS}
        row = {"pool": POOL, "source": "sqlserver"}

        def cell(ref: str) -> float:
            expr = _short_window_expr(substitute(_target(e, table, ref).expr, micron))
            return _value(prom.query(expr, at=now), **row)

        # Micron's 960 GB, 8-stream row: 235.8 MB/s for 5 years of 365.25 days against 28 PB is 1.329.
        assert cell("A") == pytest.approx(235.8 * MB, rel=0.1)
        assert cell("C") == pytest.approx(235.8 * MB * 5 * 365.25 * 86400, rel=0.1)
        assert cell("D") == 4 * 7000 * 10**12
        assert cell("E") == pytest.approx(1.329, rel=0.1)
        host_rows = prom.query(_short_window_expr(substitute(_target(e, table, "E").expr, micron)), at=now)
        sources = {(r["metric"]["pool"], r["metric"]["source"]) for r in host_rows}
        assert sources == {(POOL, "sqlserver"), (POOL, "host"), (DRIVE_POOL, "drive")}, sources

        # Issue 26 on the live stack: micron's pool wears out before its planned retirement (133% of its
        # rating), so its time left comes from the query judged as wearing out in service (never green;
        # tests/unit/test_dashboard_verdicts.py colours it), not from the one for pools retired first.
        for title in ("Time until a rating is used up", "Highest projected share"):
            assert results[(e, title, "A", "micron")] and not results[(e, title, "B", "micron")], title

        # The host variable offers the exporter with --collector.host, and NO_HOST only where there is none
        # (offered always, it sorted first and the host panel opened empty).
        hosts = results[(e, "host", "variable", "micron")]
        assert sorted(r["metric"]["instance"] for r in hosts) == [address]

        # The restart annotation: one mark at the start before the restart, one at the restart.
        [series] = results[(m, restart_annotation()["name"], "annotation", "numa")]
        points = [(float(at), float(value)) for at, value in series["values"]]
        marks = value_time_marks(points, 1000)
        assert len(marks) == 2 and marks[0][1] < marks[1][0], marks
        assert marks[1][0] == pytest.approx(restarted_at * 1000, abs=6000), (marks, restarted_at)

        # The role-change annotation: one mark per replica since the failover, each saying what the replica
        # is now (Grafana draws no mark for a 0, so every value is 1), on every board that carries it.
        for q in (q for q in ALL_QUERIES if _role_change(q)):
            for name, role in (("sqlag1", "a secondary"), ("sqlag2", "the primary")):
                [series] = results[(q.board, q.where, q.ref, name)]
                said = {(series["metric"].get("now"), v) for _, v in series["values"]}
                assert said == {(role, "1")}, (q, name, series["metric"], series["values"][:3])

        # The memory-change annotation: micron's max server memory, by the bytes it moved, while the change
        # was within the rate window; nothing else of micron's memory moved.
        with building(spec):
            memory_changes = capacity.memory_change_annotation(limits.Limits.from_spec(spec))["name"]
        [change] = results[(e, memory_changes, "annotation", "micron")]
        assert change["metric"]["memory"] == "max_server_memory"
        assert {float(v) for _, v in change["values"]} == {(new_mb - old_mb) * 2.0**20}

        # The drive pool: 1,297,577,305 units x 512,000 B = 664.36 TB written at 10% used imply 6,643.6 TB,
        # 4.745 times the 1,400 TB rating.
        drive_pool = f'{{pool="{DRIVE_POOL}"}}'
        implied = prom.query(f"pool:mssql_ssd_drive_implied_endurance_bytes:sum{drive_pool}", at=now)
        assert _value(implied, instance="micron") == pytest.approx(1_297_577_305 * 512_000 / 0.10)
        ratio = prom.query(f"pool:mssql_ssd_drive_implied_to_rated_endurance:ratio{drive_pool}", at=now)
        assert _value(ratio, instance="micron") == pytest.approx(1_297_577_305 * 512_000 / 0.10 / 1400e12)

        # tempdb-filling: about 34.6 GB of room (4 x 4,000 MB files holding 470 MB each at the start, 20 GB
        # of volume), the version store taking 4 MB/s: full some 8,600 s after the stand-in started.
        filling = {**PLACEHOLDERS, "instance": "filling"}
        full_in = [
            series
            for ref in "AB"  # the same figure, judged by the headroom beside it: one of them has it
            for series in prom.query(substitute(_target(e, "tempdb full in", ref).expr, filling))
        ]
        assert 7000 < _value(full_in, instance="filling") < 9000, full_in

        fleet = {"job": JOB, "instance": everyone, **BUILTINS}
        worst = prom.query(substitute(_target(f, "Instances", "C").expr, fleet), at=now)
        assert {r["metric"]["instance"] for r in worst} == set(standins), "one row per instance"
        # The variables' "All" (.+) on every column of the fleet table: still the SQL Server targets
        # only, never the exporter's address from its own job.
        every_job = {**fleet, "job": ".+", "instance": ".+"}
        for q in (q for q in ALL_QUERIES if q.board == f and q.where == "Instances"):
            rows = prom.query(_short_window_expr(substitute(q.expr, every_job)), at=now)
            assert {r["metric"].get("instance") for r in rows} <= set(standins), (q.ref, rows[:3])
        minutes = prom.query(substitute(_target(f, "Instances", "E").expr, fleet), at=now)
        assert _value(minutes, instance="pressure") > 0 and _value(minutes, instance="hbp") == 0

        # One coverage rule (issue 26): this Prometheus is minutes old, under the hour of data a day's or a
        # week's average needs. Run with the real minimum, every panel that shows a long-window figure is
        # empty, a graph or a table cell as much as the stat that says "Shown after 1 hour of data" (the
        # per-volume graph drew the 1d average from the first minutes, the fleet table showed it).
        shown_young = []
        for q in (q for q in ALL_QUERIES if long_window_figures(q.expr)):
            for scenario in _scenarios(q.board, q, everyone):
                values = {"job": JOB, "instance": scenario, "pool": ".+", "host": address, **BUILTINS}
                expr = substitute(q.expr, values)  # not _short_window_expr: the dashboards' own minimum
                if q.kind == "instant":
                    got = prom.query(expr, at=now)
                else:
                    got = prom.query_range(expr, now - RANGE_SECONDS, now, 1)
                if got:
                    shown_young.append(f"{q} [{scenario}]: {len(got)} series")
        assert shown_young == [], "long-window figures on a young Prometheus:\n" + "\n".join(shown_young)

        errors = prom.rule_health()
        if errors:
            raise stack.fail("rules failed to evaluate:\n" + "\n".join(errors))
        timeline.mark("done")
        print(f"\ntimeline:\n{timeline}")
