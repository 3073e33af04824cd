"""mssql-capacity-report: its arithmetic and period splitting, its bad-input paths over real HTTP, and a
backfilled year in a real Prometheus (both releases) read back by the installed console script."""

from __future__ import annotations

import argparse
import calendar
import itertools
import socket
import threading
import time
from pathlib import Path

import pytest
from mssql_capacity_report import arithmetic, cli, collect, formats, promql
from mssql_capacity_report.periods import Break, MemoryPeriod, periods_between

from alerts import spec as alert_spec
from tests import tools
from tests.capacity_backfill import backfill, expected_rows, report
from tests.capacity_endpoint import Endpoint, one_pool, vector
from tests.capacity_history import DAY, GIB, HOUR, History, Instance, Pool, fleet
from tests.e2e_stack import Stack, free_port


@pytest.mark.unit
def test_default_memory_share_is_the_rules_share():
    """One threshold, one value: the report splits where the recording rules mark a target move."""
    assert alert_spec.load().tempdb.memory_change_target_share == cli.DEFAULT_MEMORY_CHANGE_SHARE


@pytest.mark.unit
def test_csv_header_starts_with_the_review_columns():
    assert formats.CSV_HEADER == [
        "instance", "pool", "from", "to", "max_server_memory_bytes", "write_rate_bytes_per_second",
        "projected_life_bytes", "rated_bytes", "share",
    ]


@pytest.mark.unit
def test_micron_row_in_decimal_units():
    """docs/endurance.md: 235.8 MB/s over 5 years of 365.25 days is 37.21 PB, 1.329 of 28 PB."""
    projected = arithmetic.projected_life_bytes(235.8e6, 157_788_000)
    assert arithmetic.decimal_bytes(projected) == "37.21 PB"
    assert round(arithmetic.share(projected, 28e15), 3) == 1.329
    assert arithmetic.share(projected, 0) is None
    assert arithmetic.decimal_rate(235.8e6) == "235.80 MB/s"


@pytest.mark.unit
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
    """`slack_seconds`: how much of a period the rate may over-count (Thanos, tests/e2e/test_thanos_e2e.py);
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


def serve_history(
    stack: Stack, binary: str, data: Path, retention: str = "2y", ready_timeout: float = 60
) -> str:
    """A Prometheus over backfilled blocks in `data`, kept for `retention`; its base URL once ready."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    config = stack.write("prometheus.yml", {"global": {"scrape_interval": "1h"}})
    stack.start_process(
        "prometheus",
        [binary, f"--config.file={config}", f"--storage.tsdb.path={data}",
         f"--storage.tsdb.retention.time={retention}", f"--web.listen-address=127.0.0.1:{port}"],
        f"{base}/-/ready", timeout=ready_timeout,
    )
    return base


