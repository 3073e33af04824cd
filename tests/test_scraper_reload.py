"""Scraper.reload: which per-target state a config reload keeps (issue 25). Real FreeTDS logins against
the stand-in, which counts them; the HTTP side is in tests/test_lifecycle.py."""

from __future__ import annotations

from tests.conftest import make_config, scrape, value


def test_what_a_reload_keeps_and_drops(standin, scraper_for):
    first, second = standin("healthy-oltp"), standin("healthy-oltp")
    targets = {
        "same": first.target_yaml(),
        "relabelled": first.target_yaml(),
        "moved": first.target_yaml(),
        "removed": first.target_yaml(),
    }
    config = make_config(targets)
    scraper = scraper_for(config)
    for name in targets:
        assert value(scrape(scraper, config, name), "mssql_up") == 1
    assert first.handler.login_attempts == 4
    before = {name: scraper._states[name] for name in targets}
    for state in before.values():
        state.memo["probe-of-the-test"] = True  # stands for volume totals, pool sums, file lookups

    targets = {
        "same": first.target_yaml(),
        "relabelled": first.target_yaml(labels={"rack": "r2"}),
        "moved": second.target_yaml(),
        "added": second.target_yaml(),
    }
    new = make_config(targets)
    summary = scraper.reload(new)
    assert (summary.unchanged, summary.kept_connection) == (["same"], ["relabelled"])
    assert (summary.changed, summary.removed, summary.added) == (["moved"], ["removed"], ["added"])

    states = scraper._states
    assert states["same"] is before["same"] and states["same"].memo.get("probe-of-the-test")
    # Same connection and back-off, fresh readings: the labels (and anything else) may have changed.
    assert states["relabelled"].connection is before["relabelled"].connection
    assert states["relabelled"].backoff is before["relabelled"].backoff
    assert "probe-of-the-test" not in states["relabelled"].memo
    assert "moved" not in states and "removed" not in states
    # The retired connections were closed at once (no scrape held them).
    assert before["moved"].connection._cnxn is None and before["removed"].connection._cnxn is None

    for name in targets:
        labels = new.targets[name].labels
        assert value(scrape(scraper, new, name), "mssql_up", **labels) == 1
    assert first.handler.login_attempts == 4  # same and relabelled kept their sessions
    assert second.handler.login_attempts == 2  # moved and added logged in there
    assert value(scrape(scraper, new, "relabelled"), "mssql_up", rack="r2") == 1


def test_a_probe_with_a_target_from_before_the_reload_gets_a_connection_of_its_own(standin, scraper_for):
    first, second = standin("healthy-oltp"), standin("healthy-oltp")
    old = make_config({"sql": first.target_yaml()})
    scraper = scraper_for(old)
    assert value(scrape(scraper, old, "sql"), "mssql_up") == 1
    new = make_config({"sql": second.target_yaml()})
    scraper.reload(new)
    # A request that picked its target from the old config just before the reload: served from the old
    # server on a one-off connection, closed after, and the new config's state is not disturbed.
    assert value(scrape(scraper, old, "sql"), "mssql_up") == 1
    assert first.handler.login_attempts == 2 and "sql" not in scraper._states
    assert value(scrape(scraper, new, "sql"), "mssql_up") == 1
    assert second.handler.login_attempts == 1
    assert value(scrape(scraper, new, "sql"), "mssql_up") == 1
    assert second.handler.login_attempts == 1


def _target(host: str, **extra: object) -> dict[str, object]:
    return {"host": host, "port": 1433, "auth_module": "standin", "encryption": "off", **extra}


def test_the_reload_summary_diffs_the_configs_not_the_probed_targets(scraper_for):
    # Issue 36 item 10: the summary was counted from the targets probed so far, so a reload before any
    # probe named every target "added" and none removed or changed. Nothing is probed here.
    old = make_config(
        {"same": _target("a"), "relabelled": _target("a"), "moved": _target("a"), "gone": _target("a")}
    )
    scraper = scraper_for(old)
    new = make_config(
        {
            "same": _target("a"),
            "relabelled": _target("a", labels={"rack": "r2"}),
            "moved": _target("b"),
            "new": _target("b"),
        }
    )
    summary = scraper.reload(new)
    assert (summary.added, summary.removed, summary.changed) == (["new"], ["gone"], ["moved"])
    assert (summary.kept_connection, summary.unchanged) == (["relabelled"], ["same"])
    assert (
        summary.text()
        == "added 1 (new); removed 1 (gone); reconnecting 1 (moved); refreshed 1 (relabelled); unchanged 1"
    )


def test_the_reload_summary_of_a_large_fleet_names_the_first_targets_and_counts_the_rest(scraper_for):
    scraper = scraper_for(make_config({"t00": _target("a")}))
    summary = scraper.reload(make_config({f"t{i:02d}": _target("a") for i in range(25)}))
    assert summary.text() == "added 24 (t01,t02,t03,t04,t05,t06,t07,t08,t09,t10 and 14 more); unchanged 1"


def test_a_lone_surrogate_anywhere_in_the_config_is_refused_naming_the_field():
    # Issue 36 item 10: "\ud800" in a label value passed --config.check, then every probe of the target
    # answered 500 (the exposition cannot be encoded).
    import pytest
    from mssql_memory_exporter.config import ConfigError

    with pytest.raises(ConfigError) as info:
        make_config({"sql": _target("a", labels={"rack": "r\ud800"})})
    assert info.value.lines == [
        "test-config: targets.sql.labels.rack: contains a lone surrogate (U+D800 at position 2), which is "
        "not valid UTF-8 (a \\u escape of half a pair?)"
    ]
