"""Alerting end to end: stand-in SQL Servers -> exporter -> Prometheus (generated rules) -> Alertmanager
(the shipped routing and inhibition) -> a webhook. Run once under Debian's Prometheus 2.42 and once under
3.13.3, the release compose pins (built by scripts/prometheus3.sh).

Four targets are scraped by one real Prometheus through the exporter's /probe, relabeled as in
production (docs/configuration.md):
  pressure  plays memory-pressure: healthy for 20 s, then PLE far under its floor with stalls and lazy
            writes over their limits; MSSQLMemoryPressure must reach the pager webhook.
  healthy   plays healthy-oltp over the same time; nothing of it may reach the webhook.
  external  plays external-pressure: healthy for 20 s, then the OS signals low memory and takes memory
            back; MSSQLMemoryExternalPressure must reach the ticket webhook, and MSSQLMemoryPressure of
            `pressure` must say its pressure comes from inside SQL Server.
  filling   plays tempdb-filling: a version store growing by 4 MB/s in a tempdb with some 35 GB of room;
            at that trend tempdb is full in about 2.4 hours, within the 4-hour horizon:
            MSSQLTempdbProjectedFull must reach the ticket webhook (healthy-oltp's flat tempdb must not).
  doomed    plays healthy-oltp and its stand-in is stopped once Prometheus has seen it up;
            MSSQLTargetDown must reach the pager webhook, and (when the shipped config inhibits on it)
            a pressure alert of the same target must be held back.
The rules are generated from alerts/thresholds.yml with short `for:` and rate windows, so the thresholds
and expressions under test are the shipped ones; only the durations are shortened.

A second run plays an availability-group pair, both replicas short of memory (ag-pair-a and -b with the
pressure added, the targets sqlag1 and sqlag2), failed over mid-run by the stand-in's schedule once the
first pages are in: MSSQLMemoryPressure pages for the primary only (the secondary's copy is a ticket warning,
availability_groups.secondary_warns_only), moves to the new primary, no alert pages twice, and the
dashboards' role-change annotation marks the failover.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from alerts.spec import duration_seconds
from alerts.spec import load as load_spec
from tests import tools
from tests.alertmanager_matchers import inhibits
from tests.conftest import PASSWORD_ENV, TEST_PASSWORD
from tests.e2e_stack import (
    Alertmanager,
    Notification,
    Prometheus,
    Stack,
    Timeline,
    WebhookReceiver,
    alertmanager_config_for_test,
    http_get,
    probe_scrape_config,
    prometheus_config,
)
from tests.lint.dashboards import ALL_QUERIES, substitute
from tests.standin.scenario import Scenario
from tests.standin.schedule import FaultSchedule, MomentSpec, run_together
from tests.timeouts import PATIENT_SECONDS

ROOT = Path(__file__).resolve().parents[2]
SHIPPED_ALERTMANAGER = ROOT / "alerts" / "alertmanager.yml"

JOB = "mssql"  # the rules' selector job="mssql", as the production job name
FOR = "5s"  # every `for:` of the generated rules
WINDOW = "20s"  # every rate window: 20 scrapes at 1 s, so one slow scrape barely moves a rate
PRESSURE_STARTS_AT = 20.0  # scenario second at which memory-pressure.yml turns bad
# Budgets, from the moment the stand-ins start. Pressure should reach the webhook about 20 s (scenario)
# + ~9 s (the 20 s lazy-write rate crossing 20/s) + 5 s (for) + 1-2 s (evaluation, group_wait) = ~36 s.
PRESSURE_DEADLINE = 75.0
TARGET_DOWN_DEADLINE = 30.0  # after the doomed stand-in stops: ~1 s scrape + 5 s for + delivery
NOT_DELIVERED_GRACE = 4.0  # > group_wait + group_interval (1 s each): time for a wrong delivery to show
# The failover run. Before: each replica's first notification ~10 s after Prometheus starts (two scrapes
# for a rate, 5 s for, delivery). After: the new primary's page ~7 s after the failover, the old one's
# warning ~11 s (its page keeps firing 5 s, keep_firing_for, then its warning's own 5 s for). Generous:
# these waits only ever end early.
PAIR = {"sqlag1": "ag-pair-a", "sqlag2": "ag-pair-b"}  # target (= replica) -> scenario it extends
# What both replicas add to their scenario: short of memory the whole time, as the replicas of a readable
# pair under the same reporting load are. PLE 140 s, far under the floor of base.yml's 1,800,000 pages;
# free list stalls 6/s and lazy writes 45/s, over their limits. Whether that pages is the role's alone.
SHORT_OF_MEMORY = {
    "Buffer Manager": {
        "Page life expectancy": 140,
        "Free list stalls/sec": {"rate": 6},
        "Lazy writes/sec": {"rate": 45},
    },
    "Buffer Node": {"Page life expectancy": 140},
}
FAILOVER_WAIT = 90.0
MOVE_FAILOVER = MomentSpec("failover", 1.0)  # the scenarios' moment, brought forward to 1 s from now


@pytest.fixture(autouse=True)
def _alertmanager_installed() -> None:
    tools.check(tools.ALERTMANAGER)


def humanize_duration(seconds: float) -> str:
    """Prometheus' `humanizeDuration` template function (template/template.go) for values >= 1 s."""
    whole = int(seconds)
    days, hours, minutes, secs = whole // 86400, whole // 3600 % 24, whole // 60 % 60, whole % 60
    if days:
        return f"{days}d {hours}h {minutes}m {secs}s"
    if hours:
        return f"{hours}h {minutes}m {secs}s"
    if minutes:
        return f"{minutes}m {secs}s"
    return f"{seconds:.4g}s"


