"""`make bench` stays runnable, and what it counts (not how fast) holds: one round trip per scrape and per
probe, no failed probe. Its timings are read by people from its tables, never asserted here."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.timeouts import PATIENT_SECONDS

ROOT = Path(__file__).resolve().parents[2]


def run_python(*argv: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "exporter"), str(ROOT)])}
    return subprocess.run(
        [sys.executable, *argv], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )


def test_quick_bench_prints_its_tables_and_counts_one_round_trip_per_scrape(tmp_path):
    out = tmp_path / "bench.json"
    # Patient (tests/timeouts.py): the fleet's scrapes are not what this tests, and on a loaded machine a
    # 10 s scrape timeout failed four of them (mssql_up 0): the table had the shape, the test said no.
    patient = ("--timeout", str(PATIENT_SECONDS))
    quick = ("--quick", "--only", "abdfh", "--fleet", "5", "--burst", "20", *patient)
    # The run as a whole gets the same patience twenty times over: a hang guard, not a figure.
    run = run_python("bench/bench_scrape.py", *quick, "--json", str(out), timeout=20 * PATIENT_SECONDS)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    titles = ("(a) Round trips and bytes", "(b) Scrape latency", "(d) Fleet", "(f) The memory diagnosis")
    for title in (*titles, "(h) Bursts"):
        assert title in run.stdout, run.stdout[-2000:]
    results = json.loads(out.read_text())
    for cost in results["a_b"]:
        assert cost["round_trips_per_scrape"] == 1.0, cost
        assert cost["bytes_from_server"] > 0 and cost["rows"] > 0, cost
        # A refresh also reads file names and paths: more bytes back, still one request; both batches
        # are prepared on the connection, so what goes out is a handle (prepared.py), not the text.
        if "Table 4" not in cost["scenario"]:  # the Table 4 set has no slow-cadence section
            assert cost["refresh_bytes_from_server"] > cost["bytes_from_server"], cost
        assert cost["bytes_to_server"] < 2048 and cost["refresh_bytes_to_server"] < 2048, cost
        for figure in ("total", "batch_round_trip", "exporter_cpu", "select1"):
            assert cost["ms"][figure]["p50"] > 0, (figure, cost["ms"])
    for share in results["f_section_share"]:
        # Without the diagnosis collectors the scrape has fewer series; both sides were measured.
        assert share["series_all"] > share["series_without"] > 0, share
        assert share["median_ms_all"] > 0 and share["median_ms_without"] > 0, share
    (burst,) = results["h_burst"]
    # Every probe of the burst answered: scraped (up 1 or 0), or 503 for one that waited past its timeout.
    assert burst["probes"] == 20 and burst["failed"] == 0, burst
    assert burst["up"] + burst["down"] + burst["late"] == 20, burst
    assert burst["gzipped"] >= burst["up"], burst  # every answer with series (mssql_up 0 alone is < 1 KiB)
    (fleet,) = results["d_fleet"]
    assert fleet["targets"] == 5 and fleet["probes"] >= 5, fleet
    assert fleet["failed"] == sum(fleet["errors"].values()) == 0, fleet["errors"]
    assert fleet["round_trips_per_probe"] == 1.0, fleet


def test_quick_start_up_table_counts_bytes_written_and_what_is_left_behind(tmp_path):
    out = tmp_path / "bench.json"
    run = run_python("bench/bench_scrape.py", "--quick", "--only", "e", "--json", str(out))
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert "(e) Start-up with N targets" in run.stdout, run.stdout[-2000:]
    small, large = json.loads(out.read_text())["e_startup"]
    assert (small["targets"], large["targets"]) == (100, 1000)
    for row in (small, large):
        assert row["listened"] and row["exit_status"] == 0 and row["left_behind"] == [], row
        assert row["write_bytes"] > 0 and row["rss_peak_bytes"] > 0, row
    # Linear in the fleet (whole pages of slack): the quadratic start-up wrote 1 MB and 80 MB here.
    assert large["write_bytes"] <= 10 * small["write_bytes"] + 64 * 1024, (small, large)


def test_compare_runs_two_checkouts_side_by_side_and_cleans_up():
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: nothing to compare against")
    # --exclude and --collector-file put their options in this side's config: an exporter refusing
    # either would fail the warm-up.
    run = run_python(
        "-m", "bench.compare", "--ref", "HEAD", "--rounds", "2", "--probes", "5", "--warmup=2",
        "--exclude", "plan_cache", "--collector-file", "shipped:blocking",
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert "this checkout without plan_cache with shipped:blocking" in run.stdout, run.stdout
    assert "this / ref" in run.stdout, run.stdout
    listed = subprocess.run(["git", "worktree", "list"], cwd=ROOT, capture_output=True, text=True, check=True)
    assert "compare-" not in listed.stdout, listed.stdout
    bad = run_python("-m", "bench.compare", "--ref", "no-such-revision", timeout=60)
    assert bad.returncode != 0 and "'no-such-revision' is not a commit" in bad.stderr, bad.stderr


def test_compare_ratio_names_a_reference_too_short_to_measure():
    # The CPU clock counts 10 ms ticks: five probes of the reference can measure 0 ms, which divided
    # the whole comparison by zero (a CI run failed so).
    from bench.compare import ratio

    assert ratio(1.05, 1.0) == "1.05"
    assert ratio(0.5, 0.0).startswith("n/a")


def test_capacity_report_bench_reads_both_resolutions_and_every_period():
    """(i) at three targets: both runs give a share for each of the six periods (two per target)."""
    from tests import tools

    tools.check_thanos()
    run = run_python("-m", "bench.capacity_report", "--targets", "3")
    assert run.returncode == 0, run.stdout + run.stderr
    results = json.loads(run.stdout.strip().splitlines()[-1])
    for resolution in ("1h", "raw"):
        assert results[resolution]["rows"] == 6 and results[resolution]["rows_with_share"] == 6, results
        assert results[resolution]["exit"] == 0 and results[resolution]["fetched_bytes"] > 0, results
    assert "raw / 1 h:" in run.stdout


def test_scale_out_probes_every_target_once_a_round_on_the_process_its_name_hashes_to():
    run = run_python(
        "-m", "bench.scale_out", "--targets", "6", "--processes", "1", "--processes", "2",
        "--interval", "6", timeout=240,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    rows = [line.split() for line in run.stdout.splitlines() if line[:2] in ("1 ", "2 ")]
    assert [row[0] for row in rows] == ["1", "2"], run.stdout
    assert rows[0][1] == "6" and "6 (0)" in " ".join(rows[0]), run.stdout  # every target, none failed
    assert "6 (0)" in " ".join(rows[1]), run.stdout

