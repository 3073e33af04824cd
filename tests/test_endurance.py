"""SSD endurance pools: their config, the metrics they export, and the projection arithmetic.

The arithmetic is checked against first principles (bytes, seconds, decimal TB), not against Micron's
table; the Micron tests at the end only pin down the unit finding stated in docs/endurance.md.
"""

from __future__ import annotations

import math
import time
from datetime import UTC, date, datetime
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from mssql_memory_exporter.collectors.base import ScrapeContext
from mssql_memory_exporter.collectors.endurance import (
    COUNTING_MEMO_KEY,
    TB,
    CountingStart,
    counting_metrics,
    counting_start,
    in_service_timestamp,
    planned_lifetime_seconds,
    pool_metrics,
    projected_share,
    rated_endurance_bytes,
    remaining_seconds,
    written_so_far,
)
from mssql_memory_exporter.config import ConfigError, SsdDrives, SsdPool, parse_config
from mssql_memory_exporter.metrics.builder import FamilyBuilder

from tests.conftest import exposition, scrape, value

TESTDATA = Path(__file__).parent / "config_testdata"
DOC = Path(__file__).resolve().parent.parent / "docs" / "endurance.md"
PASSWORD_ENV = "MSSQL_EXPORTER_TEST_PASSWORD"
YEAR_365 = 365 * 86_400
MICRON_RATED = 4 * 7_000 * TB


@pytest.fixture(autouse=True)
def _password_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PASSWORD_ENV, "pw")


def pool_body(**changes: object) -> dict:
    body: dict = {
        "drives": {"count": 4, "tbw_per_drive_tb": 7000},
        "planned_lifetime_years": 5,
        "in_service_date": "2022-03-01",
        "volumes": ["/var/opt/mssql/tempdb"],
    }
    body.update(changes)
    return {key: value for key, value in body.items() if value is not None}


def config_with(pools: dict | None = None, **target: object) -> dict:
    fields = {"host": "sql.example.com", "auth_module": "monitor", **target}
    if pools is not None:
        fields["ssd_pools"] = pools
    return {
        "auth_modules": {"monitor": {"username": "u", "password_env": PASSWORD_ENV}},
        "targets": {"t": fields},
    }


def errors_of(data: dict) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse_config(data, source="c.yml")
    return info.value.lines


def one_pool(**changes: object) -> SsdPool:
    return parse_config(config_with({"p": pool_body(**changes)})).targets["t"].ssd_pools["p"]


# --- arithmetic from first principles -------------------------------------------------------------------


def test_rated_endurance_from_tbw():
    drives = SsdDrives(count=4, tbw_per_drive_tb=7000)
    assert rated_endurance_bytes(drives) == 2.8e16  # 4 x 7,000 x 10^12 B
    assert rated_endurance_bytes(drives) == MICRON_RATED


def test_rated_endurance_from_dwpd():
    one = SsdDrives(count=1, dwpd=1, capacity_tb=3.84, warranty_years=5)
    # One full drive write (3.84 x 10^12 B) per day, for 365 days a year, for 5 years.
    assert rated_endurance_bytes(one) == pytest.approx(3.84e12 * 365 * 5, rel=1e-12)
    assert rated_endurance_bytes(one) == pytest.approx(7.008e15, rel=1e-12)
    four = SsdDrives(count=4, dwpd=3, capacity_tb=3.2, warranty_years=5)
    assert rated_endurance_bytes(four) == pytest.approx(4 * 17_520e12, rel=1e-12)


def test_planned_lifetime_uses_365_25_day_years():
    assert planned_lifetime_seconds(1) == 365.25 * 86_400 == 31_557_600
    assert planned_lifetime_seconds(5) == 157_788_000
    assert planned_lifetime_seconds(4) == (3 * 365 + 366) * 86_400  # four years span one leap day
    assert planned_lifetime_seconds(0.5) == 15_778_800
    for bad in (0, -1, math.inf, math.nan):
        with pytest.raises(ValueError):
            planned_lifetime_seconds(bad)


