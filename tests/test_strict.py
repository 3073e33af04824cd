"""Encryption as SQL Server 2022 enforces it, through Microsoft's ODBC Driver 18 and the exporter (issue 35
section 2): the stand-in speaks TDS 8.0 (TLS first, ALPN tds/8.0), and each way a TLS set-up fails is
reported naming its cause.

Driver 18 on Linux checks a server's certificate with OpenSSL against OpenSSL's default trust store:
the system's CA bundle, or the file the SSL_CERT_FILE environment variable names (measured here: with
SSL_CERT_FILE naming the test CA, strict and require log in; without it the same server is "unable to
get local issuer certificate"). The tests set SSL_CERT_FILE for this process, as a user sets it for the
exporter's (docs/drivers.md).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from mssql_memory_exporter.config import ConfigError

from tests.conftest import TEST_PASSWORD, make_config, require_odbc18, scrape, value
from tests.standin.certs import Pem, issue_server, standard_pki
from tests.standin.handler import ScenarioHandler
from tests.standin.scenario import Clock, Instance, Scenario
from tests.standin.server import TDS8_ALPN, StandInServer, strict_tls_context, tls_context
from tests.timeouts import PATIENT_SECONDS


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Pem]:
    directory = tmp_path_factory.mktemp("strict-pki")
    pems = standard_pki(directory)
    pems["expired"] = issue_server(pems["ca"], directory, "expired", ("localhost",), expired=True)
    pems["stranger"] = issue_server(pems["other"], directory, "stranger", ("localhost",))
    return pems


@pytest.fixture
def trusted_ca(pki: dict[str, Pem], monkeypatch: pytest.MonkeyPatch) -> Path:
    """The test CA trusted the way a user trusts a private CA for Driver 18 alone: SSL_CERT_FILE."""
    monkeypatch.setenv("SSL_CERT_FILE", str(pki["ca"].cert))
    return pki["ca"].cert


@pytest.fixture
def tls_standin(
    pki: dict[str, Pem], standin_parses_the_batch: None
) -> Iterator[Callable[..., StandInServer]]:
    started: list[StandInServer] = []

    def start(cert: str = "server", *, strict: bool = True) -> StandInServer:
        handler = ScenarioHandler(
            Instance(Scenario.load("healthy-oltp"), Clock(manual=True)), "exporter", TEST_PASSWORD
        )
        context = (strict_tls_context if strict else tls_context)(str(pki[cert].cert), str(pki[cert].key))
        server = StandInServer(handler, **({"strict": context} if strict else {"tls": context}))
        server.start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()
        assert server.errors == []


def odbc18_config(server: StandInServer, **target: object):
    require_odbc18()
    return make_config(
        {
            "standin": {
                "host": "localhost",
                "port": server.port,
                "driver": "odbc18",
                "encryption": "strict",
                "login_timeout_seconds": PATIENT_SECONDS,
                "query_timeout_seconds": PATIENT_SECONDS,
                "auth_module": "standin",
                **target,
            }
        }
    )


def failure(scraper_for, config, caplog) -> str:
    with caplog.at_level(logging.WARNING):
        got = scrape(scraper_for(config), config)
    assert value(got, "mssql_up") == 0
    [record] = [r for r in caplog.records if r.getMessage() == "scrape failed"][-1:]
    return str(record.err)


def test_strict_with_odbc18_logs_in_over_tds8(tls_standin, trusted_ca, scraper_for):
    server = tls_standin()
    config = odbc18_config(server)
    got = scrape(scraper_for(config), config)
    assert value(got, "mssql_up") == 1
    assert value(got, "mssql_exporter_collector_success", collector="buffer_manager") == 1
    session = server.sessions[-1]
    assert session.tls == "strict" and session.alpn == TDS8_ALPN


@pytest.mark.parametrize(
    ("cert", "cause"),
    [
        ("stranger", "not signed by a CA this host trusts"),
        ("wrong-name", "does not name localhost"),
        ("expired", "has expired"),
    ],
)
def test_strict_certificate_failures_name_the_cause(
    tls_standin, trusted_ca, scraper_for, caplog, cert, cause
):
    config = odbc18_config(tls_standin(cert))
    err = failure(scraper_for, config, caplog)
    assert cause in err and "certificate verify failed" in err, err


def test_strict_against_a_tds7_only_server_names_the_cause(tls_standin, trusted_ca, scraper_for, caplog):
    server = tls_standin(strict=False)
    err = failure(scraper_for, odbc18_config(server), caplog)
    assert "does not speak TDS 8.0" in err, err
    assert server.sessions[-1].tls_error == "TLS ClientHello (TDS 8.0) on a TDS 7.x port"


def test_strict_ignores_trust_server_certificate(tls_standin, trusted_ca, scraper_for, caplog):
    """TDS 8.0 always checks the certificate, as Microsoft documents for Encrypt=strict."""
    config = odbc18_config(tls_standin("stranger"), trust_server_certificate=True)
    assert "not signed by a CA this host trusts" in failure(scraper_for, config, caplog)


def test_strict_tds7_client_refused_by_a_strict_server(tls_standin, trusted_ca, scraper_for, caplog):
    """The other way round: encryption: require (TDS 7.x PRELOGIN first) against a TDS 8.0-only port."""
    server = tls_standin()
    config = odbc18_config(server, encryption="require")
    assert value(scrape(scraper_for(config), config), "mssql_up") == 0
    assert server.sessions[-1].tls_error == "TDS 7.x PRELOGIN on a strict (TDS 8.0) port"


def test_strict_require_with_a_private_ca_through_ssl_cert_file(tls_standin, trusted_ca, scraper_for):
    config = odbc18_config(tls_standin(strict=False), encryption="require")
    assert value(scrape(scraper_for(config), config), "mssql_up") == 1


def test_strict_require_without_the_private_ca_names_the_cause(tls_standin, scraper_for, caplog, monkeypatch):
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    config = odbc18_config(tls_standin(strict=False), encryption="require")
    assert "not signed by a CA this host trusts" in failure(scraper_for, config, caplog)


def test_strict_require_trust_server_certificate_skips_the_check(tls_standin, scraper_for):
    """require + trust_server_certificate: encrypted, the certificate not checked (any CA, any name)."""
    config = odbc18_config(
        tls_standin("stranger", strict=False), encryption="require", trust_server_certificate=True
    )
    assert value(scrape(scraper_for(config), config), "mssql_up") == 1


@pytest.mark.parametrize("driver", ["freetds", "odbc17"])
def test_strict_with_a_driver_that_cannot_is_refused_at_config_time(driver):
    with pytest.raises(
        ConfigError, match=rf"strict \(TDS 8\) needs ODBC Driver 18; driver {driver} cannot do it"
    ):
        make_config({"t": {"host": "db", "driver": driver, "encryption": "strict", "auth_module": "standin"}})
