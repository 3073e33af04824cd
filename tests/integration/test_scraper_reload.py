"""Scraper.reload: which per-target state a config reload keeps (issue 25). Real FreeTDS logins against
the stand-in, which counts them; the HTTP side is in tests/integration/test_lifecycle.py."""

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