def test_in_service_timestamp_is_utc_midnight():
    assert in_service_timestamp(date(1970, 1, 1)) == 0
    days = date(2022, 3, 1).toordinal() - date(1970, 1, 1).toordinal()
    assert in_service_timestamp(date(2022, 3, 1)) == days * 86_400 == 1_646_092_800
    assert in_service_timestamp(date(2024, 3, 1)) - in_service_timestamp(date(2024, 2, 28)) == 2 * 86_400
    with pytest.raises(TypeError):
        in_service_timestamp(datetime(2022, 3, 1, 12, 0))


@pytest.mark.skipif(not hasattr(time, "tzset"), reason="needs time.tzset")
def test_in_service_timestamp_ignores_the_local_time_zone(monkeypatch: pytest.MonkeyPatch):
    for zone in ("Pacific/Kiritimati", "America/Los_Angeles", "UTC"):
        monkeypatch.setenv("TZ", zone)
        time.tzset()
        assert in_service_timestamp(date(2022, 3, 1)) == 1_646_092_800
    monkeypatch.undo()  # restore TZ as it was, and make the C library read it again
    time.tzset()


def test_projection_of_the_heaviest_micron_row_in_decimal_units():
    rate = 235.8e6  # MB/s with MB = 10^6 B
    five_365_day_years = 5 * YEAR_365
    written = rate * five_365_day_years
    assert written == pytest.approx(3.718e16, rel=1e-4)  # 37.18 PB
    assert projected_share(rate, five_365_day_years, MICRON_RATED) == pytest.approx(1.328, abs=5e-4)
    # The exporter's own lifetime (365.25-day years) adds 0.07%.
    assert projected_share(rate, planned_lifetime_seconds(5), MICRON_RATED) == pytest.approx(1.329, abs=5e-4)


def test_projected_share_edges():
    assert projected_share(0, planned_lifetime_seconds(5), MICRON_RATED) == 0
    rate_at_rating = MICRON_RATED / planned_lifetime_seconds(5)
    assert projected_share(rate_at_rating, planned_lifetime_seconds(5), MICRON_RATED) == pytest.approx(1)
    for args in ((1, 1, 0), (1, 1, -1), (-1, 1, 1), (1, -1, 1), (math.nan, 1, 1), (1, 1, math.inf)):
        with pytest.raises(ValueError):
            projected_share(*args)


def test_remaining_seconds():
    assert remaining_seconds(1e15, 0, 1e6) == 1e9
    assert remaining_seconds(2.8e16, 0.7e16, 235.8e6) == pytest.approx(2.1e16 / 235.8e6)
    assert remaining_seconds(1e15, 1e15, 1e6) == 0.0
    assert remaining_seconds(1e15, 2e15, 1e6) == 0.0  # past the rating: clamped, never negative
    assert remaining_seconds(1e15, 2e15, 0) == 0.0
    assert remaining_seconds(1e15, 0, 0) == math.inf
    for args in ((0, 0, 1), (1, -1, 1), (1, 0, -1), (1, math.nan, 1)):
        with pytest.raises(ValueError):
            remaining_seconds(*args)


@given(
    rated=st.floats(1e9, 1e18),
    share_written=st.floats(0, 0.999),
    rate=st.floats(1.0, 1e10),
)
def test_remaining_and_projection_agree(rated: float, share_written: float, rate: float):
    written = rated * share_written
    left = remaining_seconds(rated, written, rate)
    assert written + rate * left == pytest.approx(rated, rel=1e-9)
    # Writing for exactly the remaining time from zero uses that share of the rating.
    assert projected_share(rate, left, rated) == pytest.approx(1 - share_written, rel=1e-9)


# --- metrics --------------------------------------------------------------------------------------------


