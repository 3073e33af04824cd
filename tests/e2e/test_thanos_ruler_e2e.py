"""The fleet group on the real engine: Thanos Ruler evaluates alerts/rules/thanos-ruler/ through Thanos
Query over two shards (Prometheus + sidecar each, one exporter replica each, two stand-in targets each,
split with hashmod as docs/scaling.md says). The recorded fleet series equal the figures worked out by
hand from the stand-ins' scenarios; then one shard's sidecar stops, and the ruler records nothing rather
than a lower total (partial_response_strategy: abort), says so on its rules API, and records the full
figures again once the shard is back. Shard 0's Prometheus scrapes the ruler, as compose's long-term
profile does: the watch on the ruler (alerts/thanos_ruler.py, MSSQLFleetRulesFailing) reads the real
ruler's counters there, true while the shard is stopped and false again after it is back.

Every program is the real one (Thanos 0.42.4 from scripts/thanos.sh, Prometheus under both releases the
tests run), on 127.0.0.1 only, stopped by the Stack when the test ends.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from alerts import evaluators, fleet, group_names, thanos_ruler
from alerts import names as N
from alerts.spec import load as load_spec
from tests import tools
from tests.conftest import PASSWORD_ENV, TEST_PASSWORD
from tests.e2e.test_thanos_e2e import SHARDS, live_targets, shard_scrape_config, thanos_api
from tests.e2e_stack import ROOT, Stack, free_port, http_get

# The ruler's evaluation interval here; the shipped group's is the spec's fleet.interval (1m).
EVAL_SECONDS = 2
DATA_VOLUME = "/var/opt/mssql/data"  # where the stand-ins' scenarios put every database file
FLEET_TEMPDB = "fleet:mssql_tempdb_written_bytes:rate5m"
# MSSQLFleetRulesFailing's condition over three of the ruler's evaluations instead of the spec's 10m.
WATCH_WINDOW = f"{3 * EVAL_SECONDS}s"

# Worked out by hand from the scenarios. Every stand-in's tempdb writes 0.7 MB/s: healthy-oltp's two data
# files at 0.25 MB/s and its log at 0.2 MB/s; memory-pressure keeps the default tempdb, a 0.5 MB/s data
# file and the same 0.2 MB/s log (tests/standin/scenario.py; MB = 10^6 bytes). Four instances: 2.8 MB/s.
TEMPDB_PER_INSTANCE = 250_000 + 250_000 + 200_000
# Two pools on the data volume, which every database file of the scenarios is on: writing at least
# 0.7 MB/s for 5 years (157,788,000 s) is over 1.1 x 10^14 bytes, 110 times a rating of one 1 TB drive
# and a thousandth of a rating of one 100,000 TB drive. One pool over its rating, the same one over its
# budget, the other under both.
POOL_RATINGS_TB = (1, 100_000)


def pool(tbw_tb: float) -> dict[str, Any]:
    return {
        "drives": {"count": 1, "tbw_per_drive_tb": tbw_tb},
        "planned_lifetime_years": 5,
        "in_service_date": "2025-01-01",
        "volumes": [DATA_VOLUME],
    }


def fleet_rules(rules_dir: Path) -> tuple[list[Path], Path]:
    """The shards' rule files with short windows (as the other end-to-end tests use them: the fleet group
    reads their names, which keep the spec's windows) and Thanos Ruler's file with the group's interval
    shortened to EVAL_SECONDS; everything else as `make generate` writes it."""
    subprocess.run(
        [sys.executable, "-m", "alerts.generate", "--out", str(rules_dir), "--window", "30s", "--for", "10s"],
        cwd=ROOT, check=True, capture_output=True, timeout=120,
    )
    ruler_file = rules_dir / evaluators.RULER_DIR / fleet.FILE_NAME
    data = yaml.safe_load(ruler_file.read_text())
    for group in data["groups"]:
        assert group["partial_response_strategy"] == "abort"
        group["interval"] = f"{EVAL_SECONDS}s"
    ruler_file.write_text(yaml.safe_dump(data, sort_keys=False))
    return sorted(rules_dir.glob("*.rules.yml")), ruler_file


def instant(query: str, expr: str) -> list[dict[str, Any]]:
    data, _ = thanos_api(query, "/api/v1/query", {"query": expr})
    return data["result"]


def by_shard(query: str, record: str) -> dict[str, float]:
    return {r["metric"].get("shard", ""): float(r["value"][1]) for r in instant(query, record)}


def fleet_figures(query: str) -> dict[str, Any]:
    """Every record of the fleet group as Thanos Query answers it now."""
    figures: dict[str, Any] = {
        record: by_shard(query, record)
        for record in (N.SHARD_TARGETS, N.SHARD_TARGETS_UP, N.SHARD_TARGETS_DOWN)
    }
    for record in (FLEET_TEMPDB, N.FLEET_POOLS, N.FLEET_POOLS_OVER_RATING, N.FLEET_POOLS_OVER_BUDGET,
                   N.FLEET_MEMORY_PRESSURE):
        result = instant(query, record)
        figures[record] = float(result[0]["value"][1]) if len(result) == 1 else result
    return figures


def expected_figures(pressured: int) -> dict[str, Any]:
    both = {str(shard): 2.0 for shard in range(SHARDS)}
    return {
        N.SHARD_TARGETS: both,
        N.SHARD_TARGETS_UP: both,
        N.SHARD_TARGETS_DOWN: {str(shard): 0.0 for shard in range(SHARDS)},
        FLEET_TEMPDB: 4.0 * TEMPDB_PER_INSTANCE,
        N.FLEET_POOLS: 2.0,
        N.FLEET_POOLS_OVER_RATING: 1.0,
        N.FLEET_POOLS_OVER_BUDGET: 1.0,
        N.FLEET_MEMORY_PRESSURE: float(pressured),
    }


def matches(figures: dict[str, Any], expected: dict[str, Any]) -> bool:
    for record, value in expected.items():
        got = figures[record]
        if record == FLEET_TEMPDB:
            # A linear counter's rate is its slope whatever the scrape times: within 1% for the stand-in's
            # clock and the scrape jitter.
            if not isinstance(got, float) or abs(got - value) > 0.01 * value:
                return False
        elif got != value:
            return False
    return True


def ruler_rules(ruler: str) -> list[dict[str, Any]]:
    status, body = http_get(f"{ruler}/api/v1/rules", timeout=30)
    assert status == 200, body[:500]
    return [rule for group in json.loads(body)["data"]["groups"] for rule in group["rules"]]


def samples_since(query: str, record: str, since: float) -> list[tuple[float, float]]:
    """(time, value) of every sample the ruler recorded for `record` after `since`."""
    span = max(1, int(time.time() - since) + 1)
    found: list[tuple[float, float]] = []
    for series in instant(query, f"{record}[{span}s]"):
        found += [(float(t), float(v)) for t, v in series["values"] if float(t) > since]
    return sorted(found)


@pytest.mark.parametrize("prometheus", tools.newest_prometheus(), ids=str)
def test_thanos_ruler_records_fleet_totals_and_never_a_partial_one(prometheus, standin, tmp_path: Path):
    tools.check_binary(prometheus)
    tools.check_thanos()
    thanos = tools.THANOS.path
    shard_rules, ruler_file = fleet_rules(tmp_path / "rules")
    targets = live_targets()  # two per shard: [shard 0, shard 0, shard 1, shard 1]
    scenarios = dict(zip(targets, ("healthy-oltp", "healthy-oltp", "memory-pressure", "healthy-oltp"),
                         strict=True))
    pools = {targets[0]: pool(POOL_RATINGS_TB[0]), targets[3]: pool(POOL_RATINGS_TB[1])}
    spec = load_spec()
    watch = thanos_ruler.failing_expr(spec, WATCH_WINDOW)
    ruler_job = spec.fleet.ruler_selector.split('"')[1]

    with Stack(tmp_path / "stack") as stack:
        stand_ins = {name: standin(scenario, manual_clock=False) for name, scenario in scenarios.items()}
        target_config = {
            name: s.target_yaml(
                volume_map={DATA_VOLUME: DATA_VOLUME},
                **({"ssd_pools": {"tempdb": pools[name]}} if name in pools else {}),
            )
            for name, s in stand_ins.items()
        }
        exporter_config = {
            "auth_modules": {"standin": {"username": "exporter", "password_env": PASSWORD_ENV}},
            "targets": target_config,
        }
        exporters = [
            stack.start_exporter(exporter_config, env={PASSWORD_ENV: TEST_PASSWORD}, name=f"exporter-{i}")
            for i in range(SHARDS)
        ]
        bucket = tmp_path / "bucket"
        objstore = stack.write("bucket.yml", f"type: FILESYSTEM\nconfig:\n  directory: {bucket}\n")
        endpoints: list[str] = []
        sidecars: dict[int, list[str]] = {}
        ruler_grpc, ruler_http = free_port(), free_port()
        shard_urls: list[str] = []
        for shard in range(SHARDS):
            port = free_port()
            shard_urls.append(f"http://127.0.0.1:{port}")
            scrape = [shard_scrape_config(shard, [e.removeprefix("http://") for e in exporters], targets)]
            if shard == 0:  # the one that watches the ruler
                scrape.append({"job_name": ruler_job,
                               "static_configs": [{"targets": [f"127.0.0.1:{ruler_http}"]}]})
            config = stack.write(f"prometheus-{shard}.yml", {
                "global": {"scrape_interval": "1s", "evaluation_interval": "1s",
                           "external_labels": {"shard": str(shard)}},
                "rule_files": [str(p) for p in shard_rules],
                "scrape_configs": scrape,
            })
            data = tmp_path / f"prometheus-{shard}-data"
            stack.start_process(f"prometheus-{shard}", [
                prometheus.path, f"--config.file={config}", f"--storage.tsdb.path={data}",
                "--storage.tsdb.min-block-duration=2h", "--storage.tsdb.max-block-duration=2h",
                f"--web.listen-address=127.0.0.1:{port}"], f"http://127.0.0.1:{port}/-/ready", timeout=60)
            grpc, http = free_port(), free_port()
            sidecars[shard] = [
                thanos, "sidecar", f"--tsdb.path={data}", f"--prometheus.url=http://127.0.0.1:{port}",
                f"--objstore.config-file={objstore}", f"--grpc-address=127.0.0.1:{grpc}",
                f"--http-address=127.0.0.1:{http}"]
            stack.start_process(f"sidecar-{shard}", sidecars[shard], f"http://127.0.0.1:{http}/-/ready",
                                timeout=60)
            endpoints.append(f"127.0.0.1:{grpc}")
        # The ruler's own StoreAPI is one of Query's strict endpoints, as in compose: Query serves what the
        # ruler recorded (its blocks reach the bucket only every two hours).
        endpoints.append(f"127.0.0.1:{ruler_grpc}")
        sd = stack.write("endpoints.yml", {"endpoints": [{"address": a, "strict": True} for a in endpoints]})
        query_port = free_port()
        query = f"http://127.0.0.1:{query_port}"
        # Partial responses on by default, as compose's Query runs: the ruler's abort must still win.
        stack.start_process("query", [
            thanos, "query", f"--http-address=127.0.0.1:{query_port}",
            f"--grpc-address=127.0.0.1:{free_port()}", f"--endpoint.sd-config-file={sd}",
            "--query.partial-response"],
            f"{query}/-/ready", timeout=60)
        ruler = f"http://127.0.0.1:{ruler_http}"
        stack.start_process("ruler", [
            thanos, "rule", f"--data-dir={tmp_path / 'ruler-data'}", f"--rule-file={ruler_file}",
            f"--query=127.0.0.1:{query_port}", f"--eval-interval={EVAL_SECONDS}s", '--label=ruler="fleet"',
            f"--grpc-address=127.0.0.1:{ruler_grpc}", f"--http-address=127.0.0.1:{ruler_http}"],
            f"{ruler}/-/ready", timeout=60)

        # Hand-worked figures, recorded by the ruler and read back through Query. memory-pressure's buffer
        # pool churns from its 20th second while SQL Server has the memory it asked for: one instance
        # under (internal) pressure.
        last: dict[str, Any] = {}
        expected = expected_figures(pressured=1)

        def fleet_as_worked_out() -> bool:
            last.update(fleet_figures(query))
            return matches(last, expected)

        stack.reports["fleet figures (last read, then expected)"] = lambda: f"{last}\n{expected}"
        stack.wait_for(fleet_as_worked_out, 180, "the fleet figures worked out by hand", interval=1)
        assert all(rule["health"] == "ok" for rule in ruler_rules(ruler)), ruler_rules(ruler)

        def watch_result() -> list[dict[str, Any]]:
            return instant(shard_urls[0], watch)

        stack.wait_for(lambda: watch_result() == [], 30, "no failing fleet evaluations on the watch")

        # One shard's sidecar stops: Query can no longer reach its series, and tells the ruler so.
        stopped = stack.process("sidecar-1")
        stopped.stop()
        stack.processes.remove(stopped)  # stopped on purpose: wait_for must not count it as dead
        stopped_at = time.time()

        def failing_rules() -> list[dict[str, Any]] | None:
            rules = ruler_rules(ruler)
            after = [r for r in rules if r.get("lastEvaluation", "") and r["health"] == "err"]
            return rules if len(after) == len(rules) else None

        failed = stack.wait_for(failing_rules, 60, "every fleet rule failing its evaluation", interval=1)
        # The rules API says only that no Query gave an answer; the ruler's log has Query's error, which
        # names the store that did not answer (docs/scaling.md).
        assert all("no query API server reachable" in rule["lastError"] for rule in failed), failed
        stopped_store = endpoints[1]  # shard 1's sidecar
        stack.wait_for(lambda: stopped_store in stack.process("ruler").log.read_text(errors="replace"), 30,
                       f"the ruler's log naming {stopped_store}")
        time.sleep(3 * EVAL_SECONDS)  # three more evaluations, each of them failing
        # The watch, on shard 0's Prometheus from the ruler's own counters: every evaluation failing.
        firing = stack.wait_for(lambda: watch_result() or None, 30, "the watch seeing the fleet group fail")
        assert [r["metric"]["rule_group"].rsplit(";", 1)[1] for r in firing] == [group_names.FLEET]
        assert [r["metric"]["job"] for r in firing] == [ruler_job]
        assert float(firing[0]["value"][1]) > spec.fleet.failing_share, firing
        # Not one sample after the stop, where `warn` would have recorded the sums of shard 0 alone (one
        # evaluation that began before the stop may still land just after it, with the full figures).
        for record in (FLEET_TEMPDB, N.SHARD_TARGETS, N.FLEET_POOLS):
            late = [(t, v) for t, v in samples_since(query, record, stopped_at + EVAL_SECONDS)]
            assert late == [], f"{record} recorded {late} with shard 1 missing"
        # What the fleet series holds meanwhile is the last full total, until the lookback drops it.
        _, latest = samples_since(query, FLEET_TEMPDB, stopped_at - 5 * EVAL_SECONDS)[-1]
        full = expected[FLEET_TEMPDB]
        assert abs(latest - full) <= 0.01 * full, (latest, full)

        # The shard comes back: the next evaluations record the full figures again.
        ready = sidecars[1][-1].replace("--http-address=", "http://") + "/-/ready"
        stack.start_process("sidecar-1-again", sidecars[1], ready, timeout=60)
        back = time.time()
        stack.wait_for(lambda: samples_since(query, FLEET_TEMPDB, back), 90, "new fleet samples", interval=1)
        stack.wait_for(fleet_as_worked_out, 60, "the full fleet figures again", interval=1)
        # A group's rules are evaluated one after another: the last may still show the previous error.
        stack.wait_for(lambda: all(r["health"] == "ok" for r in ruler_rules(ruler)), 30, "healthy rules")
        # Once the window holds no failed evaluation, the watch is false again.
        stack.wait_for(lambda: watch_result() == [], 30, "the watch quiet again")
