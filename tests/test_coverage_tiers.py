"""The coverage expressions, measured by promtool on young series under both Prometheus releases.

`*_coverage_seconds` is how much data a coverage-aware rate rests on: the span from a series' first sample
in the window to its latest, found with subqueries of `timestamp()` in tiers (fine steps close to now,
coarse ones further back; `endurance.coverage_tiers`). A subquery step finds the first sample only at the
next multiple of the step, so the span may read short (the rate then reads high, never low), by less than
one step of the finest tier that reaches back far enough.

Each case here is a series scraped every minute from one minute past an hour (the worst start for every
tier: 59 minutes before the next hourly step) for a span, and the expected coverage is worked out from that
rule alone, not taken from promtool: the first step of the finest reaching tier at or after the first
sample, capped at the window. Prometheus 3 reads ranges as left-open; before each tier reached one step
past its reach, a day of data read 85,800 s under 3.13.3 (and 86,400 s under 2.42).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

from alerts.endurance import coverage as _coverage
from alerts.spec import duration_seconds, load
from tests import tools
from tests.test_alerting import output, run

SCRAPE_SECONDS = 60
FIRST_SAMPLE = 3600 + SCRAPE_SECONDS  # one minute past an hour
SERIES = 'mssql_up{job="mssql",instance="db1:1433"}'
# Rules are evaluated between scrapes: half a scrape after the latest sample, so no range starts exactly on
# a subquery step (where 2.42's closed and 3.x's left-open ranges differ by design, not by error).
EVAL_AFTER_SCRAPE = SCRAPE_SECONDS // 2
# Spans of data (seconds) around every tier boundary and the windows, plus a full week and more.
SPANS = (
    600,  # younger than the 5-minute, 15-minute and hourly tiers' first step: those tiers have no answer yet
    1800,
    3600,  # the dashboards' projection_min_coverage
    2 * 3600,
    2 * 3600 + 120,  # just past the 1-minute tier
    12 * 3600,
    86400,  # the alerts' alert_min_coverage
    86400 + 1200,  # just past the 5-minute tier
    2 * 86400,
    3 * 86400 + 1800,  # just past the 15-minute tier
    5 * 86400,
    7 * 86400,
    8 * 86400,
)
WINDOWS = ("1d", "7d")


def expected_coverage(span: int, window: str) -> int:
    """First principles: each tier's subquery steps are the multiples of its step inside its range (reach
    plus one step, left-open; the last tier reaches the window plus one step). At a step at or after the
    first sample, timestamp() gives that step's own sample (scrapes fall on every minute); before it there
    is none. The earliest such step over all tiers is the first sample found; the span runs from it to the
    latest sample, capped at the window."""
    latest = FIRST_SAMPLE + span
    now = latest + EVAL_AFTER_SCRAPE
    window_s = int(duration_seconds(window))
    found = latest
    for tier in load().endurance.coverage_tiers:
        reach, step = int(duration_seconds(tier.reach)), int(duration_seconds(tier.step))
        reach = min(reach, window_s)
        earliest = max(FIRST_SAMPLE, now - (reach + step))
        found = min(found, math.ceil(earliest / step) * step)
        if reach == window_s:
            break
    return min(window_s, latest - found)


def rule_test(window: str) -> dict:
    expr = _coverage(load(), 'mssql_up{job="mssql"}', window)
    tests = []
    for span in SPANS:
        samples = span // SCRAPE_SECONDS
        tests.append(
            {
                "name": f"{span} s of data, {window} window",
                "interval": f"{SCRAPE_SECONDS}s",
                "input_series": [
                    {"series": SERIES, "values": f"_x{FIRST_SAMPLE // SCRAPE_SECONDS} 1x{samples}"}
                ],
                "promql_expr_test": [
                    {
                        "expr": expr,
                        "eval_time": f"{FIRST_SAMPLE + span + EVAL_AFTER_SCRAPE}s",
                        "exp_samples": [
                            {
                                "labels": '{job="mssql",instance="db1:1433"}',
                                "value": expected_coverage(span, window),
                            }
                        ],
                    }
                ],
            }
        )
    return {"rule_files": [], "evaluation_interval": "1m", "tests": tests}


def test_expected_coverage_errs_short_by_less_than_a_step():
    # The oracle itself: never longer than the data or the window, never short by a whole hour's step.
    for window in WINDOWS:
        for span in SPANS:
            got = expected_coverage(span, window)
            assert got <= min(span, duration_seconds(window))
            assert min(span, duration_seconds(window)) - got < 3600


@pytest.mark.parametrize("window", WINDOWS)
@pytest.mark.parametrize("promtool", tools.promtool_versions(), ids=str)
def test_coverage_of_a_young_series(promtool: tools.Versioned, window: str, tmp_path: Path):
    tools.check_binary(promtool)
    path = tmp_path / f"coverage_{window}.test.yml"
    path.write_text(yaml.safe_dump(rule_test(window), sort_keys=False))
    result = run([promtool.path, "test", "rules", str(path)], timeout=240, cwd=tmp_path)
    assert result.returncode == 0, output(result)