def test_pool_metrics_exposition():
    pool = one_pool(in_service_date="2022-03-01")
    out = FamilyBuilder({"env": "prod"})
    pool_metrics("tempdb", pool, sqlserver_written=1.5e12, host_written=3e12, out=out)
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in out.families()
        for s in family.samples
    }
    env, pool_label = ("env", "prod"), ("pool", "tempdb")
    assert samples == {
        ("mssql_ssd_pool_rated_endurance_bytes", (env, pool_label)): 2.8e16,
        ("mssql_ssd_pool_planned_lifetime_seconds", (env, pool_label)): 157_788_000,
        ("mssql_ssd_pool_in_service_timestamp_seconds", (env, pool_label)): 1_646_092_800,
        ("mssql_ssd_pool_written_bytes_total", (env, pool_label, ("source", "sqlserver"))): 1.5e12,
        ("mssql_ssd_pool_written_bytes_total", (env, pool_label, ("source", "host"))): 3e12,
    }
    text = exposition(out.families())
    assert "# TYPE mssql_ssd_pool_written_bytes_total counter" in text
    assert "# TYPE mssql_ssd_pool_rated_endurance_bytes gauge" in text
    assert 'mssql_ssd_pool_written_bytes_total{env="prod",pool="tempdb",source="host"} 3e+12' in text


@pytest.mark.parametrize(
    ("sqlserver", "host", "sources"),
    [
        (None, None, set()),
        (0.0, None, {"sqlserver"}),
        (None, 5.0, {"host"}),
        (1.0, 2.0, {"sqlserver", "host"}),
    ],
)
def test_written_counter_only_for_sources_with_a_value(
    sqlserver: float | None, host: float | None, sources: set
):
    out = FamilyBuilder({})
    pool_metrics("p", one_pool(), sqlserver, host, out)
    written = [s for f in out.families() for s in f.samples if s.name == "mssql_ssd_pool_written_bytes_total"]
    assert {s.labels["source"] for s in written} == sources
    gauges = {f.name for f in out.families() if f.type == "gauge"}
    assert len(gauges) == 3  # the configured figures are there whether or not any writes were counted


def test_pools_share_families():
    out = FamilyBuilder({})
    pool_metrics("a", one_pool(), 1.0, None, out)
    pool_metrics(
        "b",
        one_pool(drives={"count": 2, "dwpd": 1, "capacity_tb": 3.84, "warranty_years": 5}),
        2.0,
        None,
        out,
    )
    rated = next(f for f in out.families() if f.name == "mssql_ssd_pool_rated_endurance_bytes")
    assert {s.labels["pool"]: s.value for s in rated.samples} == pytest.approx(
        {"a": 2.8e16, "b": 2 * 7.008e15}
    )


@pytest.mark.parametrize("bad", [-1.0, math.nan, math.inf])
def test_written_bytes_must_be_a_counter_value(bad: float):
    with pytest.raises(ValueError, match="bytes written"):
        pool_metrics("p", one_pool(), bad, None, FamilyBuilder({}))


def test_known_written_gauges_only_when_configured():
    def gauges(pool: SsdPool) -> dict[str, float]:
        out = FamilyBuilder({})
        pool_metrics("p", pool, 1.0, None, out)
        return {s.name: s.value for f in out.families() for s in f.samples if "known" in s.name}

    assert gauges(one_pool()) == {}
    known = one_pool(known_written={"written_tb": 9460.8, "read_date": "2024-09-15"})
    days = date(2024, 9, 15).toordinal() - date(1970, 1, 1).toordinal()
    assert gauges(known) == {
        "mssql_ssd_pool_known_written_bytes": 9460.8e12,  # decimal TB, like the ratings
        "mssql_ssd_pool_known_written_timestamp_seconds": days * 86_400,  # 00:00 UTC of the read date
    }


# --- where the counted bytes begin ----------------------------------------------------------------------

IN_SERVICE = 1_646_092_800.0  # 2022-03-01 00:00 UTC, the in_service_date of pool_body()


def test_sqlserver_counting_starts_at_the_first_reading_and_stays():
    first = counting_start(None, 0.0, 2e9, None, IN_SERVICE)
    assert first == CountingStart(timestamp=2e9, written=0.0, last=0.0)
    later = counting_start(first, 5e12, 2e9 + 3600, None, IN_SERVICE)
    assert (later.timestamp, later.written, later.last) == (2e9, 0.0, 5e12)


def test_a_first_reading_that_is_not_zero_is_the_baseline():
    # The pool's first scrape missed the volumes' zero baseline: count from this reading, not from 0.
    assert counting_start(None, 7e9, 2e9, None, IN_SERVICE) == CountingStart(2e9, 7e9, 7e9)


