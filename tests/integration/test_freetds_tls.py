"""The exporter's certificate checks with FreeTDS, against the stand-in speaking TLS.

FreeTDS verifies only when a freetds.conf section names a CA (see exporter freetds.py and the
measurements in tests/integration/test_tds_protocol.py), so these tests go through the exporter's own
connection
strings and its private freetds.conf: `encryption: require` with the defaults must refuse a server
whose certificate the system does not trust, before the password is sent.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pyodbc
import pytest
from mssql_memory_exporter.connection import freetds

from tests.conftest import TEST_PASSWORD, make_config, scrape, value
from tests.standin.certs import Pem, standard_pki
from tests.standin.handler import ScenarioHandler
from tests.standin.scenario import Clock, Instance, Scenario
from tests.standin.server import StandInServer, tls_context
from tests.timeouts import PATIENT_SECONDS

pytestmark = pytest.mark.skipif(
    "FreeTDS" not in pyodbc.drivers(), reason="FreeTDS ODBC driver not registered"
)

TARGET_METRIC = "mssql_page_life_expectancy_seconds"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Pem]:
    return standard_pki(tmp_path_factory.mktemp("pki"))


@dataclass
class TlsStandIn:
    server: StandInServer
    handler: ScenarioHandler
    instance: Instance

    def target(self, **overrides: object) -> dict[str, object]:
        target: dict[str, object] = {
            "host": "127.0.0.1",
            "port": self.server.port,
            "driver": "freetds",
            "encryption": "require",
            "login_timeout_seconds": PATIENT_SECONDS,  # a TLS handshake in Python is slow under load
            "query_timeout_seconds": PATIENT_SECONDS,
            "auth_module": "standin",
        }
        return {**target, **overrides}


@pytest.fixture
def tls_standin(pki: dict[str, Pem]) -> Iterator[Callable[..., TlsStandIn]]:
    started: list[StandInServer] = []

    def start(cert: str = "server") -> TlsStandIn:
        instance = Instance(Scenario.load("healthy-oltp"), Clock(manual=True))
        handler = ScenarioHandler(instance, user="exporter", password=TEST_PASSWORD)
        server = StandInServer(handler, tls=tls_context(str(pki[cert].cert), str(pki[cert].key)))
        server.start()
        started.append(server)
        return TlsStandIn(server, handler, instance)

    yield start
    for server in started:
        server.stop()


def failure(caplog: pytest.LogCaptureFixture) -> str:
    failed = [r for r in caplog.records if r.getMessage() == "scrape failed"]
    assert failed, [r.getMessage() for r in caplog.records]
    assert failed[-1].target == "standin"
    return str(failed[-1].err)


@pytest.mark.parametrize(("encryption", "tls"), [("require", "full"), ("request", "login")])
def test_certificate_signed_by_the_configured_ca_is_accepted(
    tls_standin, scraper_for, pki, encryption: str, tls: str
):
    s = tls_standin()
    config = make_config({"standin": s.target(encryption=encryption, ca_file=str(pki["ca"].cert))})
    got = scrape(scraper_for(config), config)
    assert value(got, "mssql_up") == 1 and value(got, TARGET_METRIC) == 5400
    assert [session.tls for session in s.server.sessions] == [tls]
    conf = Path(os.environ[freetds.ENV]).read_text()
    assert f"ca file = {pki['ca'].cert}" in conf and f"port = {s.server.port}" in conf


@pytest.mark.parametrize(
    ("cert", "ca", "expected"),
    [
        ("server", None, "not signed by a CA in the system trust store"),  # the defaults
        ("server", "other", "not signed by a CA in {other}"),
        ("wrong-name", "ca", "or not issued for 127.0.0.1"),
    ],
)
def test_untrusted_certificate_fails_the_login_before_the_password_is_sent(
    tls_standin, scraper_for, pki, caplog, cert: str, ca: str | None, expected: str
):
    s = tls_standin(cert)
    fields = {"ca_file": str(pki[ca].cert)} if ca else {}
    config = make_config({"standin": s.target(**fields)})
    got = scrape(scraper_for(config), config)
    assert value(got, "mssql_up") == 0
    err = failure(caplog)
    assert err.startswith("08001 ") and expected.format(other=pki["other"].cert) in err, err
    assert s.handler.logins == 0 and not s.server.sessions[-1].logged_in
    assert TEST_PASSWORD not in err


def test_trust_server_certificate_encrypts_without_checking(tls_standin, scraper_for):
    s = tls_standin("wrong-name")
    config = make_config({"standin": s.target(trust_server_certificate=True)})
    got = scrape(scraper_for(config), config)
    assert value(got, "mssql_up") == 1
    assert [session.tls for session in s.server.sessions] == ["full"]


def test_ca_file_gone_at_login_is_a_clear_failure_then_recovers(
    tls_standin, scraper_for, pki, caplog, tmp_path: Path
):
    s = tls_standin()
    ca = tmp_path / "ca.pem"
    ca.write_bytes(pki["ca"].cert.read_bytes())
    config = make_config({"standin": s.target(ca_file=str(ca))})
    scraper = scraper_for(config)
    assert value(scrape(scraper, config), "mssql_up") == 1
    hidden = ca.rename(tmp_path / "ca.pem.rotating")
    s.instance.restart(drop_sessions=True)  # the next scrape has to log in again
    assert value(scrape(scraper, config), "mssql_up") == 0
    assert failure(caplog) == f"target standin: ca_file {ca} is missing or not readable"
    hidden.rename(ca)
    assert value(scrape(scraper, config), "mssql_up") == 1


def test_freetds_conf_removed_by_a_temp_cleaner_is_written_again(tls_standin, scraper_for, pki, caplog):
    caplog.set_level(logging.INFO)
    s = tls_standin()
    config = make_config({"standin": s.target(ca_file=str(pki["ca"].cert))})
    scraper = scraper_for(config)
    assert value(scrape(scraper, config), "mssql_up") == 1
    conf = Path(os.environ[freetds.ENV])
    conf.unlink()
    conf.parent.rmdir()
    s.instance.restart(drop_sessions=True)
    assert value(scrape(scraper, config), "mssql_up") == 1  # logged in again, still verifying
    assert conf.is_file() and f"ca file = {pki['ca'].cert}" in conf.read_text()
    assert (conf.parent.stat().st_mode & 0o777) == 0o700
    assert len(s.server.sessions) == 2 and s.server.sessions[-1].tls == "full"


def test_only_the_certificate_settings_reach_freetds_conf(tls_standin, scraper_for, pki):
    s = tls_standin()
    config = make_config({"standin": s.target(ca_file=str(pki["ca"].cert))})
    assert value(scrape(scraper_for(config), config), "mssql_up") == 1
    conf = Path(os.environ[freetds.ENV])
    assert TEST_PASSWORD not in conf.read_text()  # credentials stay in the connection string
    assert (conf.stat().st_mode & 0o077) == 0


def test_start_up_names_what_freetds_checks_the_certificate_against(pki, caplog):
    from mssql_memory_exporter.app.cli import _warn_about_drivers

    caplog.set_level(logging.INFO)
    base = {"host": "db.example.org", "driver": "freetds", "auth_module": "standin"}
    config = make_config(
        {
            "own-ca": {**base, "ca_file": str(pki["ca"].cert)},
            "system": base,
            "trusting": {**base, "trust_server_certificate": True},
            "plain": {**base, "encryption": "off"},
        }
    )
    _warn_about_drivers(config)
    lines = {
        r.target: r.ca_file
        for r in caplog.records
        if r.getMessage() == "FreeTDS checks the server certificate"
    }
    assert lines == {"own-ca": str(pki["ca"].cert), "system": "system trust store"}
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_trust_server_certificate_against_a_server_without_tls_says_why(standin, scraper_for, caplog):
    """`trust_server_certificate: true` skips the certificate check, not encryption: against a server
    that offers none, FreeTDS says only "Unable to connect to data source"; the exporter says why."""
    s = standin("healthy-oltp")  # no TLS
    config = make_config({"standin": s.target_yaml(encryption="require", trust_server_certificate=True)})
    got = scrape(scraper_for(config), config)
    assert value(got, "mssql_up") == 0
    err = failure(caplog)
    assert "Unable to connect to data source" in err, err
    assert "the server offers no encryption" in err and "set encryption: off" in err, err
    assert TEST_PASSWORD not in err
