"""Custom collectors: the refusals at load (each naming file, collector and field) and, on rows the
stand-in's handler computes in process (strict SQL check and interpreter), what a scrape does with them:
failure isolation, the row limit, min_interval, reload, collect[], platforms and versions.

Each test fails on the code before custom collectors: the config refused `custom_collectors:` as an
unknown key, so nothing here could load.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from mssql_memory_exporter.collectors import custom as runtime
from mssql_memory_exporter.config import ConfigError, parse_config
from mssql_memory_exporter.scrape.scraper import Outcome
from mssql_memory_exporter.web.requests import BadRequest, probe_request

from tests.conftest import PASSWORD_ENV
from tests.custom_fixtures import WAITS, Offline, config_with, custom, enabled, names, success

WAIT_TYPES = 15  # rows of sys.dm_os_wait_stats in healthy-oltp


def refusal(collectors: list[dict], **top: object) -> str:
    with pytest.raises(ConfigError) as caught:
        config_with(collectors, **top)
    return str(caught.value)


def metric(**changes: object) -> list[dict]:
    return [{**WAITS["metrics"][0], **changes}]


@pytest.mark.parametrize(
    ("changes", "field", "words"),
    [
        ({"query": "SELECT 1 AS x\nGO\nSELECT 2 AS y"}, "query", "GO line"),
        ({"query": "SELECT 1 AS x\n  go 5  \n"}, "query", "GO line"),
        (
            {"metrics": metric(value_column="wait_count")},
            "metrics.0.value_column",
            "not among the query's columns",
        ),
        (
            {"metrics": metric(label_columns=["waits"])},
            "metrics.0.label_columns",
            "not among the query's columns",
        ),
        (
            {"metrics": metric(name="sqlserver_waits_total")},
            "metrics.0.name",
            "does not start with 'mssql_custom_'",
        ),
        ({"metrics": metric(name="mssql_custom_waits")}, "metrics.0.name", "must end in _total"),
        ({"metrics": metric(type="gauge")}, "metrics.0.name", "ends in _total"),
        ({"metrics": metric(static_labels={"le": "x"})}, "metrics.0.static_labels", "label le is reserved"),
        ({"metrics": metric(static_labels={"job": "x"})}, "metrics.0.static_labels", "label job is reserved"),
        ({"metrics": metric(static_labels={"wait_type": "x"})}, "metrics.0.static_labels", "given twice"),
        ({"name": "buffer_manager"}, "name", "built-in collector's name"),
        ({"columns": ["wait_type", "WAIT_TYPE", "waiting_tasks_count"]}, "columns", "names a column twice"),
    ],
)
def test_a_bad_declaration_is_refused_naming_file_collector_and_field(
    changes: dict, field: str, words: str
) -> None:
    text = refusal([{**WAITS, **changes}])
    name = changes.get("name", "waits")
    assert f"custom.yml: custom_collectors.0 ({name}): {field}: " in text, text
    assert words in text, text


@pytest.mark.parametrize(
    ("changes", "where"),
    [
        ({"name": "Waits"}, "custom_collectors.0 (Waits): name"),
        ({"metrics": metric(name="mssql custom")}, "custom_collectors.0 (waits): metrics.0.name"),
        (
            {"metrics": metric(static_labels={"bad-label": "x"})},
            "custom_collectors.0 (waits): metrics.0.static_labels.bad-label",
        ),
        ({"row_limit": 0}, "custom_collectors.0 (waits): row_limit"),
        ({"min_version": 2018}, "custom_collectors.0 (waits): min_version"),
        ({"platforms": ["rds"]}, "custom_collectors.0 (waits): platforms.0"),
        ({"columns": []}, "custom_collectors.0 (waits): columns"),
    ],
)
def test_invalid_names_and_values_are_refused_by_field(changes: dict, where: str) -> None:
    assert f"custom.yml: {where}: " in refusal([{**WAITS, **changes}])


def test_a_metric_name_taken_by_a_built_in_or_another_collector_is_refused() -> None:
    built_in = refusal(
        [custom("x", metrics=metric(name="mssql_up", type="gauge"))], custom_metric_prefix="mssql_"
    )
    assert "custom_collectors.0 (x): metrics.0.name: mssql_up is a built-in metric" in built_in
    twice = refusal([custom("a"), custom("b", metrics=metric(name="mssql_custom_a_total"))])
    assert (
        "custom_collectors.1 (b): metrics.0.name: mssql_custom_a_total is already declared in custom.yml"
        in twice
    )
    same_name = refusal([custom("a"), custom("a", metrics=metric(name="mssql_custom_other_total"))])
    assert "custom_collectors.1 (a): name: a is already declared in custom.yml" in same_name


def test_a_site_prefix_is_accepted_beside_the_default() -> None:
    config = config_with(
        [custom("a", metrics=metric(name="acme_sql_waits_total")), custom("b")],
        custom_metric_prefix="acme_sql_",
    )
    assert [q.name for q in config.custom_queries] == ["a", "b"]


def test_a_custom_label_named_like_a_target_label_is_refused() -> None:
    with pytest.raises(ConfigError, match="label team is also a constant label of target standin"):
        config_with(
            [custom("a", metrics=metric(name="mssql_custom_a_total", static_labels={"team": "x"}))],
            target={"labels": {"team": "dba"}},
        )


def test_collector_files_are_read_by_glob_and_their_errors_name_the_file(tmp_path: Path) -> None:
    import yaml

    (tmp_path / "collectors.d").mkdir()
    (tmp_path / "collectors.d" / "a.yml").write_text(yaml.safe_dump({"collectors": [custom("a")]}))
    (tmp_path / "collectors.d" / "b.yml").write_text(yaml.safe_dump({"collectors": [custom("b")]}))
    config_file = tmp_path / "exporter.yml"
    base = {
        "auth_modules": {"m": {"username": "u", "password_env": PASSWORD_ENV}},
        "targets": {"t": {"host": "h", "auth_module": "m", "collectors": {"exclude": ["b"]}}},
        "collector_files": ["collectors.d/*.yml"],
    }
    import os

    os.environ[PASSWORD_ENV] = "x"
    config = parse_config(base, source=str(config_file), base_dir=tmp_path)
    assert [q.name for q in config.custom_queries] == ["a", "b"]
    assert "a" in config.targets["t"].enabled_collectors and "b" not in config.targets["t"].enabled_collectors
    bad = tmp_path / "collectors.d" / "b.yml"
    bad.write_text(yaml.safe_dump({"collectors": [custom("b", metrics=metric(value_column="nope"))]}))
    with pytest.raises(ConfigError) as caught:
        parse_config(base, source=str(config_file), base_dir=tmp_path)
    assert f"{bad}: collectors.0 (b): metrics.0.value_column: nope is not among" in str(caught.value)
    with pytest.raises(ConfigError, match=r"collector_files.0: 'nowhere/\*.yml' matches no file"):
        parse_config(
            {**base, "collector_files": ["nowhere/*.yml"]}, source=str(config_file), base_dir=tmp_path
        )


def test_an_unknown_collector_in_include_lists_the_custom_ones_too() -> None:
    with pytest.raises(ConfigError) as caught:
        config_with([WAITS], target={"collectors": {"include": ["wiats"]}})
    assert "targets.standin.collectors.include.0: unknown collector 'wiats'" in str(caught.value)
    assert str(caught.value).rstrip().endswith("waits")


# ------------------------------------------------------------------ scrape time, on the handler's rows


def test_a_custom_collector_exports_its_rows_beside_the_built_in_ones() -> None:
    offline = Offline(config_with([WAITS]))
    samples = offline.scrape()
    assert success(samples, "waits") == 1.0 and enabled(samples, "waits") == 1.0
    key = ("mssql_custom_waits_total", (("source", "custom"), ("wait_type", "PAGEIOLATCH_SH")))
    assert samples[key] == 12 * 60  # the scenario's rate of 12 a second, 60 s in
    assert success(samples, "buffer_manager") == 1.0


def test_a_failing_custom_collector_fails_alone() -> None:
    wrong_column = custom(
        "wrong",
        columns=["wait_type", "waiting_tasks", "wait_time_ms"],
        metrics=metric(name="mssql_custom_wrong_total", value_column="waiting_tasks"),
    )
    unknown_sql = custom(
        "unknown",
        query="SELECT COUNT(*) AS n FROM sys.dm_os_wait_stats",
        columns=["n"],
        metrics=metric(name="mssql_custom_unknown", type="gauge", value_column="n", label_columns=[]),
    )
    offline = Offline(config_with([wrong_column, WAITS, unknown_sql]))
    offline.instance.denied.add("sys.dm_os_wait_stats")
    outcomes: dict[str, Outcome] = {}
    samples = offline.scrape(outcomes=outcomes)
    assert success(samples, "waits") == 0.0 and success(samples, "wait_stats") == 0.0
    assert outcomes["waits"].error_number == 300
    offline.instance.denied.discard("sys.dm_os_wait_stats")
    samples = offline.scrape(outcomes=outcomes)
    assert success(samples, "wrong") == 0.0
    assert (
        "column waiting_tasks declared in `columns` is not in the query's answer" in outcomes["wrong"].reason
    )
    assert success(samples, "unknown") == 0.0 and outcomes["unknown"].error_number == 208
    assert success(samples, "waits") == 1.0 and success(samples, "buffer_manager") == 1.0
    assert "mssql_custom_wrong_total" not in names(samples) and "mssql_custom_unknown" not in names(samples)
    assert outcomes["waits"] == Outcome("ok", rows=WAIT_TYPES, series=WAIT_TYPES)


def test_over_the_row_limit_a_collector_fails_naming_it_and_exports_nothing() -> None:
    offline = Offline(config_with([{**WAITS, "row_limit": 5}, custom("roomy", row_limit=WAIT_TYPES)]))
    outcomes: dict[str, Outcome] = {}
    samples = offline.scrape(outcomes=outcomes)
    assert success(samples, "waits") == 0.0
    assert "more than its row_limit of 5 rows" in outcomes["waits"].reason
    assert "mssql_custom_waits_total" not in names(samples)
    assert success(samples, "roomy") == 1.0  # as many rows as its limit
    assert "SET ROWCOUNT 6" in offline.connection.sent[-1]  # the server stops at one row over the limit


def test_lock_timeout_is_set_inside_the_section_only() -> None:
    sql = runtime.section_sql(
        Offline(config_with([{**WAITS, "lock_timeout_seconds": 2.5}])).config.custom_queries[0]
    )
    assert "SET LOCK_TIMEOUT 2500;" in sql and sql.rstrip().endswith("AS custom_section;")


def test_min_interval_serves_the_last_result_between_runs_with_its_age() -> None:
    offline = Offline(config_with([{**WAITS, "min_interval_seconds": 300}, custom("every")]))
    first = offline.scrape()
    age = ("mssql_exporter_collector_result_age_seconds", (("collector", "waits"),))
    assert first[age] == 0.0
    key = ("mssql_custom_waits_total", (("source", "custom"), ("wait_type", "PAGEIOLATCH_SH")))
    assert "custom:waits" in offline.connection.sent[-1]
    offline.instance.clock.advance(60)
    second = offline.scrape()
    assert "custom:waits" not in offline.connection.sent[-1] and "custom:every" in offline.connection.sent[-1]
    assert second[key] == first[key] and second[age] >= 0.0 and success(second, "waits") == 1.0
    memo = offline.scraper._state(offline.config.targets["standin"]).memo
    for entry in [k for k in memo if k.startswith("custom:waits:")]:
        memo[entry] = runtime._Cached(memo[entry].at - 301, 300, memo[entry].samples)  # five minutes on
    third = offline.scrape()
    assert "custom:waits" in offline.connection.sent[-1]
    assert third[key] == 12 * 120 and third[age] == 0.0


def test_reload_swaps_the_custom_collectors_on_the_same_connection() -> None:
    offline = Offline(config_with([WAITS]))
    assert success(offline.scrape(), "waits") == 1.0
    offline.reload(config_with([custom("renamed")]))
    samples = offline.scrape()
    assert success(samples, "renamed") == 1.0 and success(samples, "waits") is None
    assert "mssql_custom_renamed_total" in names(samples) and "mssql_custom_waits_total" not in names(samples)


def test_collect_narrows_to_a_custom_collector_and_refuses_an_unknown_one() -> None:
    config = config_with([WAITS, custom("other")])
    _target, chosen = probe_request("target=standin&collect[]=waits", config)
    assert chosen == frozenset({"waits"})
    samples = Offline(config).scrape(collect=sorted(chosen))
    assert success(samples, "waits") == 1.0 and success(samples, "other") is None
    assert enabled(samples, "other") == 0.0 and success(samples, "buffer_manager") is None
    with pytest.raises(BadRequest, match="unknown collector 'wiats'"):
        probe_request("target=standin&collect[]=wiats", config)


def test_platforms_and_min_version_leave_a_collector_out() -> None:
    offline = Offline(
        config_with(
            [{**WAITS, "platforms": ["azure_sql_database"]}, custom("new", min_version=2025), custom("ok")]
        ),
        scenario="healthy-oltp",
    )
    outcomes: dict[str, Outcome] = {}
    samples = offline.scrape(outcomes=outcomes)
    assert outcomes["waits"] == Outcome("left out", "runs on azure_sql_database only")
    assert outcomes["new"].status == "left out" and "needs SQL Server 2025 or later" in outcomes["new"].reason
    assert enabled(samples, "waits") == 0.0 and success(samples, "waits") is None
    assert success(samples, "ok") == 1.0


def test_a_collector_whose_required_object_is_missing_is_left_out() -> None:
    offline = Offline(config_with([{**WAITS, "requires": ["msdb.dbo.sysmail_allitems"]}]))
    outcomes: dict[str, Outcome] = {}
    samples = offline.scrape(outcomes=outcomes)
    assert outcomes["waits"] == Outcome("left out", "this server does not have msdb.dbo.sysmail_allitems")
    assert enabled(samples, "waits") == 0.0


def test_a_reload_with_the_same_custom_collectors_keeps_targets_equal() -> None:
    # Targets compare their collector list: were a custom record never equal to its twin, every reload
    # would drop every target's cached readings (volume lookups, pool totals, min_interval results).
    first, second = config_with([WAITS]), config_with([WAITS])
    assert first.targets["standin"] == second.targets["standin"]
    assert config_with([custom("other")]).targets["standin"] != first.targets["standin"]
