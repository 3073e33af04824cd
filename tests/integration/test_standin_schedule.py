"""Faults on a timetable for the stand-in run on its own (tests/standin/schedule.py, `--fault`)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest

from tests.conftest import PASSWORD_ENV, TEST_PASSWORD, make_config, scrape, value
from tests.standin.handler import ScenarioHandler
from tests.standin.scenario import Clock, Instance, Scenario
from tests.standin.schedule import FaultSchedule, MomentSpec, Window, parse_deny, parse_fault, parse_moment
from tests.timeouts import PATIENT_SECONDS

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_specs_parse_with_and_without_windows():
    assert parse_fault("garbage").window == Window(0.0)
    assert parse_fault("hang_batch@60-90").window == Window(60.0, 90.0)
    deny = parse_deny("sys.dm_os_sys_info:229@30")
    assert (deny.view, deny.error, deny.window) == ("sys.dm_os_sys_info", 229, Window(30.0))
    assert parse_deny("sys.databases").error == 300


@pytest.mark.parametrize(
    ("spec", "problem"),
    [("hang", "unknown fault"), ("hang_batch@9-3", "ends"), ("hang_batch@x", "expected")],
)
def test_bad_fault_specs_say_what_is_wrong(spec, problem):
    with pytest.raises(ValueError, match=problem):
        parse_fault(spec)


@pytest.mark.parametrize("spec", ["sys.databases:18456", "databases", "sys.databases:abc"])
def test_bad_deny_specs_are_refused(spec):
    with pytest.raises(ValueError):
        parse_deny(spec)


def test_the_schedule_switches_faults_denials_and_restarts_with_time():
    instance = Instance(Scenario.load("healthy-oltp"), Clock(manual=True))
    handler = ScenarioHandler(instance, strict=False)
    schedule = FaultSchedule(
        handler,
        [parse_fault("hang_batch@10-20"), parse_fault("hang_batch@30-40")],
        [parse_deny("sys.dm_os_sys_info:229@5-15")],
        restart_every=25,
    )
    seen = []
    for t in (0, 5, 10, 15, 20, 25, 30, 40):
        schedule.apply(t)
        seen.append((t, handler.faults.hang_batch, dict(instance.denied), schedule.restarts))
    assert seen == [
        (0, False, {}, 0),
        (5, False, {"sys.dm_os_sys_info": 229}, 0),
        (10, True, {"sys.dm_os_sys_info": 229}, 0),
        (15, True, {}, 0),
        (20, False, {}, 0),
        (25, False, {}, 1),
        (30, True, {}, 1),
        (40, False, {}, 1),
    ]


def _local_role(instance: Instance) -> object:
    [row] = [r for r in instance.view_rows("sys.dm_hadr_availability_replica_states") if r["is_local"] == 1]
    return row["role"]


def test_a_scheduled_failover_swaps_the_roles_when_the_schedule_says_and_stays_swapped():
    """ag-pair-a fails over at t=300 by its file; `--moment failover@10` brings that forward, and a
    moment, once reached, is not undone (a schedule applied again, or later, leaves it where it is)."""
    clock = Clock(manual=True)
    instance = Instance(Scenario.load("ag-pair-a"), clock)
    schedule = FaultSchedule(
        ScenarioHandler(instance, strict=False), [], [], moments=[parse_moment("failover@10")]
    )
    seen = []
    for t in (0, 5, 10, 15, 400):
        clock.advance(t - clock.now())
        schedule.apply(t)
        seen.append((t, _local_role(instance)))
    assert seen == [(0, 1), (5, 1), (10, 2), (15, 2), (400, 2)]
    assert instance.moments["failover"] == 10
    # Unscheduled, the file's own time holds: primary until 300 s.
    late = Instance(Scenario.load("ag-pair-a"), Clock(manual=True))
    late.clock.advance(299)
    assert _local_role(late) == 1
    late.clock.advance(1)
    assert _local_role(late) == 2


def test_a_moment_the_scenario_lacks_is_refused_by_name():
    handler = ScenarioHandler(Instance(Scenario.load("healthy-oltp"), Clock(manual=True)), strict=False)
    with pytest.raises(ValueError, match="'failover': the scenario has no such moment"):
        FaultSchedule(handler, [], [], moments=[MomentSpec("failover", 10)])
    with pytest.raises(KeyError, match="no moment 'failover'"):
        handler.instance.reach("failover")


@pytest.mark.parametrize("spec", ["failover", "failover@10-20", "@10"])
def test_bad_moment_specs_are_refused(spec):
    with pytest.raises(ValueError):
        parse_moment(spec)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_standalone_stand_in_refuses_logins_then_denies_a_section_on_schedule(scraper_for):
    port = _free_port()
    env = {**os.environ, "MSSQL_STANDIN_PASSWORD": TEST_PASSWORD, "PYTHONPATH": ROOT}
    cmd = [sys.executable, "-m", "tests.standin", "--port", str(port)]
    cmd += ["--fault", "bad_login@0-4", "--deny", "sys.dm_os_sys_info:229"]
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        os.environ[PASSWORD_ENV] = TEST_PASSWORD
        body = {"host": "127.0.0.1", "port": port, "driver": "freetds", "encryption": "off"}
        # A short login back-off: the refused logins of the first 4 s must not hold the target down
        # for the default 30 s once the schedule lets logins through.
        # Patient: this stand-in is a process of its own, so its first sqlfluff parse of the batch (over
        # 5 s on a loaded machine) was not paid ahead by conftest.standin_parses_the_batch.
        target = {**body, "auth_module": "standin", "query_timeout_seconds": PATIENT_SECONDS}
        target["login_backoff_seconds"] = 1
        config = make_config({"standin": {**target, "login_backoff_max_seconds": 2}})
        scraper = scraper_for(config)
        started = time.monotonic()
        states = []
        while time.monotonic() - started < 2 * PATIENT_SECONDS:
            got = scrape(scraper, config)
            states.append(value(got, "mssql_up"))
            if states[-1] == 1:
                break
            time.sleep(0.5)
        assert states[0] == 0 and states[-1] == 1, states
        assert value(got, "mssql_exporter_collector_success", collector="sys_info") == 0
        assert value(got, "mssql_exporter_collector_success", collector="buffer_manager") == 1
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=10)
    assert "fault scheduled: bad_login@0-4" in out, out
