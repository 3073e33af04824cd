"""Microsoft's ODBC Driver 18, installed from PyPI (the `msodbc` extra), against the stand-in (issue 35).

What Driver 18 sends on its own, measured here against the stand-in's request log, and the exposition
being the same series with the same values through both drivers. The tests of what every driver must do
(timeouts, refused logins, reconnects, the prepared batch, named instances, Kerberos) take the `driver`
fixture in their own modules; `pytest -k odbc18` selects both kinds.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyodbc
import pytest
from mssql_memory_exporter.app.build_info import build_info_families
from mssql_memory_exporter.config import driver_kind, resolve_driver
from mssql_memory_exporter.connection import msodbc

from tests.conftest import TEST_PASSWORD, exposition, require_odbc18, samples_of, scrape, value
from tests.timeouts import PATIENT_SECONDS

# Series that say how the scrape went rather than what the server answered.
TIMING = ("mssql_scrape_duration_seconds", "mssql_exporter_collector_duration_seconds")
SYS_INFO = "SELECT N'sys_info' AS section, cpu_count FROM sys.dm_os_sys_info"


def connect(s, driver: str) -> pyodbc.Connection:
    return pyodbc.connect(
        f"DRIVER={{{driver}}};SERVER=tcp:127.0.0.1,{s.port};UID=exporter;PWD={TEST_PASSWORD};Encrypt=no;",
        autocommit=True,
        timeout=int(PATIENT_SECONDS),
    )


def test_odbc18_is_the_packaged_driver_by_its_path_and_auto_prefers_it():
    driver = require_odbc18()
    packaged = msodbc.packaged_driver()
    assert packaged is not None and driver == str(packaged.path)
    assert packaged.path.is_file() and packaged.version.startswith("18.")
    assert driver_kind(driver) == "odbc18"
    assert resolve_driver("auto", msodbc.with_packaged(["FreeTDS"])) == driver
    # A Driver 18 registered with unixODBC (Microsoft's apt package) comes first and so is preferred.
    registered = "ODBC Driver 18 for SQL Server"
    assert resolve_driver("auto", msodbc.with_packaged(["FreeTDS", registered])) == registered


@pytest.mark.parametrize(
    ("os_release", "family"),
    [
        ('ID=debian\nVERSION_ID="12"\n', "debian_ubuntu"),
        ("ID=ubuntu\nID_LIKE=debian\n", "debian_ubuntu"),
        ('ID="rocky"\nID_LIKE="rhel centos fedora"\n', "rhel"),
        ('ID="sles"\n', "suse"),
        ("ID=alpine\n", "alpine"),
        ('ID=linuxmint\nID_LIKE="ubuntu debian"\n', "debian_ubuntu"),
        ("", "debian_ubuntu"),
    ],
)
def test_odbc18_wheel_build_chosen_by_os_release(os_release, family):
    assert msodbc.family_for(os_release) == family


def test_odbc18_library_lookup_by_machine(tmp_path: Path):
    lib = tmp_path / "linux" / "rhel" / "aarch64" / "lib"
    lib.mkdir(parents=True)
    (lib / "libmsodbcsql-18.6.so.2.1").write_bytes(b"")
    assert msodbc.library_in(tmp_path, "rhel", "arm64") == lib / "libmsodbcsql-18.6.so.2.1"
    assert msodbc.library_in(tmp_path, "rhel", "x86_64") is None
    assert driver_kind("/x/libmsodbcsql-17.10.so.6.1") == "odbc17"


def test_odbc18_named_with_its_version_in_build_info_and_version():
    require_odbc18()
    packaged = msodbc.packaged_driver()
    assert packaged is not None
    samples = samples_of(exposition(build_info_families()))
    [labels] = [dict(k[1]) for k in samples if k[0] == "mssql_exporter_build_info"]
    assert f"ODBC Driver 18 for SQL Server {packaged.version} (mssql-python-odbc)" in labels["driver"]
    result = subprocess.run(
        [sys.executable, "-m", "mssql_memory_exporter", "--version"],
        capture_output=True, text=True, timeout=120, check=False, env=dict(os.environ),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert f"ODBC Driver 18 for SQL Server {packaged.version}" in result.stdout


def test_odbc18_registers_nothing_with_the_system():
    """The driver goes by its path: pyodbc.drivers() (unixODBC's registry) does not list it, and the
    exporter's process environment names no private odbcinst.ini."""
    driver = require_odbc18()
    assert driver not in pyodbc.drivers()
    assert "ODBCSYSINI" not in os.environ and "ODBCINSTINI" not in os.environ


def test_odbc18_type_info_rpcs_are_answered_as_sql_server_does(standin):
    """Driver 18 asks for type information as RPCs by name, where FreeTDS sends batches; the stand-in
    answered those with 2812 (no such procedure) until it learnt them."""
    s = standin("healthy-oltp")
    cnxn = connect(s, require_odbc18())
    try:
        session = s.server.sessions[-1]
        assert session.requests and set(session.requests) == {"[sys].sp_datatype_info_100"}
        assert session.unknown_rpcs == []
    finally:
        cnxn.close()
    assert s.server.errors == []


def test_odbc18_prepared_statements_as_driver_18_sends_them(standin):
    """What pyodbc + Driver 18.6 do with a parameterised statement executed three times on one cursor:
    sp_prepexec each time (pyodbc binds the parameters again, and Driver 18 prepares again after a new
    bind, keeping the older handles), one sp_unprepare when the cursor closes. As with FreeTDS, nothing
    reuses a handle, which is why the exporter calls sp_prepexec/sp_execute from its own T-SQL."""
    s = standin("healthy-oltp")
    s.handler.strict = False
    cnxn = connect(s, require_odbc18())
    try:
        session = s.server.sessions[-1]
        session.requests.clear()
        cursor = cnxn.cursor()
        sql = "SELECT N'sys_info' AS section, cpu_count FROM sys.dm_os_sys_info WHERE ? = 1"
        for _ in range(3):
            rows = cursor.execute(sql, 1).fetchall()
            assert rows and rows[0][0] == "sys_info"
        assert session.requests == ["sp_prepexec"] * 3
        cursor.close()
        assert session.requests[-1] == "sp_unprepare" and session.prepares == 3
    finally:
        cnxn.close()


def test_odbc18_exposition_equals_freetds_for_the_same_scenario(standin, scraper_for):
    """Same scenario, same clock, two drivers: the same series with the same values (timings aside)."""
    s = standin("healthy-oltp")
    got = {}
    scrapers = {}
    for driver in ("freetds", "odbc18"):
        if driver == "odbc18":
            require_odbc18()
        config = s.config(driver=driver)
        scrapers[driver] = (scraper_for(config), config)
    for _ in range(2):  # the second scrape has counter rates' second point and the fast batch
        s.clock.advance(15)
        for driver, (scraper, config) in scrapers.items():
            got[driver] = {k: v for k, v in scrape(scraper, config).items() if k[0] not in TIMING}
    assert value(got["odbc18"], "mssql_up") == 1
    assert len(got["odbc18"]) > 250  # 309 series less the timings at healthy-oltp
    assert got["odbc18"] == got["freetds"]
    assert s.server.errors == []


def test_odbc18_query_timeout_sends_attention_and_the_connection_stays_usable(standin):
    """A batch answered after the query timeout: Driver 18 cancels it with an ATTENTION, the stand-in
    acknowledges, the driver raises HYT00 and the connection answers the next batch."""
    s = standin("healthy-oltp")
    s.handler.strict = False
    cnxn = connect(s, require_odbc18())
    try:
        cnxn.timeout = 1
        session = s.server.sessions[-1]
        s.handler.faults.delay_seconds = 3
        with pytest.raises(pyodbc.Error) as raised:
            cnxn.cursor().execute(SYS_INFO).fetchall()
        assert raised.value.args[0] == "HYT00" and "Query timeout expired" in str(raised.value)
        assert session.requests[-1] == "attention"
        s.handler.faults.delay_seconds = 0
        rows = cnxn.cursor().execute(SYS_INFO)
        assert rows.fetchall()[0][0] == "sys_info"
    finally:
        cnxn.close()


def test_odbc18_hung_batch_times_out_and_the_connection_is_dead(standin):
    """A server that swallows the batch and the ATTENTION: HYT00, and the connection is not reused."""
    s = standin("healthy-oltp")
    s.handler.strict = False
    cnxn = connect(s, require_odbc18())
    try:
        cnxn.timeout = 1
        session = s.server.sessions[-1]
        s.handler.faults.hang_batch = True
        with pytest.raises(pyodbc.Error) as raised:
            cnxn.cursor().execute(SYS_INFO).fetchall()
        assert raised.value.args[0] == "HYT00", raised.value
        assert session.closed or session.requests[-1] == "batch"
    finally:
        cnxn.close()