def year_end() -> int:
    """The last sample of the backfilled year: on the hour, three hours ago (before any live data)."""
    return (int(time.time()) // HOUR - 3) * HOUR


@pytest.mark.parametrize("prometheus", tools.prometheus_versions(), ids=str)
@pytest.mark.e2e
def test_backfilled_year_in_prometheus(prometheus, tmp_path: Path):
    tools.check_binary(prometheus)
    promtool = str(Path(prometheus.path).with_name("promtool")) if "/" in prometheus.path else "promtool"
    history = fleet(year_end())
    data = tmp_path / "prometheus-data"
    for shard in ("0", "1"):
        backfill(promtool, history, shard, data)
    with Stack(tmp_path) as stack:
        base = serve_history(stack, prometheus.path, data)
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


@pytest.mark.e2e
def test_drives_read_without_the_recording_rule_say_so(tmp_path: Path):
    """The drives' wear is read but pool:mssql_ssd_drive_implied_endurance_bytes:sum was never recorded
    (rule file not loaded): the row names the rule instead of leaving the column silently empty, and the
    rated figures are still given."""
    prometheus = tools.prometheus_versions()[0]
    tools.check_binary(prometheus)
    last = year_end()
    history = History(last, [Instance("sql-x", "0", [(40 * 24, 64 * GIB)],
                                      [Pool("data", 7e15, {64 * GIB: 2e6}, life_used=0.3)],
                                      first_hours_before_end=30 * 24)])
    data = backfill("promtool", history, "0", tmp_path / "data")
    with Stack(tmp_path) as stack:
        base = serve_history(stack, prometheus.path, data)
        result = report(base, "--end", str(history.report_end), "--since", "30d", "--format", "csv")
    (row,) = result.rows()
    assert result.returncode == 1, result  # the share is there, one of the wear figures is not
    assert float(row["write_rate_bytes_per_second"]) == pytest.approx(2e6)
    assert float(row["drive_life_used_ratio"]) == pytest.approx(0.3)
    assert row["drive_implied_endurance_bytes"] == ""
    assert "recording rule pool:mssql_ssd_drive_implied_endurance_bytes:sum not loaded" in row["note"]


# ----------------------------------------------------------- what a reviewer reads, and hostile answers


@pytest.mark.unit
def test_memory_shown_in_sql_servers_mb_and_unlimited_named():
    """256 GiB of max server memory is 262,144 MB as sp_configure sets it, not "274.88 GB"; the default
    2,147,483,647 MB is "unlimited", not 2.25 PB."""
    assert arithmetic.sql_memory(256 * GIB) == "262,144 MB (256 GiB)"
    assert arithmetic.sql_memory(1536 * 2**20) == "1,536 MB (1.50 GiB)"
    assert arithmetic.sql_memory(512 * 2**20) == "512 MB"
    assert arithmetic.sql_memory(2_147_483_647 * 2**20) == "unlimited"


@pytest.mark.unit
def test_end_takes_unix_seconds_or_an_iso_date():
    assert cli.parse_end("1764547200") == 1764547200.0
    assert cli.parse_end("2025-12-01") == calendar.timegm((2025, 12, 1, 0, 0, 0))
    assert cli.parse_end("2025-12-01T06:00Z") == calendar.timegm((2025, 12, 1, 6, 0, 0))
    assert cli.parse_end("2025-12-01T07:00:00+01:00") == calendar.timegm((2025, 12, 1, 6, 0, 0))
    with pytest.raises(argparse.ArgumentTypeError, match="ISO 8601"):
        cli.parse_end("last tuesday")


@pytest.mark.unit
def test_partial_response_warning_read_as_which_store_and_why():
    raw = (
        'receive series from Addr: 127.0.0.1:10901 LabelSets: {replica="0", shard="1"} Mint: 1 Maxt: 2: '
        'rpc error: code = Unavailable desc = connection error: desc = "transport: Error while dialing: '
        'dial tcp 127.0.0.1:10901: connect: connection refused"'
    )
    text = promql.readable_warning(raw)
    assert text == (
        'store 127.0.0.1:10901 {replica="0", shard="1"} did not answer (Unavailable: connection refused)'
    )
    assert promql.readable_warning("something else") == "something else"


@pytest.mark.unit
def test_title_says_where_the_data_starts():
    options = collect.Options(
        end=400 * DAY, since_seconds=365 * DAY, step_seconds=HOUR, resolution_seconds=HOUR
    )
    young = collect.Report(options, [collect.Row("sql-y", "tempdb", 370 * DAY, 400 * DAY)], [])
    assert formats.title(young).endswith("(data from 1971-01-06 00:00)")
    old = collect.Report(options, [collect.Row("sql-o", "tempdb", 35 * DAY + HOUR, 400 * DAY)], [])
    assert "data from" not in formats.title(old)


def test_range_queries_split_under_the_endpoints_point_limit():
    """Five years on an hourly grid are 43,800 steps; Prometheus and Thanos refuse more than 11,000 points
    per series. Each range request stays under the limit and together they tile the grid exactly."""
    with Endpoint(one_pool("sql-a", "tempdb")) as endpoint:
        end = 1_800_000_000.0
        result = report(endpoint.url, "--end", f"{end:.0f}", "--since", "1826d", "--format", "csv")
    assert result.returncode == 0, result
    ranges = [form for path, form in endpoint.requests if path.endswith("query_range")]
    assert ranges
    by_query: dict[str, list[tuple[float, float]]] = {}
    for form in ranges:
        start, stop, step = float(form["start"]), float(form["end"]), float(form["step"])
        assert (stop - start) / step + 1 <= 11_000, form
        by_query.setdefault(form["query"], []).append((start, stop))
    for pieces in by_query.values():
        pieces.sort()
        assert pieces[-1][1] == end
        assert pieces[0][0] == end - 1826 * DAY
        assert all(b[0] == a[1] + HOUR for a, b in itertools.pairwise(pieces)), pieces
        assert len(pieces) == 5


def test_trickling_endpoint_is_cut_off_at_the_timeout():
    """An endpoint that sends its answer a byte every half second: a socket timeout alone would wait for
    ever; the report gives up at --timeout and says so."""
    with Endpoint(one_pool("sql-a", "tempdb"), trickle_seconds=0.5) as endpoint:
        started = time.monotonic()
        result = report(endpoint.url, "--timeout", "2")
        took = time.monotonic() - started
    assert result.returncode == 3, result
    assert "no answer within 2 s" in result.stderr
    assert took < 60


@pytest.mark.parametrize(
    "answer",
    [
        b"<html>proxy error</html>",
        b"[1, 2]",
        {"status": "success", "data": {"resultType": "vector", "result": [{"metric": 1, "value": [0, 1]}]}},
        {"status": "success", "data": {"resultType": "vector", "result": [{"metric": {}, "value": [0]}]}},
        {"status": "success", "data": {"resultType": "vector", "result": [{"value": [0, "x"]}]}},
        {"status": "success", "data": {"resultType": "matrix", "result": "not a list"}},
        {"status": "error", "errorType": "bad_data", "error": "parse error"},
    ],
    ids=["html", "list", "labels-not-object", "value-short", "no-metric", "result-str", "error"],
)
def test_malformed_answer_is_an_endpoint_error_not_a_traceback(answer):
    with Endpoint(lambda path, form: answer) as endpoint:
        result = report(endpoint.url)
    assert result.returncode == 3, result
    assert "nothing computed" in result.stderr and endpoint.url in result.stderr
    assert "Traceback" not in result.stderr


def test_malformed_period_answer_fails_only_its_rows():
    base = one_pool("sql-a", "tempdb")

    def answer(path: str, form: dict[str, str]) -> object:
        return b"garbage" if "label_replace" in form.get("query", "") else base(path, form)

    with Endpoint(answer) as endpoint:
        result = report(endpoint.url, "--format", "csv")
    assert result.returncode == 3, result  # no row has a rate: nothing computed, each row says why
    (row,) = result.rows()
    assert "query failed" in row["note"] and "not a PromQL API answer" in row["note"]
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("value", ["NaN", "+Inf"])
def test_no_number_from_the_endpoint_is_no_figure(value):
    """NaN written bytes printed "nan B/s" with exit 0. Now the cell is empty and the row says why; with
    no write rate in any row nothing was computed (exit 3), the table still printed with the reason."""
    with Endpoint(one_pool("sql-a", "tempdb", written=value)) as endpoint:
        markdown = report(endpoint.url)
        csv_result = report(endpoint.url, "--format", "csv")
    assert markdown.returncode == 3, markdown
    cells = [c.strip().lower() for line in markdown.stdout.splitlines() for c in line.split("|")]
    assert not [c for c in cells if c.startswith(("nan", "inf"))], markdown.stdout
    (row,) = csv_result.rows()
    assert row["write_rate_bytes_per_second"] == "" and row["share"] == ""
    assert "no number (NaN or infinity) for written" in row["note"]


def test_no_number_for_a_rating_leaves_the_rate():
    base = one_pool("sql-a", "tempdb")

    def answer(path: str, form: dict[str, str]) -> object:
        result = base(path, form)
        if "label_replace" in form.get("query", ""):
            for series in result["data"]["result"]:
                if series["metric"].get("q") == "rated":
                    series["value"][1] = "NaN"
        return result

    with Endpoint(answer) as endpoint:
        result = report(endpoint.url, "--format", "csv")
    assert result.returncode == 1, result
    (row,) = result.rows()
    assert float(row["write_rate_bytes_per_second"]) > 0 and row["rated_bytes"] == "" and row["share"] == ""
    assert "no number (NaN or infinity) for rated" in row["note"]


def test_labels_stay_data_in_csv_and_markdown():
    """A label that starts with = would run as a spreadsheet formula; a newline in a label would end the
    markdown row. Both are shown as the text they are."""
    instance, pool = '=HYPERLINK("http://evil.example/","x")', "+tempdb\n| forged | row"
    with Endpoint(one_pool(instance, pool)) as endpoint:
        csv_result = report(endpoint.url, "--format", "csv")
        markdown = report(endpoint.url)
    (row,) = csv_result.rows()
    assert row["instance"] == "'" + instance
    assert row["pool"].startswith("'+tempdb")
    table = [line for line in markdown.stdout.splitlines() if line.startswith("|")]
    assert len(table) == 3, markdown.stdout  # header, rule, the one row
    assert "\\| forged \\| row" in table[2]


def test_instances_without_pools_are_listed_not_dropped():
    base = one_pool("sql-a", "tempdb")

    def answer(path: str, form: dict[str, str]) -> object:
        if "mssql_up" in form.get("query", ""):
            return vector(({"instance": "sql-a"}, "1"), ({"instance": "sql-nopool"}, "1"))
        return base(path, form)

    with Endpoint(answer) as endpoint:
        markdown = report(endpoint.url)
        csv_result = report(endpoint.url, "--format", "csv")
    assert markdown.returncode == 0, markdown
    assert "no SSD pools configured" in markdown.stdout and "- sql-nopool" in markdown.stdout
    assert "262,144 MB (256 GiB)" in markdown.stdout and "250 GiB" in markdown.stdout
    rows = {r["instance"]: r for r in csv_result.rows()}
    assert rows["sql-nopool"]["pool"] == "" and "no SSD pools configured" in rows["sql-nopool"]["note"]
    assert float(rows["sql-a"]["target_memory_bytes"]) == 250 * GIB


@pytest.mark.e2e
def test_five_years_in_prometheus(tmp_path: Path):
    """A review over the drives' planned life: five years of hourly data, memory doubled after three. The
    report used to fail past 458 days ("exceeded maximum resolution of 11,000 points per timeseries")."""
    prometheus = tools.prometheus_versions()[-1]
    tools.check_binary(prometheus)
    promtool = str(Path(prometheus.path).with_name("promtool")) if "/" in prometheus.path else "promtool"
    last = year_end()
    hours = 5 * 365 * 24
    history = History(
        last,
        [Instance("sql-5y", "0", [(hours, 128 * GIB), (2 * 365 * 24, 256 * GIB)],
                  [Pool("tempdb", 28e15, {128 * GIB: 40e6, 256 * GIB: 60e6})], first_hours_before_end=hours)],
        constants_every_hours=24,
    )
    data = backfill(promtool, history, "0", tmp_path / "data")
    with Stack(tmp_path) as stack:
        base = serve_history(stack, prometheus.path, data, retention="6y", ready_timeout=120)
        result = report(base, "--end", str(history.report_end), "--since", "1830d", "--format", "csv",
                        timeout=600)
    assert result.returncode == 0, result
    rows = result.rows()
    rates = [float(r["write_rate_bytes_per_second"]) for r in rows]
    assert rates == [pytest.approx(40e6), pytest.approx(60e6)]
    assert [float(r["max_server_memory_bytes"]) for r in rows] == [128 * GIB, 256 * GIB]
    assert _epoch(rows[0]["from"]) == last - hours * HOUR + 1800
    assert _epoch(rows[1]["to"]) == history.report_end
