"""The exporter as users run it: its own process, real HTTP, real driver, the stand-in behind it."""

from __future__ import annotations

import gzip
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from mssql_memory_exporter.web.requests import MAX_QUERY_FIELDS

from tests import tools
from tests.conftest import PASSWORD_ENV, TEST_PASSWORD, samples_of, value
from tests.e2e_stack import Stack, probe_scrape_config, prometheus_config
from tests.failure_checks import eventually


@pytest.fixture
def exporter(standin, tmp_path):
    """The exporter as its own process against two stand-ins; yields (base URL, stand-ins, Process)."""
    healthy = standin("healthy-oltp", manual_clock=False)
    pressure = standin("memory-pressure", manual_clock=False)
    config = {
        "default_target": "healthy",
        "auth_modules": {"standin": {"username": "exporter", "password_env": PASSWORD_ENV}},
        "targets": {"healthy": healthy.target_yaml(), "pressure": pressure.target_yaml()},
    }
    with Stack(tmp_path / "stack") as stack:
        base = stack.start_exporter(config, env={PASSWORD_ENV: TEST_PASSWORD}, args=("--log.level", "debug"))
        process = stack.process("exporter")
        yield base, (healthy, pressure), process
        process.popen.terminate()
        process.popen.wait(10)
        assert process.popen.returncode == 0, process.tail()


def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def test_probe_metrics_and_errors_over_http(exporter):
    base, (healthy, pressure), _process = exporter
    status, body = get(f"{base}/probe?target=pressure")
    assert status == 200
    got = samples_of(body)
    assert value(got, "mssql_up") == 1
    assert (
        value(
            got,
            "mssql_build_info",
            version="16.0.4135.4",
            product_level="RTM",
            update_level="CU15",
            edition="Standard Edition (64-bit)",
            engine_edition="2",
        )
        == 1
    )
    status, body = get(f"{base}/metrics")
    assert status == 200
    got = samples_of(body)
    assert value(got, "mssql_up") == 1  # the default target
    assert any(name.startswith("process_") for name, _ in got)
    # The round trips ran on reused workers, all idle again now; none is stuck.
    assert value(got, "mssql_exporter_scrape_workers", state="idle") >= 1
    def busy() -> float:
        return value(samples_of(get(f"{base}/metrics")[1]), "mssql_exporter_scrape_workers", state="busy")

    assert eventually(lambda: busy() == 0)
    status, body = get(f"{base}/probe?target=elsewhere.example.com")
    assert status == 400 and "elsewhere.example.com" in body
    assert len(healthy.server.sessions) == 1 and len(pressure.server.sessions) == 1


def test_query_parameter_limit_is_named(exporter):
    base, _, _process = exporter
    most = MAX_QUERY_FIELDS  # a target and one collect[] per collector fit
    status, body = get(f"{base}/probe?" + "&".join(["target=healthy"] * (most + 1)))
    assert status == 400 and body.strip() == f"too many query parameters (at most {most})", body
    # That many are read: the answer is about the repeated target, not the count.
    status, body = get(f"{base}/probe?" + "&".join(["target=healthy"] * most))
    assert status == 400 and f"given {most} times" in body, body
    status, body = get(f"{base}/metrics?" + "&".join(["a=1"] * (most + 1)))
    assert status == 400 and "too many query parameters" in body, body


def test_down_target_answers_in_time_with_up_zero(exporter):
    base, (healthy, _), _process = exporter
    healthy.handler.faults.hang_batch = True
    started = time.monotonic()
    status, body = get(f"{base}/probe?target=healthy", {"X-Prometheus-Scrape-Timeout-Seconds": "2"})
    elapsed = time.monotonic() - started
    assert status == 200
    assert value(samples_of(body), "mssql_up") == 0
    assert elapsed < 2.0, elapsed


def test_the_password_never_reaches_logs_or_responses(exporter):
    base, (healthy, _), process = exporter
    log = process.log
    healthy.handler.faults.bad_login = True
    bodies = [get(f"{base}/probe?target={t}")[1] for t in ("healthy", "pressure", "nope")]
    bodies.append(get(f"{base}/metrics")[1])
    time.sleep(0.2)
    everything = "\n".join(bodies) + log.read_text()
    assert "Login failed" in log.read_text() or "18456" in log.read_text()
    assert TEST_PASSWORD not in everything