def test_a_counter_that_goes_down_starts_counting_again():
    start = counting_start(None, 0.0, 2e9, None, IN_SERVICE)
    start = counting_start(start, 9e12, 2e9 + 60, None, IN_SERVICE)
    dropped = counting_start(start, 4e12, 2e9 + 120, 1.9e9, IN_SERVICE)
    assert dropped == CountingStart(2e9 + 120, 4e12, 4e12)  # a known zero applies to a first reading only


def test_host_counts_from_boot_when_it_booted_after_the_anchor():
    boot = IN_SERVICE + 86_400 * 400
    assert counting_start(None, 3e14, boot + 86_400 * 30, boot, IN_SERVICE) == CountingStart(boot, 0.0, 3e14)


def test_host_up_since_before_the_anchor_counts_from_the_first_reading():
    # The known reading was taken after the host booted: its since-boot counter holds bytes the reading
    # already includes.
    boot = IN_SERVICE + 86_400 * 400
    anchor = boot + 86_400 * 10
    now = anchor + 3600
    assert counting_start(None, 3e14, now, boot, anchor) == CountingStart(now, 3e14, 3e14)
    # A boot time ahead of the reading's own time is not believed either.
    assert counting_start(None, 3e14, now, now + 10, anchor) == CountingStart(now, 3e14, 3e14)


class _Host:
    def __init__(self, boot: float) -> None:
        self.boot = boot

    def boot_time(self) -> float:
        return self.boot


def _counting(out: FamilyBuilder) -> dict[tuple[str, str], tuple[float, float]]:
    got: dict[tuple[str, str], list[float]] = {}
    for family in out.families():
        for s in family.samples:
            if s.name == "mssql_ssd_pool_counting_start_timestamp_seconds":
                got.setdefault((s.labels["pool"], s.labels["source"]), [0.0, 0.0])[0] = s.value
            elif s.name == "mssql_ssd_pool_counting_start_written_bytes":
                got.setdefault((s.labels["pool"], s.labels["source"]), [0.0, 0.0])[1] = s.value
    return {key: (a, b) for key, (a, b) in got.items()}


def test_counting_metrics_per_pool_and_source_across_scrapes():
    boot = IN_SERVICE + 86_400 * 700
    memo: dict[str, object] = {}
    fresh = one_pool()
    read_later = one_pool(known_written={"written_tb": 100, "read_date": "2024-06-01"})  # after the boot
    scrapes = ((boot + 5000, 0.0, 4e13), (boot + 5015, 3e8, 4e13 + 2e8))
    for now, sql, host in scrapes:
        out = FamilyBuilder({})
        ctx = ScrapeContext(now=now, workload="oltp", memo=memo, host=_Host(boot))
        counting_metrics("fresh", fresh, sql, host, ctx, out)
        counting_metrics("read", read_later, None, host, ctx, out)
        counting_metrics("none", fresh, None, None, ctx, out)
    assert _counting(out) == {
        ("fresh", "sqlserver"): (boot + 5000, 0.0),
        ("fresh", "host"): (boot, 0.0),  # booted after in service: counted since boot
        ("read", "host"): (boot + 5000, 4e13),  # booted before the reading: counted since the exporter
    }
    assert set(memo[COUNTING_MEMO_KEY]) == {("fresh", "sqlserver"), ("fresh", "host"), ("read", "host")}
    # An exporter restart is a new memo: the sqlserver counting starts again, the host's stays at boot.
    out = FamilyBuilder({})
    ctx = ScrapeContext(now=boot + 9000, workload="oltp", memo={}, host=_Host(boot))
    counting_metrics("fresh", fresh, 0.0, 5e13, ctx, out)
    assert _counting(out) == {("fresh", "sqlserver"): (boot + 9000, 0.0), ("fresh", "host"): (boot, 0.0)}


def test_host_collector_boot_time():
    from mssql_memory_exporter.host.collector import HostCollector

    assert HostCollector(boot_time=lambda: 1.7e9).boot_time() == 1.7e9
    real = HostCollector().boot_time()  # psutil's: in the past, and after the first SSDs were sold
    assert 1e9 < real < time.time()


def test_counting_metrics_check_the_counter():
    ctx = ScrapeContext(now=2e9, workload="oltp", memo={})
    with pytest.raises(ValueError, match="bytes written"):
        counting_metrics("p", one_pool(), -1.0, None, ctx, FamilyBuilder({}))


