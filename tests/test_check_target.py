"""`--check-target NAME` against stand-in scenarios over TDS (FreeTDS, the real prepared batch): a
healthy server, a denied view (the GRANT printed), a view the release lacks (left out, named), a custom
collector with a wrong column (failed, the column named), a login that fails; the exit code of each and
no secret in any output. Fails on main, which has no --check-target (argparse exits 2 on the flag)."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
import yaml
from mssql_memory_exporter.app import cli
from mssql_memory_exporter.app.check_target import check, grant_for

from tests.conftest import PASSWORD_ENV, TEST_PASSWORD
from tests.custom_fixtures import WAITS, custom


def run(standin, scenario: str, customs: list[dict] | None = None, **target: object) -> tuple[int, str]:
    server = standin(scenario)
    os.environ[PASSWORD_ENV] = TEST_PASSWORD
    from mssql_memory_exporter.config import parse_config

    config = parse_config(
        {
            "auth_modules": {"standin": {"username": "exporter", "password_env": PASSWORD_ENV}},
            "targets": {"standin": server.target_yaml(**target)},
            "custom_collectors": customs or [],
        },
        source="check.yml",
    )
    server.instance.clock.advance(60)
    out = io.StringIO()
    code = check(config, "standin", out)
    return code, out.getvalue()


def line_of(text: str, collector: str) -> str:
    return next(line for line in text.splitlines() if line.split(":")[0].split()[-1] == collector)


def test_a_healthy_server_is_ok_with_rows_and_series_and_exits_0(standin) -> None:
    code, text = run(standin, "sql2025", [WAITS])
    assert code == 0, text
    assert line_of(text, "buffer_manager").startswith("ok        buffer_manager: ")
    assert "ok        waits (custom): 15 rows, 15 series" in text
    assert TEST_PASSWORD not in text


def test_a_denied_view_fails_with_the_grant_that_fixes_it(standin) -> None:
    server_name = "healthy-oltp"
    code, text = run(standin, server_name, [WAITS], collectors={"exclude": ["memory_health"]})
    assert code == 0, text
    # the same with the view denied
    server = standin(server_name)
    server.instance.denied.add("sys.dm_os_wait_stats")
    os.environ[PASSWORD_ENV] = TEST_PASSWORD
    from mssql_memory_exporter.config import parse_config

    config = parse_config(
        {
            "auth_modules": {"standin": {"username": "exporter", "password_env": PASSWORD_ENV}},
            "targets": {"standin": server.target_yaml()},
        },
        source="check.yml",
    )
    out = io.StringIO()
    assert check(config, "standin", out) == 1
    text = out.getvalue()
    assert line_of(text, "wait_stats").startswith("FAILED    wait_stats: 300: VIEW SERVER STATE permission")
    assert "          fix: GRANT VIEW SERVER PERFORMANCE STATE TO [exporter];" in text  # a 2022 server
    assert line_of(text, "buffer_manager").startswith("ok ")
    assert TEST_PASSWORD not in text


def test_a_view_the_release_lacks_is_left_out_by_name_and_a_wrong_column_fails(standin) -> None:
    wrong = custom(
        "wrong",
        columns=["wait_type", "waiting_tasks", "wait_time_ms"],
        metrics=[
            {**WAITS["metrics"][0], "name": "mssql_custom_wrong_total", "value_column": "waiting_tasks"}
        ],
    )
    code, text = run(standin, "healthy-oltp", [wrong])
    assert code == 1
    assert line_of(text, "memory_health") == (
        "left out  memory_health: this server does not have sys.dm_os_memory_health_history"
    )
    assert (
        "FAILED    wrong (custom): custom collector wrong: column waiting_tasks declared in `columns`" in text
    )
    assert text.rstrip().endswith("target standin: 1 failed")


def test_a_failed_login_fails_the_whole_check_without_a_secret(standin) -> None:
    server = standin("healthy-oltp")
    server.handler.faults.bad_login = True
    os.environ[PASSWORD_ENV] = TEST_PASSWORD
    from mssql_memory_exporter.config import parse_config

    config = parse_config(
        {
            "auth_modules": {"standin": {"username": "exporter", "password_env": PASSWORD_ENV}},
            "targets": {"standin": server.target_yaml()},
        },
        source="check.yml",
    )
    out = io.StringIO()
    assert check(config, "standin", out) == 1
    assert out.getvalue().startswith("target standin: FAILED to read the server: ")
    assert "18456" in out.getvalue() and TEST_PASSWORD not in out.getvalue()


def test_the_flag_reads_the_config_file_and_refuses_an_unknown_target(
    standin, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server = standin("sql2025")
    os.environ[PASSWORD_ENV] = TEST_PASSWORD
    path = tmp_path / "exporter.yml"
    path.write_text(
        yaml.safe_dump(
            {
                "auth_modules": {"standin": {"username": "exporter", "password_env": PASSWORD_ENV}},
                "targets": {"standin": server.target_yaml()},
            }
        )
    )
    assert cli.main(["--check-target", "standin", "--config.file", str(path)]) == 0
    assert "every collector that is on is ok" in capsys.readouterr().out
    assert cli.main(["--check-target", "other", "--config.file", str(path)]) == 2
    assert "no target named 'other'" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("number", "message", "edition", "version", "grant"),
    [
        (
            300,
            "VIEW SERVER STATE permission was denied on object 'server', database 'master'.",
            "3",
            "15.0.2000.5",
            "GRANT VIEW SERVER STATE TO [mon];",
        ),
        (
            300,
            "VIEW SERVER PERFORMANCE STATE permission was denied on object 'server', database 'master'.",
            "3",
            "16.0.1000.6",
            "GRANT VIEW SERVER PERFORMANCE STATE TO [mon];",
        ),
        (
            229,
            "The SELECT permission was denied on the object 'backupset', database 'msdb', schema 'dbo'.",
            "3",
            "16.0.1000.6",
            "USE [msdb]; GRANT SELECT ON [dbo].[backupset] TO [mon];",
        ),
        (
            229,
            "The SELECT permission was denied on the object 'sysjobs', database 'msdb', schema 'dbo'.",
            "8",
            "12.0.2000.8",
            "USE [msdb]; ALTER ROLE [SQLAgentReaderRole] ADD MEMBER [mon];",
        ),
        (208, "Invalid object name 'x'.", "3", "16.0.1000.6", None),
    ],
)
def test_the_grant_names_the_permission_refused(
    number: int, message: str, edition: str, version: str, grant: str | None
) -> None:
    found = grant_for(number, message, "mon", edition, version)
    assert (found.split("  --")[0] if found else None) == grant


def test_custom_collectors_over_tds_across_prepared_executes(standin, scraper_for) -> None:
    """Through FreeTDS and the prepared batch (sp_prepexec, then sp_execute): the markers route a custom
    collector's untagged result set on every execute, and a failing one stays alone."""
    from tests.conftest import scrape

    server = standin("healthy-oltp")
    os.environ[PASSWORD_ENV] = TEST_PASSWORD
    from mssql_memory_exporter.config import parse_config

    wrong = custom(
        "wrong",
        columns=["nope"],
        metrics=[
            {
                **WAITS["metrics"][0],
                "name": "mssql_custom_wrong_total",
                "value_column": "nope",
                "label_columns": [],
            }
        ],
    )
    config = parse_config(
        {
            "auth_modules": {"standin": {"username": "exporter", "password_env": PASSWORD_ENV}},
            "targets": {"standin": server.target_yaml()},
            "custom_collectors": [WAITS, wrong],
        },
        source="check.yml",
    )
    scraper = scraper_for(config)
    key = ("mssql_custom_waits_total", (("source", "custom"), ("wait_type", "PAGEIOLATCH_SH")))
    values = []
    for _ in range(3):
        server.clock.advance(10)
        samples = scrape(scraper, config)
        assert samples[("mssql_exporter_collector_success", (("collector", "waits"),))] == 1.0
        assert samples[("mssql_exporter_collector_success", (("collector", "wrong"),))] == 0.0
        assert samples[("mssql_exporter_collector_success", (("collector", "buffer_manager"),))] == 1.0
        values.append(samples[key])
    assert values[1] - values[0] == values[2] - values[1] == 120  # 12 a second, 10 s apart
    session = server.server.sessions[-1]
    assert 1 <= session.prepares <= 2 and server.server.errors == []  # the later scrapes sent a handle
