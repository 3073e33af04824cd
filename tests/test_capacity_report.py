"""mssql-capacity-report: its arithmetic and period splitting, its bad-input paths over real HTTP, and a
backfilled year in a real Prometheus (both releases) read back by the installed console script."""

from __future__ import annotations

import calendar
import socket
import threading
import time
from pathlib import Path

import pytest
from mssql_capacity_report import arithmetic, cli, formats
from mssql_capacity_report.periods import Break, MemoryPeriod, periods_between

from alerts import spec as alert_spec
from tests import tools
from tests.capacity_backfill import backfill, expected_rows, report
from tests.capacity_history import GB, HOUR, History, Instance, Pool, fleet
from tests.e2e_stack import Stack, free_port


def test_default_memory_share_is_the_rules_share():
    """One threshold, one value: the report splits where the recording rules mark a target move."""
    assert alert_spec.load().tempdb.memory_change_target_share == cli.DEFAULT_MEMORY_CHANGE_SHARE


def test_csv_header_starts_with_the_review_columns():
    assert formats.CSV_HEADER == [
        "instance", "pool", "from", "to", "max_server_memory_bytes", "write_rate_bytes_per_second",
        "projected_life_bytes", "rated_bytes", "share",
    ]


def test_micron_row_in_decimal_units():
    """docs/endurance.md: 235.8 MB/s over 5 years of 365.25 days is 37.21 PB, 1.329 of 28 PB."""
    projected = arithmetic.projected_life_bytes(235.8e6, 157_788_000)
    assert arithmetic.decimal_bytes(projected) == "37.21 PB"
    assert round(arithmetic.share(projected, 28e15), 3) == 1.329
    assert arithmetic.share(projected, 0) is None
    assert arithmetic.decimal_rate(235.8e6) == "235.80 MB/s"


def test_periods_cut_at_memory_changes_and_data_edges():
    step = 3600.0
    breaks = [Break("data_starts", 10 * step), Break("memory", 50 * step), Break("data_stops", 90 * step)]
    assert periods_between(breaks, 0, 100 * step, step) == [
        MemoryPeriod(10 * step, 48 * step),
        MemoryPeriod(50 * step, 88 * step),
    ]
    # No breaks: the whole range; two flagged steps in a row make one zone.
    assert periods_between([], 0, 10 * step, step) == [MemoryPeriod(0, 10 * step)]
    two = [Break("memory", 5 * step), Break("memory", 6 * step)]
    assert periods_between(two, 0, 10 * step, step) == [
        MemoryPeriod(0, 3 * step),
        MemoryPeriod(6 * step, 10 * step),
    ]


