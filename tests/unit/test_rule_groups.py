"""The recording rules split by cost (alerts/rule_groups.py): which rules go to the long-window group,
its interval from the spec (a site may override it), and the bound that keeps its series from going
stale. The split itself running on a real Prometheus is bench/rule_groups.py (promtool ignores a
group's interval)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from alerts.generate import recording_rules, render
from alerts.rule_groups import FAST_GROUP, LONG_WINDOW_GROUP, long_window_records, window_seconds
from alerts.spec import SpecError, load, load_site


def groups_of(spec) -> dict[str, dict]:
    text = render(spec)["mssql.recording.rules.yml"]
    return {group["name"]: group for group in yaml.safe_load(text)["groups"]}


def test_rules_over_a_day_or_more_and_those_built_on_them_are_evaluated_every_two_minutes() -> None:
    spec = load()
    groups = groups_of(spec)
    assert list(groups) == [FAST_GROUP, LONG_WINDOW_GROUP]
    assert "interval" not in groups[FAST_GROUP]  # the global evaluation interval: the scrape cadence
    assert groups[LONG_WINDOW_GROUP]["interval"] == "2m"
    slow = {rule["record"] for rule in groups[LONG_WINDOW_GROUP]["rules"]}
    fast = groups[FAST_GROUP]["rules"]
    assert "pool:mssql_ssd_written_bytes:rate7d" in slow
    assert "instance:mssql_tempdb_written_bytes:rate1d" in slow
    assert "pool:mssql_ssd_endurance_remaining_seconds" in slow  # built on the 7d rate
    for rule in fast:
        assert window_seconds(rule["expr"]) < 86400, rule["record"]
        assert not any(name in rule["expr"] for name in slow), rule["record"]
    # Nothing lost, nothing twice, order kept within each group.
    every = [rule["record"] for rule in recording_rules(spec)]
    assert sorted(every) == sorted([r["record"] for r in fast] + sorted(slow))


def test_window_seconds_reads_ranges_and_subqueries() -> None:
    assert window_seconds("rate(x[5m])") == 300
    assert window_seconds("min_over_time(timestamp(x)[7d1h:1h]) + rate(y[1d])") == 7 * 86400 + 3600
    assert window_seconds("x + y") == 0
    rules = [
        {"record": "a:long", "expr": "rate(x[3d])"},
        {"record": "a:long_built", "expr": "a:long * 2"},
        {"record": "a:long_built:more", "expr": "a:long_built + 1"},
        {"record": "a:short", "expr": "rate(x[5m]) + a:longer_name_unrelated"},
    ]
    assert long_window_records(rules, "1d") == {"a:long", "a:long_built", "a:long_built:more"}


def test_end_to_end_windows_keep_the_split_without_the_interval() -> None:
    groups = groups_of(load().with_overrides("10s", "30s"))
    assert "interval" not in groups[LONG_WINDOW_GROUP]
    assert {r["record"] for r in groups[LONG_WINDOW_GROUP]["rules"]} == {
        r["record"] for r in groups_of(load())[LONG_WINDOW_GROUP]["rules"]
    }


def test_a_site_sets_the_interval_and_a_stale_one_is_refused_by_name(tmp_path: Path) -> None:
    site = tmp_path / "site.yml"
    site.write_text("rule_groups:\n  long_window_interval: 1m\n")
    assert groups_of(load_site(site))[LONG_WINDOW_GROUP]["interval"] == "1m"
    site.write_text("rule_groups:\n  long_window_interval: 5m\n")
    with pytest.raises(SpecError, match=r"rule_groups\.long_window_interval.*at most 4m"):
        load_site(site)