def test_exporter_restart_moves_the_counting_start_and_zeroes_the_counter(standin, scraper_for):
    s = standin("micron-960gb-8stream")
    pool = {**pool_body(in_service_date="2025-01-01"), "volumes": ["/var/opt/mssql/tempdb"]}
    config = s.config(volume_map={"/var/opt/mssql/tempdb": "/var/opt/mssql/tempdb"}, ssd_pools={"t": pool})
    key = {"pool": "t", "source": "sqlserver"}
    before = time.time()
    scraper = scraper_for(config)
    first = scrape(scraper, config)
    after = time.time()
    started = value(first, "mssql_ssd_pool_counting_start_timestamp_seconds", **key)
    assert before <= started <= after  # the exporter's own clock, at its first reading
    assert value(first, "mssql_ssd_pool_counting_start_written_bytes", **key) == 0
    assert value(first, "mssql_ssd_pool_written_bytes_total", **key) == 0
    s.clock.advance(100)
    second = scrape(scraper, config)
    assert value(second, "mssql_ssd_pool_counting_start_timestamp_seconds", **key) == started
    assert value(second, "mssql_ssd_pool_written_bytes_total", **key) == pytest.approx(
        235.8e6 * 100, rel=1e-4
    )
    s.clock.advance(100)
    restarted = scraper_for(config)  # a new exporter process against the same, still running, server
    third = scrape(restarted, config)
    assert value(third, "mssql_ssd_pool_counting_start_timestamp_seconds", **key) > started
    assert value(third, "mssql_ssd_pool_written_bytes_total", **key) == 0


# --- bytes written so far -------------------------------------------------------------------------------

YEAR = 365.25 * 86_400


def test_written_so_far_keeps_counted_history_when_the_rate_fell():
    # In service 3 years; the exporter counted the last year at 200 MB/s; the 7-day rate is 100 MB/s.
    in_service, now = 0.0, 3 * YEAR
    counted = 200e6 * YEAR
    written = written_so_far(0.0, in_service, now - YEAR, counted, 100e6)
    assert written == pytest.approx(100e6 * 2 * YEAR + 200e6 * YEAR)
    assert written == pytest.approx(12.623e15, rel=1e-4)
    # The former rule: the larger of the counter and the rate carried back 3 years (9.47 PB).
    former = max(100e6 * 3 * YEAR, counted)
    assert former == pytest.approx(9.467e15, rel=1e-4)
    rated = 28e15
    gained = remaining_seconds(rated, former, 100e6) - remaining_seconds(rated, written, 100e6)
    assert gained == pytest.approx(YEAR)  # the former rule overstated the time left by a year


def test_written_so_far_with_a_known_reading():
    # 9,460.8 TB read on the anchor day; counting began 10 days later; 1e12 B counted since.
    got = written_so_far(9460.8e12, 1000.0, 1000.0 + 10 * 86_400, 1e12, 100e6)
    assert got == 9460.8e12 + 100e6 * 864_000 + 1e12
    assert written_so_far(5e15, 2000.0, 1000.0, 1e12, 100e6) == 5e15 + 1e12  # no negative gap
    for bad in ((-1.0, 0.0, 0.0, 0.0, 0.0), (0.0, 0.0, 0.0, math.nan, 0.0), (0.0, 0.0, 0.0, 0.0, -1.0)):
        with pytest.raises(ValueError):
            written_so_far(*bad)