def expected_pressure_figures() -> tuple[str, str]:
    """(PLE, floor) as the description must quote them, from the scenario and the thresholds spec."""
    spec = load_spec()
    nodes = Scenario.load("memory-pressure").counters["Buffer Node"]
    late = PRESSURE_STARTS_AT + 60  # well inside the pressure phase
    ple = nodes["Page life expectancy"].at(late, since=0)
    pages = nodes["Database pages"].at(late, since=0)
    ple_spec = spec.memory.page_life_expectancy
    floor = max(
        pages
        * ple_spec.page_bytes
        / ple_spec.buffer_pool_bytes_per_step
        * ple_spec.seconds_per_buffer_pool_bytes,
        ple_spec.floor_seconds,
    )
    return humanize_duration(ple), humanize_duration(floor)


# --- the test ---------------------------------------------------------------------------------------


def _generate_rules(out: Path) -> list[Path]:
    # The CLI the issue names, so the test exercises exactly what operators' CI would run.
    result = subprocess.run(
        [sys.executable, "-m", "alerts.generate", "--out", str(out), "--for", FOR, "--window", WINDOW],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    files = sorted(out.glob("*.rules.yml"))
    assert files, f"alerts.generate wrote nothing to {out}: {result.stdout}"
    return files


def _wait_until_up_through_exporter(stack: Stack, exporter: str, target: str) -> None:
    # The stand-in checks each new batch text with sqlfluff (up to seconds of CPU, then cached). The
    # exporter sends two texts: the first scrape's, with the slow-cadence sections, and the ordinary
    # one after it. Probing without Prometheus' 0.5 s budget until two in a row say up pays for both,
    # so the 1 s scrapes that follow take milliseconds.
    def up() -> bool:
        status, body = http_get(f"{exporter}/probe?target={target}", timeout=15)
        return status == 200 and "\nmssql_up 1" in f"\n{body}"

    stack.wait_for(lambda: up() and up(), 30, f"mssql_up 1 from the exporter for {target}", interval=0.5)


def _firing(receiver: WebhookReceiver, alertname: str, instance: str) -> Notification | None:
    got = receiver.find("firing", alertname=alertname, instance=instance)
    return got[0] if got else None


def _check_pressure_notification(stack: Stack, got: Notification, seen_after: float) -> None:
    spec = load_spec()
    ple, floor = expected_pressure_figures()
    problems = []
    if got.labels.get("severity") != "critical":
        problems.append(f"severity {got.labels.get('severity')!r}, expected critical")
    if not got.labels.get("node"):
        problems.append("no node label")
    if got.labels.get("job") != JOB:
        problems.append(f"job {got.labels.get('job')!r}, expected {JOB}")
    if got.receiver != "pager":
        problems.append(f"routed to {got.receiver!r} ({got.path}); critical must go to pager")
    description = got.annotations.get("description", "")
    stalls = f"{spec.memory.free_list_stalls_per_second.max:g}/s"
    lazy = f"{spec.memory.lazy_writes_per_second.max:g}/s"
    for figure in (ple, floor, stalls, lazy):
        if figure not in description:
            problems.append(f"description does not quote {figure!r}: {description!r}")
    if got.annotations.get("runbook_url") != spec.runbook("MSSQLMemoryPressure"):
        problems.append(f"runbook_url {got.annotations.get('runbook_url')!r}")
    if "comes from inside SQL Server" not in description:
        problems.append(f"description does not say the pressure is internal: {description!r}")
    if seen_after < PRESSURE_STARTS_AT:
        problems.append(f"fired {seen_after:.1f} s after start, before the scenario's pressure began")
    if problems:
        raise stack.fail(
            "MSSQLMemoryPressure notification is wrong:\n  " + "\n  ".join(problems) + f"\n{got}"
        )


def _check_external_notification(stack: Stack, got: Notification, seen_after: float) -> None:
    """external-pressure's scenario: available memory 256 MiB from second 20, the low-memory signal, the
    process low flag and the committed target under committed: 3 of 3 signals."""
    spec = load_spec()
    description = got.annotations.get("description", "")
    problems = []
    if got.labels.get("severity") != "warning" or got.receiver != "ticket":
        severity = got.labels.get("severity")
        problems.append(f"severity {severity!r} to {got.receiver!r}: expected warning, ticket")
    for figure in ("3 of 3 signals", "Available physical memory: 256MiB"):
        if figure not in description:
            problems.append(f"description does not quote {figure!r}: {description!r}")
    if got.annotations.get("runbook_url") != spec.runbook("MSSQLMemoryExternalPressure"):
        problems.append(f"runbook_url {got.annotations.get('runbook_url')!r}")
    if seen_after < PRESSURE_STARTS_AT:
        problems.append(f"fired {seen_after:.1f} s after start, before the scenario's pressure began")
    if problems:
        raise stack.fail(
            "MSSQLMemoryExternalPressure notification is wrong:\n  " + "\n  ".join(problems) + f"\n{got}"
        )


def _check_inhibition(
    stack: Stack,
    am: Alertmanager,
    receiver: WebhookReceiver,
    shipped: dict[str, Any],
    pressure: Notification,
    down: Notification,
) -> bool:
    """A pressure alert of the down target is held back by MSSQLTargetDown, if the shipped config says so.

    Once a target is down its PLE series is gone, so Prometheus cannot raise a pressure alert for it any
    more; post one with the real alert's labels to Alertmanager, as Prometheus would have (e.g. a
    pressure alert still firing when the target goes down). Returns whether the check applied."""
    labels = {**pressure.labels, "instance": down.labels["instance"]}
    if not inhibits(shipped, down.labels, labels):
        return False
    am.post_alert(labels, pressure.annotations)

    def suppressed() -> dict[str, Any] | None:
        for alert in am.alerts('alertname="MSSQLMemoryPressure"', f'instance="{labels["instance"]}"'):
            status = alert.get("status", {})
            if status.get("state") == "suppressed" and status.get("inhibitedBy"):
                return alert
        return None

    stack.wait_for(suppressed, 10, "Alertmanager to report the down target's pressure alert as inhibited")
    time.sleep(NOT_DELIVERED_GRACE)
    leaked = _firing(receiver, "MSSQLMemoryPressure", labels["instance"])
    if leaked is not None:
        raise stack.fail(f"inhibited alert reached the webhook anyway: {leaked}")
    return True


def _check_healthy_stayed_quiet(stack: Stack, prom: Prometheus, receiver: WebhookReceiver, span: str) -> None:
    """healthy-oltp, scraped over the same time as the pressure target, raised nothing."""
    # "Nothing fired" proves something only if its series were there: scraped up nearly every second,
    # and the churn rates the pressure rule reads were computed for it too.
    sel = f'job="{JOB}",instance="healthy"'
    lazy_rate = f"instance:mssql_lazy_writes:rate{load_spec().rate_window}"
    scrapes = prom.query(f"count_over_time(mssql_up{{{sel}}}[{span}])")
    ups = prom.query(f"sum_over_time(mssql_up{{{sel}}}[{span}])")
    rates = prom.query(f"count_over_time({lazy_rate}{{{sel}}}[{span}])")
    total = float(scrapes[0]["value"][1]) if scrapes else 0.0
    if total < 10 or float(ups[0]["value"][1]) < 0.9 * total or not rates:
        raise stack.fail(f"healthy was not scraped as up throughout: {scrapes} {ups}; {lazy_rate}: {rates}")
    # The PLE rules compare a node with its floor only once the instance has been up longer than the floor
    # (a restarted buffer pool is empty): below that, "silent" would not have tested them at all.
    uptime = prom.query(f"instance:mssql_uptime:seconds{{{sel}}}")
    floor = prom.query(f"max by (job, instance) (node:mssql_page_life_expectancy_floor:seconds{{{sel}}})")
    if not uptime or not floor or float(uptime[0]["value"][1]) <= float(floor[0]["value"][1]):
        raise stack.fail(f"healthy is still in the PLE warm-up (uptime {uptime}, node floor {floor})")
    # Not even pending in Prometheus. MSSQLTargetDown is left out of that check: one scrape slower than
    # the exporter's 0.5 s budget (a loaded CI machine) makes it pending for a second, which says nothing
    # about the rules; five in a row would reach the webhook, and that is checked below.
    pending = prom.query(
        f"count by (alertname, alertstate)"
        f' (last_over_time(ALERTS{{instance="healthy",alertname!="MSSQLTargetDown"}}[{span}]))'
    )
    leaked = receiver.find(instance="healthy")
    if pending or leaked:
        raise stack.fail(
            f"healthy-oltp raised alerts: prometheus {pending}, webhook {[str(n) for n in leaked]}"
        )


@pytest.mark.parametrize("prometheus", tools.prometheus_versions(), ids=str)
def test_memory_pressure_and_target_down_reach_the_webhook(standin, tmp_path, prometheus):
    """Under Debian's Prometheus 2.42 and under 3.13.3, the release compose pins."""
    tools.check_binary(prometheus)
    if not SHIPPED_ALERTMANAGER.exists():
        pytest.fail(f"{SHIPPED_ALERTMANAGER.relative_to(ROOT)} is missing: the shipped routing is under test")
    shipped = yaml.safe_load(SHIPPED_ALERTMANAGER.read_text())  # its inhibit rules decide one check
    timeline = Timeline()
    with Stack(tmp_path / "stack") as stack:
        stack.reports["timeline"] = lambda: str(timeline)
        rule_files = _generate_rules(tmp_path / "rules")
        receiver = stack.start_receiver()
        am = stack.start_alertmanager(alertmanager_config_for_test(SHIPPED_ALERTMANAGER, receiver.url))
        timeline.mark("alertmanager ready")

        # Real clocks: the scenario's second 20 is 20 s after this line.
        scenario_start = time.monotonic()
        standins = {
            "pressure": standin("memory-pressure", manual_clock=False),
            "healthy": standin("healthy-oltp", manual_clock=False),
            "external": standin("external-pressure", manual_clock=False),
            "filling": standin("tempdb-filling", manual_clock=False),
            "doomed": standin("healthy-oltp", manual_clock=False),
        }
        timeline.mark("stand-ins started (scenario time 0)")
        exporter = stack.start_exporter(
            {
                "auth_modules": {"standin": {"username": "exporter", "password_env": PASSWORD_ENV}},
                "targets": {name: s.target_yaml() for name, s in standins.items()},
            },
            env={PASSWORD_ENV: TEST_PASSWORD},
        )
        for name in standins:
            _wait_until_up_through_exporter(stack, exporter, name)
        timeline.mark("exporter answers mssql_up 1 for every target")

        prom: Prometheus = stack.start_prometheus(
            prometheus_config(
                [probe_scrape_config(JOB, exporter.removeprefix("http://"), list(standins))],
                rule_files,
                alertmanager_address=am.url.removeprefix("http://"),
            ),
            binary=prometheus.path,
        )
        # The server that answers is the release this run is named after, not whichever was on PATH.
        answered = prom.version()
        assert tools.matches(prometheus.version, answered), f"Prometheus {answered} answers, not {prometheus}"
        stack.reports["prometheus alerts"] = lambda: json.dumps(prom.alerts(), indent=1)[:4000]
        stack.reports["prometheus rule errors"] = lambda: "\n".join(prom.rule_health()) or "(none)"
        timeline.mark("prometheus ready")

        # The doomed target goes down only after the real pipeline has seen it up.
        stack.wait_for(
            lambda: prom.query(f'mssql_up{{job="{JOB}",instance="doomed"}} == 1') or None,
            20,
            "Prometheus to scrape doomed as up",
        )
        standins["doomed"].server.stop()
        stopped_at = time.monotonic()
        timeline.mark("doomed stand-in stopped", stopped_at)

        down = stack.wait_for(
            lambda: _firing(receiver, "MSSQLTargetDown", "doomed"),
            TARGET_DOWN_DEADLINE,
            "firing MSSQLTargetDown for doomed at the webhook",
        )
        timeline.mark("MSSQLTargetDown(doomed) at the webhook", down.received_at)
        if (
            down.received_at < stopped_at + duration_seconds(FOR)  # it must have waited its `for:`
            or down.labels.get("severity") != "critical"
            or down.receiver != "pager"
        ):
            raise stack.fail(
                f"MSSQLTargetDown should be critical, go to pager, {FOR} after the stop: {down}, "
                f"{down.received_at - stopped_at:.1f} s after the stop"
            )

        def firing_before_deadline(alertname: str, instance: str) -> Notification:
            got = stack.wait_for(
                lambda: _firing(receiver, alertname, instance),
                max(1.0, scenario_start + PRESSURE_DEADLINE - time.monotonic()),
                f"firing {alertname} for {instance} at the webhook",
                interval=0.5,
            )
            timeline.mark(f"{alertname}({instance}) at the webhook", got.received_at)
            return got

        pressure = firing_before_deadline("MSSQLMemoryPressure", "pressure")
        _check_pressure_notification(stack, pressure, pressure.received_at - scenario_start)

        external = firing_before_deadline("MSSQLMemoryExternalPressure", "external")
        _check_external_notification(stack, external, external.received_at - scenario_start)
        leaked = _firing(receiver, "MSSQLMemoryExternalPressure", "pressure")
        if leaked is not None:
            raise stack.fail(f"memory-pressure is internal pressure, yet reported external: {leaked}")

        filling = firing_before_deadline("MSSQLTempdbProjectedFull", "filling")
        if filling.labels.get("severity") != "warning" or filling.receiver != "ticket":
            raise stack.fail(f"MSSQLTempdbProjectedFull should be a ticket warning: {filling}")

        inhibition_checked = _check_inhibition(stack, am, receiver, shipped, pressure, down)
        timeline.mark(f"inhibition {'checked' if inhibition_checked else 'not in the shipped config'}")

        _check_healthy_stayed_quiet(stack, prom, receiver, f"{int(time.monotonic() - scenario_start) + 1}s")

        errors = prom.rule_health()
        if errors:
            raise stack.fail("rules failed to evaluate:\n" + "\n".join(errors))
        timeline.mark("done")
        slowest = prom.query(f'max by (instance) (max_over_time(scrape_duration_seconds{{job="{JOB}"}}[5m]))')
        print(f"\ntimeline:\n{timeline}\n{pressure}\n  {pressure.annotations}\n{down}")
        print("slowest scrape:", {r["metric"]["instance"]: r["value"][1] for r in slowest})


# --- an availability group failing over ---------------------------------------------------------------


def _short_of_memory(tmp_path: Path, scenario: str) -> str:
    """A scenario file extending `scenario` with SHORT_OF_MEMORY (a test's variant, not a shipped one)."""
    path = tmp_path / f"{scenario}-short-of-memory.yml"
    path.write_text(yaml.safe_dump({"extends": scenario, "counters": SHORT_OF_MEMORY}, sort_keys=False))
    return str(path)


def _memory_notices(receiver: WebhookReceiver, instance: str) -> dict[str, Notification | None]:
    """The first firing MSSQLMemoryPressure of `instance` at each webhook: the page and the ticket."""
    got = receiver.find("firing", alertname="MSSQLMemoryPressure", instance=instance)
    return {route: next((n for n in got if n.receiver == route), None) for route in ("pager", "ticket")}


def _paged_and_warned(receiver: WebhookReceiver, primary: str, secondary: str) -> str | None:
    """ "ready" once the primary paged and the secondary's copy reached the ticket queue; "wrong" at once
    when the secondary paged (the role join missing: nothing later can undo a page)."""
    if _memory_notices(receiver, secondary)["pager"] is not None:
        return "wrong"
    ready = _memory_notices(receiver, primary)["pager"] and _memory_notices(receiver, secondary)["ticket"]
    return "ready" if ready else None


def _fail_over(stack: Stack, pair: dict[str, Any], timeline: Timeline) -> tuple[float, float]:
    """The pair fails over through the stand-ins' schedule (moment `failover`, 1 s from now on one clock
    for both); returns, once both have, when the first did, as (monotonic, wall) time: the instances'
    own record, not when this thread noticed."""
    stop = run_together([FaultSchedule(s.handler, [], [], moments=[MOVE_FAILOVER]) for s in pair.values()])
    stack.reports["stand-in moments"] = lambda: str({n: s.instance.moments for n, s in pair.items()})
    try:
        stack.wait_for(
            lambda: all(s.instance.moments["failover"] <= s.clock.now() for s in pair.values()),
            PATIENT_SECONDS,
            "both replicas to fail over on the schedule",
        )
    finally:
        stop.set()
    wall = min(s.clock.wall_origin + s.instance.moments["failover"] for s in pair.values())
    monotonic = time.monotonic() - (time.time() - wall)
    timeline.mark("failed over (stand-in schedule)", monotonic)
    return monotonic, wall


def _check_failover_marks(stack: Stack, prom: Prometheus, start: float, failed_over: float) -> None:
    """The dashboards' role-change annotation (every board that has it) marks the failover on both
    replicas, each saying what it is now in its `now` label (Grafana draws no mark for a sample of 0, so
    every mark's value is 1), and nothing before it."""
    exprs = {
        q.expr for q in ALL_QUERIES if q.kind == "annotation" and "mssql_ag_replica_is_primary" in q.expr
    }
    assert exprs, "no dashboard carries the availability-group role annotation"
    for expr in exprs:
        values = {"job": JOB, "instance": "sqlag1|sqlag2"}
        series = prom.query_range(substitute(expr, values), start, time.time(), 1)
        seen: dict[str, list] = {}
        for r in series:
            seen.setdefault(r["metric"]["instance"], []).extend(
                (t, f"{r['metric'].get('now')}={v}") for t, v in r["values"]
            )
        problems = []
        for instance, role in (("sqlag1", "a secondary=1"), ("sqlag2", "the primary=1")):
            points = sorted(seen.get(instance, []))
            if not points:
                problems.append(f"{instance}: no mark")
            # A scrape is stamped when it starts: one that began just before the failover may carry it.
            elif {v for _, v in points} != {role} or min(float(t) for t, _ in points) < failed_over - 2:
                problems.append(f"{instance}: marks {points[:3]}..., expected {role} after {failed_over:.0f}")
        if problems:
            raise stack.fail("failover annotation: " + "; ".join(problems) + f"\n{expr}")


@pytest.mark.parametrize("prometheus", tools.newest_prometheus(), ids=str)
def test_the_memory_page_follows_the_primary_over_a_failover(standin, tmp_path, prometheus):
    """Under both releases. Fails if the rules lose their role join: the secondary then pages too."""
    tools.check_binary(prometheus)
    timeline = Timeline()
    with Stack(tmp_path / "stack") as stack:
        stack.reports["timeline"] = lambda: str(timeline)
        rule_files = _generate_rules(tmp_path / "rules")
        receiver = stack.start_receiver()
        am = stack.start_alertmanager(alertmanager_config_for_test(SHIPPED_ALERTMANAGER, receiver.url))
        pair = {
            name: standin(_short_of_memory(tmp_path, scenario), manual_clock=False)
            for name, scenario in PAIR.items()
        }
        exporter = stack.start_exporter(
            {
                "auth_modules": {"standin": {"username": "exporter", "password_env": PASSWORD_ENV}},
                "targets": {name: s.target_yaml() for name, s in pair.items()},
            },
            env={PASSWORD_ENV: TEST_PASSWORD},
        )
        for name in pair:
            _wait_until_up_through_exporter(stack, exporter, name)
        start = time.time()
        prom: Prometheus = stack.start_prometheus(
            prometheus_config(
                [probe_scrape_config(JOB, exporter.removeprefix("http://"), list(pair))],
                rule_files,
                alertmanager_address=am.url.removeprefix("http://"),
            ),
            binary=prometheus.path,
        )
        stack.reports["prometheus alerts"] = lambda: json.dumps(prom.alerts(), indent=1)[:4000]
        timeline.mark("prometheus ready")

        # Before: sqlag1 is the primary.
        verdict = stack.wait_for(
            lambda: _paged_and_warned(receiver, "sqlag1", "sqlag2"),
            FAILOVER_WAIT,
            "sqlag1 paged, sqlag2 warned",
        )
        if verdict == "wrong":
            raise stack.fail("sqlag2 paged while a secondary: the rules do not join the alert to the role")
        timeline.mark("sqlag1 paged, sqlag2 warned")

        failed_over, failed_over_wall = _fail_over(stack, pair, timeline)

        # After: sqlag2 is the primary; sqlag1's page resolves and its copy becomes a ticket warning.
        def moved() -> bool:
            old, new = _memory_notices(receiver, "sqlag1"), _memory_notices(receiver, "sqlag2")
            resolved = receiver.find("resolved", alertname="MSSQLMemoryPressure", instance="sqlag1")
            return bool(new["pager"] and old["ticket"] and [n for n in resolved if n.receiver == "pager"])

        stack.wait_for(moved, FAILOVER_WAIT, "sqlag2 paged, sqlag1's page resolved and its copy warned")
        timeline.mark("the page followed the primary")
        _check_failover_marks(stack, prom, start, failed_over_wall)
        time.sleep(NOT_DELIVERED_GRACE)  # time for a second page, or a late wrong one, to arrive

        # MSSQLTargetDown is left out: on a loaded machine a run of slow scrapes can page and resolve it
        # more than once, which says nothing about the failover (the other test checks it on its own).
        pages = [
            n
            for n in receiver.notifications()
            if (n.status, n.receiver) == ("firing", "pager") and n.labels["alertname"] != "MSSQLTargetDown"
        ]
        twice = [
            labels
            for labels, count in Counter(frozenset(n.labels.items()) for n in pages).items()
            if count > 1
        ]
        problems = [f"paged {dict(labels)} more than once" for labels in twice]
        old, new = _memory_notices(receiver, "sqlag1"), _memory_notices(receiver, "sqlag2")
        if not old["pager"] or old["pager"].received_at > failed_over:
            problems.append(f"sqlag1 must page before the failover: {old['pager']}")
        if not new["pager"] or new["pager"].received_at < failed_over:
            problems.append(f"sqlag2 must page only after the failover: {new['pager']}")
        for name, notice, when in (("sqlag2", new, "before"), ("sqlag1", old, "after")):
            ticket = notice["ticket"]
            if (
                ticket is None
                or ticket.labels.get("ag_role") != "secondary"
                or ((ticket.received_at > failed_over) != (when == "after"))
            ):
                problems.append(f"{name} must warn as the secondary {when} the failover: {ticket}")
        if problems:
            raise stack.fail("the page did not follow the primary:\n  " + "\n  ".join(problems))
        errors = prom.rule_health()
        if errors:
            raise stack.fail("rules failed to evaluate:\n" + "\n".join(errors))
        timeline.mark("done")
        print(f"\ntimeline:\n{timeline}\n" + receiver.summary())
