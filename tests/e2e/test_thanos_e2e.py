"""A year of history through Thanos: two shards (Prometheus + sidecar), two exporters, four stand-in
targets split with hashmod; the backfilled year uploaded to a filesystem bucket, downsampled by the
compactor (raw kept 30 days, as shipped), served by the store gateway; the capacity report through Thanos
Query equals the figures worked out by hand; the fleet dashboard's queries run there without errors; a
stopped shard shows as a partial response in both.

Every program is the real one (Thanos 0.42.4 from scripts/thanos.sh, Prometheus under both releases the
tests run), on 127.0.0.1 only, stopped by the Stack when the test ends.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import time
import urllib.parse
from pathlib import Path
from typing import Any

import pytest

from tests import tools
from tests.capacity_backfill import backfill, expected_rows, report
from tests.capacity_history import fleet
from tests.conftest import PASSWORD_ENV, TEST_PASSWORD
from tests.e2e_stack import ROOT, Stack, free_port, http_get
from tests.integration.test_capacity_report import check_rows, year_end
from tests.lint.dashboards import BOARDS, queries, substitute, variable_promql
from tests.unit.test_dashboards import BUILTINS

SHARDS = 2
LIVE = ["live-a", "live-b", "live-c", "live-d", "live-e", "live-f", "live-g", "live-h"]
FLEET_BOARD = "mssql-fleet-capacity"


def hashmod(value: str, modulus: int) -> int:
    """Prometheus' hashmod: the last 8 bytes of the MD5 of the value, big-endian, modulo."""
    return int.from_bytes(hashlib.md5(value.encode()).digest()[8:], "big") % modulus


def live_targets() -> list[str]:
    """Four target names, two per shard, so both shards and both exporters have work."""
    chosen: list[str] = []
    for shard in range(SHARDS):
        chosen += [name for name in LIVE if hashmod(name, SHARDS) == shard][:2]
    assert len(chosen) == 4, "the candidate names do not split two and two"
    return chosen


def shard_scrape_config(shard: int, exporters: list[str], targets: list[str]) -> dict[str, Any]:
    """docs/scaling.md's job: every shard reads the full list, keeps its hash, and the same hash picks
    the exporter replica."""
    relabel: list[dict[str, Any]] = [
        {"source_labels": ["__address__"], "modulus": SHARDS, "target_label": "__tmp_shard",
         "action": "hashmod"},
        {"source_labels": ["__tmp_shard"], "regex": str(shard), "action": "keep"},
        {"source_labels": ["__address__"], "target_label": "__param_target"},
        {"source_labels": ["__param_target"], "target_label": "instance"},
    ]
    relabel += [
        {"source_labels": ["__tmp_shard"], "regex": str(i), "target_label": "__address__",
         "replacement": address}
        for i, address in enumerate(exporters)
    ]
    return {
        "job_name": "mssql", "scrape_interval": "1s", "scrape_timeout": "1s", "metrics_path": "/probe",
        "static_configs": [{"targets": targets}], "relabel_configs": relabel,
    }


def thanos_api(base: str, path: str, params: dict[str, str]) -> tuple[Any, list[str]]:
    """Data and warnings of a Thanos Query API call with partial responses allowed."""
    query = urllib.parse.urlencode({**params, "partial_response": "true"})
    status, body = http_get(f"{base}{path}?{query}", timeout=60)
    payload = json.loads(body)
    assert status == 200 and payload["status"] == "success", f"{path} {params}: HTTP {status}: {body[:800]}"
    return payload["data"], list(payload.get("warnings") or [])


def run_thanos(thanos: str, *args: str, timeout: float = 240) -> str:
    result = subprocess.run([thanos, *args], capture_output=True, text=True, timeout=timeout, check=False)
    output = f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    assert result.returncode == 0, f"thanos {args[0]} failed:\n{output}"
    return result.stdout + result.stderr


def bucket_blocks(bucket: Path) -> list[tuple[int, float]]:
    """(resolution in ms, end in unix seconds) of each block in the bucket not marked for deletion."""
    found = []
    for meta in bucket.glob("*/meta.json"):
        if (meta.parent / "deletion-mark.json").exists():
            continue
        data = json.loads(meta.read_text())
        found.append((data["thanos"]["downsample"]["resolution"], data["maxTime"] / 1000))
    return found