def test_worked_example_in_the_doc():
    # docs/endurance.md, "A worked example": every figure it prints, recomputed from dates and rates.
    in_service = in_service_timestamp(date(2022, 3, 1))
    read = in_service_timestamp(date(2024, 9, 15))
    counting = in_service_timestamp(date(2024, 10, 1))
    now = in_service_timestamp(date(2025, 3, 1))
    assert (counting - read, now - counting, counting - in_service) == (1_382_400, 13_046_400, 81_648_000)
    assert (read - in_service) / 86_400 == 929
    rated = rated_endurance_bytes(SsdDrives(count=4, tbw_per_drive_tb=7000))
    counted = 140e6 * (now - counting)
    assert counted == pytest.approx(1.826496e15)
    written = written_so_far(9460.8 * TB, read, counting, counted, 150e6)
    assert written == pytest.approx(1.1494656e16)
    assert written / rated == pytest.approx(0.41, abs=0.005)
    left = remaining_seconds(rated, written, 150e6)
    assert left == pytest.approx(110_035_626.7, abs=0.05)
    assert round(left / 86_400, 1) == 1273.6
    assert round(left / planned_lifetime_seconds(1), 2) == 3.49
    retire = in_service + planned_lifetime_seconds(5)
    assert datetime.fromtimestamp(retire, UTC) == datetime(2027, 3, 1, 6, tzinfo=UTC)
    assert (retire - now) / 86_400 == 730.25 < left / 86_400  # retired first: RemainingLow silent
    assert round(projected_share(150e6, planned_lifetime_seconds(5), rated), 3) == 0.845
    without_reading = written_so_far(0.0, in_service, counting, counted, 150e6)
    assert round(remaining_seconds(rated, without_reading, 150e6) / 86_400, 1) == 1074.6
    former = max(150e6 * (now - in_service), counted)
    assert round(remaining_seconds(rated, former, 150e6) / 86_400, 1) == 1064.5
    assert round(9460.8 * TB / (read - in_service) / 1e6) == 118
    assert 9460.8 * TB + 150e6 * (counting - read) == pytest.approx(9.66816e15)  # measured and bridged
    text = " ".join(DOC.read_text().split())
    for printed in (
        "1.826496 x 10^15",
        "2.0736 x 10^14",
        "1.1494656 x 10^16",
        "110,035,626.7 s",
        "1,273.6 days",
        "730.25 days",
        "0.845",
        "1,074.6 days",
        "1,064.5 days",
        "118 MB/s",
        "9.66816 x 10^15",
    ):
        assert printed in text, printed


# --- Micron's Table 4: the unit finding in docs/endurance.md --------------------------------------------

# (SQL Server memory GB, write rate as printed in MB/s, Micron's "Platform TBW in 5 Years (PB)")
MICRON_TABLE_4 = [
    (256, 108.6, 16.0),
    (512, 82.4, 12.1),
    (768, 102.2, 15.0),
    (960, 107.7, 15.8),
    (256, 99.4, 14.6),
    (512, 124.1, 18.2),
    (768, 188.7, 27.7),
    (960, 235.8, 34.7),
]


def test_micron_column_is_binary_with_365_25_day_years():
    def reproduced(days: float, bytes_per_mb: float, bytes_per_pb: float) -> int:
        seconds = 5 * days * 86_400
        return sum(
            round(rate * bytes_per_mb * seconds / bytes_per_pb, 1) == pb for _, rate, pb in MICRON_TABLE_4
        )

    assert reproduced(365.25, 1.0, 2**30) == 8  # MB/s x s / 1024^3 (= MiB/s into PiB)
    assert reproduced(365, 1.0, 2**30) == 6  # 365-day years miss the first and last rows
    for days in (365, 365.25, 366):
        assert reproduced(days, 1e6, 1e15) == 0  # no decimal reading matches any row
        assert reproduced(days, 2**20, 1e15) == 0


def _doc_table(marker: str) -> list[list[str]]:
    lines = DOC.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if marker in line)
    rows = []
    for line in lines[start + 1 :]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if not set(cells[0]) <= set("-: "):
            rows.append(cells)
    return rows[1:]  # without the header


def test_doc_table_is_the_recomputation():
    rows = _doc_table("table: micron-recomputed")
    assert len(rows) == len(MICRON_TABLE_4)
    lifetime = planned_lifetime_seconds(5)
    for cells, (memory, rate, micron) in zip(rows, MICRON_TABLE_4, strict=True):
        written = rate * 1e6 * lifetime
        assert int(cells[0]) == memory
        assert float(cells[2]) == rate
        assert float(cells[3]) == pytest.approx(written, rel=5e-5)
        assert cells[4] == f"{written / 1e15:.2f}"
        assert cells[5] == f"{projected_share(rate * 1e6, lifetime, MICRON_RATED):.3f}"
        assert float(cells[6]) == micron
