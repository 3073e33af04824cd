"""Stats side by side never tell opposite stories: the endurance dashboard's stat queries evaluated by
promtool (Prometheus' own engine, over the generated recording rules) on series where a pool wears out
before its planned retirement, or is retired first, or tempdb fills slowly or fast, and every value the
panel shows coloured as Grafana colours it: the thresholds of an override matching its query (by refId)
or its column (by name), else the panel's.

The first scenario is issue 26's: a pool 1.9 years into a 5-year life, at Micron's 235.8 MB/s against
28 PB, used up in 1.82 years while its retirement is 3.1 years away. The share beside it is red; the time
left was green. Every expectation below is a colour, never a text or an expression.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from alerts.spec import duration_seconds, number
from alerts.spec import load as load_spec
from dashboards.grafana import BLUE, GREEN, ORANGE, RED, TEXT, kept_value
from dashboards.limits import Limits
from tests import tools
from tests.lint.dashboards import BOARDS, panels, substitute
from tests.promtool.test_alerting import output, run
from tests.unit.test_dashboards import BUILTINS, JOB

ROOT = Path(__file__).resolve().parents[2]
RECORDING_RULES = ROOT / "alerts" / "rules" / "mssql.recording.rules.yml"
ALERT_RULES = ROOT / "alerts" / "rules" / "mssql.alerts.rules.yml"
INSTANCE = "db1:1433"
VALUES = {"job": JOB, "instance": INSTANCE, "pool": ".+", "host": "127.0.0.1:9399", **BUILTINS}
# The colours as numbers, so PromQL can say which step a value lands in.
CODES = {GREEN: 0, ORANGE: 1, RED: 2, TEXT: 3, BLUE: 4}
COLOURS = {code: colour for colour, code in CODES.items()}

SCRAPE_SECONDS = 300
SAMPLES = 36  # three hours of 5-minute samples: the projections rest on more than their hour of data
EVAL_SECONDS = SCRAPE_SECONDS * SAMPLES
YEAR, DAY = 365.25 * 86400, 86400
PLANNED = 5 * YEAR  # 157,788,000 s
RATED = 4 * 7000 * 10**12  # Micron's four 7450 PRO 3.84 TB: 28 PB


# --- Grafana's colouring, as PromQL --------------------------------------------------------------------


def display_name(panel: dict[str, Any], ref: str) -> str | None:
    """A query's field name for a by-name override: a table column's header (organize's rename)."""
    for transformation in panel.get("transformations", []):
        if transformation["id"] == "organize":
            return transformation["options"]["renameByName"].get(kept_value(f"Value #{ref}"))
    return None


def steps_of(panel: dict[str, Any], ref: str) -> list[dict[str, Any]]:
    """The threshold steps Grafana colours query `ref`'s values with: the last matching override's."""
    steps = panel["fieldConfig"]["defaults"]["thresholds"]["steps"]
    for item in panel["fieldConfig"]["overrides"]:
        matcher = item["matcher"]
        by_ref = matcher == {"id": "byFrameRefID", "options": ref}
        by_name = matcher["id"] == "byName" and matcher["options"] == display_name(panel, ref)
        for prop in item["properties"]:
            if prop["id"] == "thresholds" and (by_ref or by_name):
                steps = prop["value"]["steps"]
    return steps


def colour_code(expr: str, steps: list[dict[str, Any]]) -> str:
    """PromQL giving each series of `expr` the code of the step its value reaches (Grafana: the last step
    whose value is at or under it; the first step has none)."""
    assert steps[0]["value"] is None, steps
    code = CODES[steps[0]["color"]]
    terms = [f"(\n{expr}\n) * 0 + {code}"]
    for step in steps[1:]:
        terms.append(f"((\n{expr}\n) >= bool {number(step['value'])}) * {CODES[step['color']] - code}")
        code = CODES[step["color"]]
    return "\n+ ".join(terms)


def panel(title: str) -> dict[str, Any]:
    [found] = [p for board in BOARDS.values() for p in panels(board) if p["title"] == title]
    return found


def shown_colours(title: str, column: str | None = None) -> str:
    """PromQL counting the values the panel shows (or its column shows) by colour code."""
    found = panel(title)
    codes = [
        f"(\n{colour_code(substitute(target['expr'], VALUES), steps_of(found, target['refId']))}\n)"
        for target in found["targets"]
        if column is None or display_name(found, target["refId"]) == column
    ]
    assert codes, f"{title!r} has no column {column!r}"
    return 'count_values("code", (\n' + "\nor\n".join(codes) + "\n))"


# --- scenarios -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Pool:
    """One SSD pool written at a steady `rate` (bytes/s) by SQL Server, `age` seconds in service at the
    start of the series; `known`: bytes the drives reported written at the start (their known reading)."""

    name: str
    rate: float
    age: float
    known: float | None = None
    rated: float = RATED
    planned: float = PLANNED

    def series(self) -> list[dict[str, str]]:
        pool = f'job="{JOB}",instance="{INSTANCE}",pool="{self.name}"'
        src = f'{pool},source="sqlserver"'
        steady, per_scrape = f"x{SAMPLES}", number(self.rate * SCRAPE_SECONDS)
        found = [
            (f"mssql_ssd_pool_rated_endurance_bytes{{{pool}}}", f"{number(self.rated)}{steady}"),
            (f"mssql_ssd_pool_planned_lifetime_seconds{{{pool}}}", f"{number(self.planned)}{steady}"),
            (f"mssql_ssd_pool_in_service_timestamp_seconds{{{pool}}}", f"{number(-self.age)}{steady}"),
            (f"mssql_ssd_pool_written_bytes_total{{{src}}}", f"0+{per_scrape}{steady}"),
            (f"mssql_ssd_pool_counting_start_timestamp_seconds{{{src}}}", f"0{steady}"),
            (f"mssql_ssd_pool_counting_start_written_bytes{{{src}}}", f"0{steady}"),
        ]
        if self.known is not None:
            found += [
                (f"mssql_ssd_pool_known_written_bytes{{{pool}}}", f"{number(self.known)}{steady}"),
                (f"mssql_ssd_pool_known_written_timestamp_seconds{{{pool}}}", f"0{steady}"),
            ]
        return [{"series": name, "values": values} for name, values in found]

    @property
    def share(self) -> float:
        return self.rate * self.planned / self.rated

    @property
    def remaining(self) -> float:
        """Seconds until the rating is used up at the evaluation time."""
        written = (self.known if self.known is not None else self.rate * self.age) + self.rate * EVAL_SECONDS
        return (self.rated - written) / self.rate

    @property
    def life_left(self) -> float:
        return self.planned - self.age - EVAL_SECONDS


def gauge(name: str, value: float, labels: str = "", per_scrape: float | None = None) -> dict[str, str]:
    """A series of this instance: steady at `value`, or a counter from it growing `per_scrape`."""
    values = f"{number(value)}{'' if per_scrape is None else f'+{number(per_scrape)}'}x{SAMPLES}"
    return {"series": f'{name}{{job="{JOB}",instance="{INSTANCE}"{labels}}}', "values": values}


LIM = Limits.from_spec(load_spec())
END, TEMPDB = LIM.endurance, LIM.spec.tempdb
NOW_SHARE, NOW_TIME = "Highest projected share", "Time until a rating is used up"
POOL_SHARE, POOL_TIME = "Projected share of the rating", "Rating used up in"
TABLE = "Endurance per pool, in the shape of Micron's Table 4"

# Issue 26: Micron's 960 GB multi-stream rate, 1.94 years into a 5-year life.
WORN = Pool("tempdb", rate=235.8e6, age=61_312_000)
# Heavy writes before: the drives' reading says 90% of the rating is written; this rate alone is 30%.
WRITTEN_BEFORE = Pool("reused", rate=0.3 * RATED / PLANNED, age=YEAR, known=0.9 * RATED)
# A month before its retirement with 110 days of rating left: retired first (the alert stays silent).
RETIRED_FIRST = Pool("retiring", rate=170e6, age=PLANNED - 30 * DAY)
# Kept two years past its planned life, 100 days of rating left at a rate that is 69% of it alone.
KEPT_PAST = Pool("kept", rate=RATED / (7 * YEAR + 100 * DAY), age=7 * YEAR - EVAL_SECONDS)

# Per scenario: its series, and per panel (or table column) how many values it shows in each colour.
Check = tuple[str, str | None, dict[str, int]]
SCENARIOS: dict[str, tuple[list[dict[str, str]], list[Check]]] = {
    "wears out 1.2 years before its retirement (issue 26)": (
        WORN.series(),
        [
            (NOW_SHARE, None, {RED: 1}),
            (NOW_TIME, None, {ORANGE: 1}),
            (POOL_SHARE, None, {RED: 1}),
            (POOL_TIME, None, {ORANGE: 1}),
            (TABLE, "Share of rating", {RED: 1}),
            (TABLE, "Rating used up in", {TEXT: 1}),
        ],
    ),
    "the bytes written before use the rating up in service": (
        WRITTEN_BEFORE.series(),
        [(NOW_SHARE, None, {ORANGE: 1}), (NOW_TIME, None, {ORANGE: 1}), (POOL_SHARE, None, {ORANGE: 1})],
    ),
    "retired a month before its rating runs out": (
        RETIRED_FIRST.series(),
        [(NOW_SHARE, None, {ORANGE: 1}), (NOW_TIME, None, {GREEN: 1}), (POOL_TIME, None, {GREEN: 1})],
    ),
    "kept past its retirement with 100 days left": (
        KEPT_PAST.series(),
        [(NOW_SHARE, None, {ORANGE: 1}), (NOW_TIME, None, {ORANGE: 1})],
    ),
    "a worn pool beside one retired first": (
        WORN.series() + RETIRED_FIRST.series(),
        # The soonest of the pools that wear out in service, not the retiring pool's shorter time.
        [
            (NOW_SHARE, None, {RED: 1}),
            (NOW_TIME, None, {ORANGE: 1}),
            (POOL_TIME, None, {ORANGE: 1, GREEN: 1}),  # each pool by its own verdict
        ],
    ),
    # What the drives say: 100% in 1.5 years, 3 years before the pool's retirement.
    "the drives say they wear out before retirement": (
        [
            *Pool("drives", rate=10e6, age=2 * YEAR).series(),
            gauge(LIM.rule("drive_remaining"), 1.5 * YEAR, ',pool="drives"'),
            gauge(LIM.rule("drive_share"), 0.9, ',pool="drives"'),
            # The drives' own counters, whose span of data the drives' projection waits for.
            gauge("mssql_ssd_pool_written_bytes_total", 0, ',pool="drives",source="drive"', 3e9),
        ],
        [("The drives say 100% in", None, {ORANGE: 1})],
    ),
    "tempdb nearly full, filling slowly": (
        [
            gauge(LIM.rule("tempdb_headroom_ratio"), TEMPDB.headroom_critical_share / 2),
            gauge(LIM.rule("tempdb_exhausted_in"), TEMPDB.projection_horizon_seconds * 3),
        ],
        [("Headroom", None, {RED: 1}), ("tempdb full in", None, {ORANGE: 1})],
    ),
    "tempdb roomy, filling fast": (
        [
            gauge(LIM.rule("tempdb_headroom_ratio"), 0.5),
            gauge(LIM.rule("tempdb_exhausted_in"), TEMPDB.projection_horizon_seconds / 2),
        ],
        [("Headroom", None, {ORANGE: 1}), ("tempdb full in", None, {RED: 1})],
    ),
}


# The memory dashboard's count of firing alerts beside a stat whose alert is on its way: the real alert
# rules see lazy writes at twice Dell's limit from minute 20, pending from the next evaluation, firing
# once they have held for the alert's for: time.
LAZY_WRITES = f"Lazy writes ({LIM.window})"
FAST_SCRAPE, BUSY_FROM = 15, 20 * 60
PENDING_AT = BUSY_FROM + 2 * SCRAPE_SECONDS  # two evaluations in: the alert waits out its for: time
FIRING_AT = PENDING_AT + duration_seconds(LIM.memory.lazy_writes_per_second.for_)


def lazy_writer(pages_per_second: float) -> list[dict[str, str]]:
    """Lazy writes quiet until BUSY_FROM, then at `pages_per_second`, until after FIRING_AT."""
    quiet, busy = BUSY_FROM // FAST_SCRAPE, int(FIRING_AT - BUSY_FROM) // FAST_SCRAPE + 4
    step = number(pages_per_second * FAST_SCRAPE)
    counter = f'mssql_lazy_writes_total{{job="{JOB}",instance="{INSTANCE}"}}'
    return [{"series": counter, "values": f"0x{quiet} {step}+{step}x{busy}"}]


BUSY = 2 * LIM.memory.lazy_writes_per_second.max
# name: (its series, the sample interval, when the panels are read, the checks)
ALERT_SCENARIOS: dict[str, tuple[list[dict[str, str]], float, list[Check]]] = {
    "lazy writes over the limit, their alert pending": (
        lazy_writer(BUSY),
        PENDING_AT,
        [(LAZY_WRITES, None, {RED: 1}), ("Firing alerts", None, {ORANGE: 1})],
    ),
    "lazy writes over the limit, their alert firing": (
        lazy_writer(BUSY),
        FIRING_AT,
        [(LAZY_WRITES, None, {RED: 1}), ("Firing alerts", None, {RED: 1})],
    ),
    "a quiet lazy writer": (
        lazy_writer(0),
        FIRING_AT,
        [(LAZY_WRITES, None, {GREEN: 1}), ("Firing alerts", None, {GREEN: 1})],
    ),
}


# One 64 GiB NUMA node (floor: 16 steps of 300 s = 4,800 s) keeping pages for 1,000 s.
NODE_PAGES = 64 * 2**30 / LIM.page_bytes
PLE = "Worst PLE ÷ floor"


def numa_node(up_seconds: float) -> list[dict[str, str]]:
    """The node, on an instance started `up_seconds` before the evaluation."""
    return [
        gauge("mssql_buffer_node_page_life_expectancy_seconds", 1000, ',node="0"'),
        gauge("mssql_buffer_node_database_pages", NODE_PAGES, ',node="0"'),
        gauge("mssql_start_time_seconds", EVAL_SECONDS - up_seconds),
    ]


SCENARIOS |= {
    # Up 10 minutes: PLE cannot exceed the uptime yet, the alert waits, and so does the colour.
    "a node warming up after a restart": (
        numa_node(600),
        [(PLE, None, {TEXT: 1}), ("Firing alerts", None, {GREEN: 1})],
    ),
    "a warmed-up node under its floor": (
        numa_node(10**6),
        [(PLE, None, {RED: 1}), ("Firing alerts", None, {RED: 1})],
    ),
}


def test_the_scenarios_are_what_they_say():
    """The pools' figures, worked out by hand from their series: the oracle the colours rest on."""
    assert WORN.share == pytest.approx(1.33, abs=0.01)
    assert WORN.remaining / YEAR == pytest.approx(1.82, abs=0.01)
    assert WORN.life_left / YEAR == pytest.approx(3.06, abs=0.01)
    assert WRITTEN_BEFORE.share < END.budget_high_share
    assert END.remaining_warning_seconds < WRITTEN_BEFORE.remaining < WRITTEN_BEFORE.life_left
    assert END.budget_high_share < RETIRED_FIRST.share < END.exhaustion_share
    assert 0 < RETIRED_FIRST.life_left < RETIRED_FIRST.remaining < END.remaining_warning_seconds
    assert KEPT_PAST.share < END.budget_high_share
    assert KEPT_PAST.life_left < 0 < END.remaining_critical_seconds < KEPT_PAST.remaining
    assert KEPT_PAST.remaining < END.remaining_warning_seconds
    assert TEMPDB.headroom_critical_share < 0.5 and TEMPDB.headroom_warning_share < 0.5
    ple = LIM.memory.page_life_expectancy
    steps = NODE_PAGES * LIM.page_bytes / ple.buffer_pool_bytes_per_step
    floor = max(steps * ple.seconds_per_buffer_pool_bytes, ple.floor_seconds)
    assert 600 < 1000 < floor < 10**6  # up 600 s: warming; 1000 s: under the floor


def expr_tests(checks: list[Check], at: float) -> list[dict[str, Any]]:
    return [
        {
            "expr": shown_colours(title, column),
            "eval_time": f"{number(at)}s",
            "exp_samples": [
                {"labels": f'{{code="{CODES[colour]}"}}', "value": count} for colour, count in colours.items()
            ],
        }
        for title, column, colours in checks
    ]


def promtool_test() -> dict[str, Any]:
    tests = [
        {
            "name": name,
            "interval": f"{SCRAPE_SECONDS}s",
            "input_series": series,
            "promql_expr_test": expr_tests(checks, EVAL_SECONDS),
        }
        for name, (series, checks) in SCENARIOS.items()
    ]
    tests += [
        {
            "name": name,
            "interval": f"{FAST_SCRAPE}s",
            "input_series": series,
            "promql_expr_test": expr_tests(checks, at),
        }
        for name, (series, at, checks) in ALERT_SCENARIOS.items()
    ]
    return {
        "rule_files": [str(RECORDING_RULES), str(ALERT_RULES)],
        "evaluation_interval": f"{SCRAPE_SECONDS}s",
        # Alerts read this evaluation's recording rules, not the previous one's.
        "group_eval_order": ["mssql.recording", "mssql.recording.long_window", "mssql.alerts"],
        "tests": tests,
    }


@pytest.mark.parametrize("promtool", tools.promtool_versions(), ids=str)
def test_side_by_side_stats_agree(promtool: tools.Versioned, tmp_path: Path):
    tools.check_binary(promtool)
    path = tmp_path / "verdicts.test.yml"
    path.write_text(yaml.safe_dump(promtool_test(), sort_keys=False, width=10_000))
    result = run([promtool.path, "test", "rules", str(path)], timeout=240, cwd=tmp_path)
    # promtool names a failed check by its expression and shows the codes it got: COLOURS decodes them.
    assert result.returncode == 0, f"colour codes: {COLOURS}\n" + output(result)