def fleet_queries() -> list[tuple[str, str, str]]:
    """(where, kind, PromQL) of every query of the fleet dashboard, variables filled in."""
    values = {"job": "mssql", "instance": ".+", "pool": ".+", "host": ".+", **BUILTINS}
    found = []
    for q in queries(BOARDS[FLEET_BOARD]):
        expr = substitute(q.expr, values)
        if q.kind == "variable":
            expr = variable_promql(expr)[0]
        found.append((str(q), q.kind, expr))
    return found


def dashboard_warnings(base: str, now: float) -> list[str]:
    """Run every fleet dashboard query as Grafana would; every one must succeed. Returns the warnings."""
    warnings: list[str] = []
    for where, kind, expr in fleet_queries():
        if kind in ("instant", "variable"):
            _, w = thanos_api(base, "/api/v1/query", {"query": expr, "time": f"{now:.3f}"})
        else:
            params = {"query": expr, "start": f"{now - 3600:.3f}", "end": f"{now:.3f}", "step": "60"}
            _, w = thanos_api(base, "/api/v1/query_range", params)
        warnings += [f"{where}: {text}" for text in w]
    return warnings


@pytest.mark.parametrize("prometheus", tools.prometheus_versions(), ids=str)
def test_year_through_thanos_with_shards(prometheus, standin, tmp_path: Path):
    tools.check_binary(prometheus)
    tools.check_thanos()
    thanos = tools.THANOS.path
    promtool = str(Path(prometheus.path).with_name("promtool")) if "/" in prometheus.path else "promtool"
    history = fleet(year_end())
    bucket = tmp_path / "bucket"
    bucket.mkdir()
    objstore = tmp_path / "bucket.yml"
    objstore.write_text(f"type: FILESYSTEM\nconfig:\n  directory: {bucket}\n")

    # The year, per shard, uploaded with the shard's external label as a sidecar would have.
    for shard in range(SHARDS):
        blocks = backfill(promtool, history, str(shard), tmp_path / f"blocks-{shard}")
        run_thanos(thanos, "tools", "bucket", "upload-blocks", f"--path={blocks}", f'--label=shard="{shard}"',
                   "--shipper.upload-compacted", f"--objstore.config-file={objstore}")
    # One compactor pass: downsample (raw -> 5 m -> 1 h) and apply the shipped retention, so everything
    # older than 30 days is left only as downsampled data. The blocks were made a moment ago: without
    # --consistency-delay=0s the compactor would leave them for 30 minutes (the default) as possibly
    # still being uploaded.
    run_thanos(thanos, "compact", f"--data-dir={tmp_path / 'compact'}", f"--objstore.config-file={objstore}",
               "--retention.resolution-raw=30d", "--retention.resolution-5m=365d",
               "--retention.resolution-1h=1825d", "--delete-delay=0s", "--consistency-delay=0s",
               "--http-address=127.0.0.1:0", timeout=300)
    blocks = bucket_blocks(bucket)
    assert sum(1 for res, _ in blocks if res == 3_600_000) >= 10, f"no 1 h blocks after compaction: {blocks}"
    old_raw = [end for res, end in blocks if res == 0 and end < time.time() - 30 * 86400]
    assert not old_raw, f"raw blocks older than the 30 days' retention kept: {blocks}"

    targets = live_targets()
    with Stack(tmp_path / "stack") as stack:
        stand_ins = {name: standin("healthy-oltp", manual_clock=False) for name in targets}
        exporter_config = {
            "auth_modules": {"standin": {"username": "exporter", "password_env": PASSWORD_ENV}},
            "targets": {name: s.target_yaml() for name, s in stand_ins.items()},
        }
        exporters = [
            stack.start_exporter(exporter_config, env={PASSWORD_ENV: TEST_PASSWORD}, name=f"exporter-{i}")
            for i in range(SHARDS)
        ]
        rule_files = sorted((ROOT / "alerts" / "rules").glob("*.rules.yml"))
        endpoints = []
        for shard in range(SHARDS):
            port = free_port()
            config = stack.write(f"prometheus-{shard}.yml", {
                "global": {"scrape_interval": "1s", "evaluation_interval": "5s",
                           "external_labels": {"shard": str(shard)}},
                "rule_files": [str(p) for p in rule_files],
                "scrape_configs": [shard_scrape_config(
                    shard, [e.removeprefix("http://") for e in exporters], targets)],
            })
            data = tmp_path / f"prometheus-{shard}-data"
            stack.start_process(f"prometheus-{shard}", [
                prometheus.path, f"--config.file={config}", f"--storage.tsdb.path={data}",
                "--storage.tsdb.min-block-duration=2h", "--storage.tsdb.max-block-duration=2h",
                f"--web.listen-address=127.0.0.1:{port}"], f"http://127.0.0.1:{port}/-/ready", timeout=60)
            grpc, http = free_port(), free_port()
            stack.start_process(f"sidecar-{shard}", [
                thanos, "sidecar", f"--tsdb.path={data}", f"--prometheus.url=http://127.0.0.1:{port}",
                f"--objstore.config-file={objstore}", f"--grpc-address=127.0.0.1:{grpc}",
                f"--http-address=127.0.0.1:{http}"], f"http://127.0.0.1:{http}/-/ready", timeout=60)
            endpoints.append(f"127.0.0.1:{grpc}")
        store_grpc, store_http = free_port(), free_port()
        stack.start_process("store", [
            thanos, "store", f"--data-dir={tmp_path / 'store'}", f"--objstore.config-file={objstore}",
            "--ignore-deletion-marks-delay=0s",  # the raw blocks retention just took are gone at once
            f"--grpc-address=127.0.0.1:{store_grpc}", f"--http-address=127.0.0.1:{store_http}"],
            f"http://127.0.0.1:{store_http}/-/ready", timeout=90)
        endpoints.append(f"127.0.0.1:{store_grpc}")
        sd = stack.write("endpoints.yml", {"endpoints": [{"address": a, "strict": True} for a in endpoints]})
        query_port = free_port()
        query = f"http://127.0.0.1:{query_port}"
        stack.start_process("query", [
            thanos, "query", f"--http-address=127.0.0.1:{query_port}",
            f"--grpc-address=127.0.0.1:{free_port()}", f"--endpoint.sd-config-file={sd}"],
            f"{query}/-/ready", timeout=60)

        # Both shards scrape their own two targets through their own exporter, seen in the global view.
        def shards_of_live() -> dict[str, str] | None:
            data, _ = thanos_api(query, "/api/v1/query", {"query": 'mssql_up{job="mssql"} == 1'})
            seen = {r["metric"]["instance"]: r["metric"]["shard"] for r in data["result"]}
            return seen if len(seen) == len(targets) else None

        seen = stack.wait_for(shards_of_live, 90, "all four live targets up through Thanos Query")
        assert seen == {name: str(hashmod(name, SHARDS)) for name in targets}

        def history_visible() -> bool:
            data, _ = thanos_api(query, "/api/v1/query", {
                "query": "count by (shard) (count_over_time(mssql_ssd_pool_written_bytes_total[400d]))",
                "time": str(history.report_end), "max_source_resolution": "1h"})
            return len(data["result"]) == SHARDS

        stack.wait_for(history_visible, 60, "the backfilled year through the store gateway")

        # The report over the year, from 1 h data where the raw data is gone: the figures by hand.
        result = report(query, "--end", str(history.report_end), "--format", "csv", "--resolution", "1h")
        assert result.returncode == 1, result  # the pool without a rating, the too-short period
        assert "partial response" not in result.stdout + result.stderr, result
        # Two properties of Thanos' downsampled data, measured here (docs/scaling.md): an aggregate is
        # stamped at the end of its window, so a series' first sample and each memory change show one
        # step late (every break of the periods moves one step later); and a window
        # that reads 1 h blocks and then 5 m blocks (the newest block is too short for 1 h) sees the
        # counter over a span up to 55 minutes shorter than the bytes it holds: the rate of such a period
        # is high by at most one step over its length (0.02% on half a year, 0.14% on 30 days).
        check_rows(result.rows(), expected_rows(history, stamp_delay=3600), slack_seconds=3600)
        assert dashboard_warnings(query, time.time()) == []

        # A shard stops: the fleet view says so instead of showing smaller totals.
        stack.process("sidecar-1").stop()
        partial = report(query, "--end", str(history.report_end), "--format", "csv", "--resolution", "1h")
        assert partial.returncode == 1, partial
        assert "partial response" in partial.stderr
        for row in partial.rows():  # every row computed from an answer says the answer was partial
            assert "partial response" in row["note"] or "shorter than" in row["note"], partial.stdout
        warned = dashboard_warnings(query, time.time())
        assert warned, "a stopped shard must show as a warning on the fleet dashboard's queries"