def test_bad_arguments_exit_2(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--prometheus", "http://127.0.0.1:1", "--since", "a year"])
    assert exit_info.value.code == 2
    assert "is not a duration" in capsys.readouterr().err


def test_unreachable_endpoint_computes_nothing():
    port = free_port()  # nobody listens
    result = report(f"http://127.0.0.1:{port}", "--timeout", "5")
    assert result.returncode == 3, result
    assert "nothing computed" in result.stderr and "unreachable" in result.stderr
    assert result.stdout == ""


def test_slow_endpoint_times_out_within_its_timeout():
    """An endpoint that accepts the connection and never answers: the report gives up after --timeout,
    says so, and prints no table."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        started = time.monotonic()
        result = report(f"http://127.0.0.1:{server.getsockname()[1]}", "--timeout", "2")
        took = time.monotonic() - started
    finally:
        stop.set()
        thread.join(5)
        for conn in held:
            conn.close()
        server.close()
    assert result.returncode == 3, result
    assert "no answer within 2 s" in result.stderr
    assert took < 60


def _floats_close(actual: str, expected: float | None, what: str, rel: float = 1e-6) -> None:
    if expected is None:
        assert actual == "", f"{what}: expected no figure, got {actual!r}"
        return
    assert actual != "", f"{what}: no figure"
    assert float(actual) == pytest.approx(expected, rel=rel), what


def _epoch(text: str) -> float:
    return float(calendar.timegm(time.strptime(text, "%Y-%m-%dT%H:%M:%SZ")))


def check_rows(
    rows: list[dict[str, str]], expected: list[dict[str, object]], slack_seconds: float = 0
) -> None:
    """`slack_seconds`: how much of a period the rate may over-count (Thanos, tests/test_thanos_e2e.py);
    0 for Prometheus, where every figure is exact to rounding."""
    got = [(r["instance"], r["pool"], _epoch(r["from"])) for r in rows]
    want = [(e["instance"], e["pool"], float(e["from"])) for e in expected]  # type: ignore[arg-type]
    assert got == want, f"periods differ:\n{rows}"
    for row, exp in zip(rows, expected, strict=True):
        what = f"{row['instance']} {row['pool']} from {row['from']}"
        assert _epoch(row["to"]) == exp["to"], what
        span = _epoch(row["to"]) - _epoch(row["from"])
        # bytes of span + slack counted over span: high by at most slack / (span - slack) of the rate
        rel = 1e-6 + (slack_seconds / (span - slack_seconds) if span > slack_seconds else 0)
        _floats_close(row["max_server_memory_bytes"], exp["memory"] if exp["rate"] else None, what)  # type: ignore[arg-type]
        _floats_close(row["write_rate_bytes_per_second"], exp["rate"], what, rel)  # type: ignore[arg-type]
        _floats_close(row["projected_life_bytes"], exp["projected"], what, rel)  # type: ignore[arg-type]
        _floats_close(row["rated_bytes"], exp["rated"], what)  # type: ignore[arg-type]
        if exp["share"] is None:
            assert row["share"] == "", what
        else:
            assert float(row["share"]) == pytest.approx(exp["share"], rel=rel, abs=1e-4), what
        assert str(exp["note"]) in row["note"], f"{what}: note {row['note']!r}"


def year_end() -> int:
    """The last sample of the backfilled year: on the hour, three hours ago (before any live data)."""
    return (int(time.time()) // HOUR - 3) * HOUR


@pytest.mark.parametrize("prometheus", tools.prometheus_versions(), ids=str)
def test_backfilled_year_in_prometheus(prometheus, tmp_path: Path):
    tools.check_binary(prometheus)
    promtool = str(Path(prometheus.path).with_name("promtool")) if "/" in prometheus.path else "promtool"
    history = fleet(year_end())
    data = tmp_path / "prometheus-data"
    for shard in ("0", "1"):
        backfill(promtool, history, shard, data)
    with Stack(tmp_path) as stack:
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        config = stack.write("prometheus.yml", {"global": {"scrape_interval": "1h"}})
        stack.start_process(
            "prometheus",
            [prometheus.path, f"--config.file={config}", f"--storage.tsdb.path={data}",
             "--storage.tsdb.retention.time=2y", f"--web.listen-address=127.0.0.1:{port}"],
            f"{base}/-/ready", timeout=60,
        )
        result = report(base, "--end", str(history.report_end), "--format", "csv")
        assert result.returncode == 1, result  # one pool without a rating, one period too short
        check_rows(result.rows(), expected_rows(history))
        sql_b = next(r for r in result.rows() if r["instance"] == "sql-b" and r["pool"] == "data")
        assert float(sql_b["drive_life_used_ratio"]) == pytest.approx(0.2)
        assert float(sql_b["drive_implied_endurance_bytes"]) == pytest.approx(5e16)

        markdown = report(base, "--end", str(history.report_end))
        assert "| sql-a | tempdb |" in markdown.stdout and "28.00 PB" in markdown.stdout
        page = report(base, "--end", str(history.report_end), "--format", "html")
        assert page.stdout.count("<svg") == 5 and "http" not in page.stdout.replace(
            'xmlns="http://www.w3.org/2000/svg"', ""
        )


def test_drives_read_without_the_recording_rule_say_so(tmp_path: Path):
    """The drives' wear is read but pool:mssql_ssd_drive_implied_endurance_bytes:sum was never recorded
    (rule file not loaded): the row names the rule instead of leaving the column silently empty, and the
    rated figures are still given."""
    prometheus = tools.prometheus_versions()[0]
    tools.check_binary(prometheus)
    last = year_end()
    history = History(last, [Instance("sql-x", "0", [(40 * 24, 64 * GB)],
                                      [Pool("data", 7e15, {64 * GB: 2e6}, life_used=0.3)],
                                      first_hours_before_end=30 * 24)])
    data = backfill("promtool", history, "0", tmp_path / "data")
    with Stack(tmp_path) as stack:
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        config = stack.write("prometheus.yml", {"global": {"scrape_interval": "1h"}})
        stack.start_process(
            "prometheus",
            [prometheus.path, f"--config.file={config}", f"--storage.tsdb.path={data}",
             "--storage.tsdb.retention.time=2y", f"--web.listen-address=127.0.0.1:{port}"],
            f"{base}/-/ready", timeout=60,
        )
        result = report(base, "--end", str(history.report_end), "--since", "30d", "--format", "csv")
    (row,) = result.rows()
    assert result.returncode == 1, result  # the share is there, one of the wear figures is not
    assert float(row["write_rate_bytes_per_second"]) == pytest.approx(2e6)
    assert float(row["drive_life_used_ratio"]) == pytest.approx(0.3)
    assert row["drive_implied_endurance_bytes"] == ""
    assert "recording rule pool:mssql_ssd_drive_implied_endurance_bytes:sum not loaded" in row["note"]