def test_the_password_is_not_in_the_process_title(exporter):
    """ps, top and /proc show every user the command line: the password must arrive another way."""
    base, _, process = exporter
    assert get(f"{base}/probe?target=healthy")[0] == 200  # logged in, so the password was used
    proc = Path(f"/proc/{process.popen.pid}")
    # environ is the channel the config names (password_env); reading it proves this test can see the
    # value at all, so its absence from the command line means something.
    assert TEST_PASSWORD.encode() in (proc / "environ").read_bytes()
    for view in ("cmdline", "comm", "status"):
        assert TEST_PASSWORD.encode() not in (proc / view).read_bytes(), view


def test_metrics_with_host_collector_and_default_target_is_one_family_per_name(standin, tmp_path):
    import shutil
    import subprocess

    from prometheus_client.parser import text_string_to_metric_families

    healthy = standin("healthy-oltp", manual_clock=False)
    config = {
        "default_target": "healthy",
        "auth_modules": {"standin": {"username": "exporter", "password_env": PASSWORD_ENV}},
        "targets": {"healthy": healthy.target_yaml()},
    }
    with Stack(tmp_path / "stack") as stack:
        base = stack.start_exporter(config, env={PASSWORD_ENV: TEST_PASSWORD}, args=("--collector.host",))
        status, body = get(f"{base}/metrics")
    assert status == 200
    names = [family.name for family in text_string_to_metric_families(body)]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)
    got = samples_of(body)
    assert value(got, "mssql_exporter_collector_success", collector="host") == 1
    assert value(got, "mssql_exporter_collector_success", collector="buffer_manager") == 1
    assert value(got, "mssql_host_memory_total_bytes") > 0
    if shutil.which("promtool"):
        check = subprocess.run(
            ["promtool", "check", "metrics"], input=body, capture_output=True, text=True, timeout=30
        )
        assert "duplicate" not in (check.stdout + check.stderr).lower(), check.stdout + check.stderr


def _batches(standin) -> int:
    """Client requests after login the stand-in has seen, over every session (closed ones included)."""
    return sum(session.batches for session in standin.server.sessions)


def test_head_runs_no_batch_gets_come_gzipped_and_the_exporter_is_ready(exporter):
    base, (healthy, pressure), _process = exporter
    assert get(f"{base}/-/ready") == (200, "OK\n")
    before = (_batches(healthy), _batches(pressure))
    for path in ("/probe?target=pressure", "/metrics", "/probe?target=healthy"):
        request = urllib.request.Request(base + path, method="HEAD")
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.status == 200 and response.read() == b""
    time.sleep(0.5)  # a batch sent by mistake would have reached the stand-in by now
    assert (_batches(healthy), _batches(pressure)) == before
    request = urllib.request.Request(f"{base}/probe?target=pressure", headers={"Accept-Encoding": "gzip"})
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.headers["Content-Encoding"] == "gzip"
        raw = response.read()
        assert int(response.headers["Content-Length"]) == len(raw)
    body = gzip.decompress(raw).decode()
    assert value(samples_of(body), "mssql_up") == 1
    assert len(raw) * 4 < len(body.encode()), (len(raw), len(body.encode()))
    assert _batches(pressure) > before[1]


def test_prometheus_scrapes_the_gzipped_probe(standin, tmp_path):
    """A real Prometheus asks for gzip (Accept-Encoding: gzip): its scrape must come back whole."""
    tools.check(tools.PROMETHEUS)
    pressure = standin("memory-pressure", manual_clock=False)
    config = {
        "auth_modules": {"standin": {"username": "exporter", "password_env": PASSWORD_ENV}},
        "targets": {"pressure": pressure.target_yaml()},
    }
    with Stack(tmp_path / "stack") as stack:
        base = stack.start_exporter(config, env={PASSWORD_ENV: TEST_PASSWORD}, args=("--log.level", "debug"))
        address = base.removeprefix("http://")
        job = probe_scrape_config("mssql", address, ["pressure"])
        prom = stack.start_prometheus(prometheus_config([job], []))
        direct = samples_of(get(f"{base}/probe?target=pressure")[1])
        stack.wait_for(
            lambda: prom.query('scrape_samples_scraped{job="mssql"} > 0 and up{job="mssql"} == 1') or None,
            30,
            "a successful scrape",
        )
        scraped = prom.query('scrape_samples_scraped{job="mssql"}')
        # Every series of the probe (a few may come and go between two scrapes).
        assert int(float(scraped[0]["value"][1])) >= 0.9 * len(direct) > 100
        assert prom.query('mssql_up{job="mssql",instance="pressure"} == 1')
        log = stack.process("exporter").log.read_text()
    probes = [line for line in log.splitlines() if "path=/probe" in line and "status=200" in line]
    assert any("encoding=gzip" in line for line in probes), probes[-3:]
