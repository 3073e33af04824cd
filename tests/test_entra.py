"""Entra ID logins end to end (issue 35 section 3): azure-identity asks a managed identity endpoint on
loopback for a token, the exporter hands it to ODBC Driver 18 (SQL_COPT_SS_ACCESS_TOKEN), the driver sends
it in LOGIN7's FEDAUTH extension, and the stand-in checks the JWT (signature, audience, expiry)."""

from __future__ import annotations

import logging
import os
import re
import ssl
import struct
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from mssql_memory_exporter.config import ConfigError, parse_config
from mssql_memory_exporter.connection import entra

from tests.conftest import exposition, require_odbc18, samples_of, scrape, value
from tests.entra_endpoint import AuthorityEndpoint, ManagedIdentityEndpoint, SigningKey, client_certificate
from tests.standin.certs import standard_pki
from tests.standin.fedauth import EntraLogins
from tests.standin.handler import ScenarioHandler
from tests.standin.scenario import Clock, Instance, Scenario
from tests.standin.server import StandInServer
from tests.timeouts import PATIENT_SECONDS

OID = str(uuid.uuid4())


@pytest.fixture(scope="module")
def key() -> SigningKey:
    return SigningKey.make()


@pytest.fixture(autouse=True)
def fresh_keepers() -> Iterator[None]:
    entra._KEEPERS.clear()
    yield
    entra._KEEPERS.clear()


@pytest.fixture
def entra_standin(key: SigningKey, standin_parses_the_batch: None) -> Iterator[StandInServer]:
    handler = ScenarioHandler(Instance(Scenario.load("healthy-oltp"), Clock(manual=True)))
    server = StandInServer(handler, entra=EntraLogins(key.public_pem, logins={OID}))
    server.start()
    yield server
    server.stop()
    assert server.errors == []


@pytest.fixture
def endpoint(key: SigningKey, monkeypatch: pytest.MonkeyPatch) -> Iterator[ManagedIdentityEndpoint]:
    with ManagedIdentityEndpoint(key, OID) as running:
        for name, val in running.env().items():
            monkeypatch.setenv(name, val)
        yield running


def entra_config(server: StandInServer, **module: object):
    require_odbc18()
    return parse_config(
        {
            "auth_modules": {"mi": {"entra": {"kind": "managed_identity", **module}}},
            "targets": {
                "sql": {
                    "host": "127.0.0.1",
                    "port": server.port,
                    "encryption": "off",
                    "auth_module": "mi",
                    "login_timeout_seconds": PATIENT_SECONDS,
                    "query_timeout_seconds": PATIENT_SECONDS,
                }
            },
        },
        source="test",
    )


def scrape_sql(scraper_for, config, timeout: float = PATIENT_SECONDS) -> dict:
    return scrape(scraper_for(config), config, "sql", timeout)


def test_entra_managed_identity_token_logs_in_and_scrapes(entra_standin, endpoint, scraper_for, caplog):
    config = entra_config(entra_standin)
    scraper = scraper_for(config)
    with caplog.at_level(logging.DEBUG):
        got = scrape(scraper, config, "sql")
        again = scrape(scraper, config, "sql")
    assert value(got, "mssql_up") == 1 and value(again, "mssql_up") == 1
    assert value(got, "mssql_exporter_collector_success", collector="buffer_manager") == 1
    entra_standin.drop_sessions()  # a new login within the token's life reuses it
    assert value(scrape(scraper, config, "sql"), "mssql_up") == 1
    assert entra_standin.entra.seen == [(OID, ""), (OID, "")]
    assert len(endpoint.requests) == 1
    assert endpoint.requests[0]["resource"] == ["https://database.windows.net"]
    # Nothing secret anywhere: the token is neither in the log nor in the exposition.
    token = endpoint.issued[0]
    assert token not in caplog.text
    assert token[:40] not in exposition(scraper.probe(config.targets["sql"], PATIENT_SECONDS))


def test_entra_expired_token_is_refreshed_before_the_next_login(key, entra_standin, endpoint, scraper_for):
    endpoint.lifetime = 2.0  # expires before the next login; refreshing 300 s ahead, every login asks anew
    config = entra_config(entra_standin)
    scraper = scraper_for(config)
    assert value(scrape(scraper, config, "sql"), "mssql_up") == 1
    entra_standin.drop_sessions()
    time.sleep(2.5)  # the first token is now expired: presented, the stand-in would refuse it
    # The dropped connection is retried at once (as after any reset), with a new token.
    assert value(scrape(scraper, config, "sql"), "mssql_up") == 1
    assert len(endpoint.issued) >= 2
    assert all(reason == "" for _, reason in entra_standin.entra.seen)


def test_entra_token_endpoint_down_is_down_naming_the_endpoint(
    entra_standin, scraper_for, caplog, monkeypatch
):
    monkeypatch.setenv("IDENTITY_ENDPOINT", "http://127.0.0.1:9/msi/token")  # discard port: nobody listens
    monkeypatch.setenv("IDENTITY_HEADER", "x")
    config = entra_config(entra_standin)
    started = time.monotonic()
    with caplog.at_level(logging.WARNING):
        got = scrape_sql(scraper_for, config, timeout=5.0)
    assert time.monotonic() - started < 5.0 + 3.0
    assert value(got, "mssql_up") == 0
    failed = [r for r in caplog.records if r.getMessage() == "scrape failed"]
    assert failed and "http://127.0.0.1:9/msi/token" in str(failed[-1].err), failed
    assert "managed identity" in str(failed[-1].err)
    assert entra_standin.sessions == []  # never got as far as the server


def test_entra_wrong_audience_is_refused_with_18456(entra_standin, endpoint, scraper_for, caplog):
    endpoint.audience = "https://management.azure.com/"
    config = entra_config(entra_standin)
    with caplog.at_level(logging.WARNING):
        got = scrape_sql(scraper_for, config)
    assert value(got, "mssql_up") == 0
    failed = [r for r in caplog.records if r.getMessage() == "scrape failed"]
    assert "18456" in str(failed[-1].err)
    [(oid, reason)] = entra_standin.entra.seen
    assert oid is None and "InvalidAudienceError" in reason


def test_entra_token_packed_as_microsoft_documents():
    packed = entra.token_struct("eyJ0")
    assert packed == struct.pack("<I", 8) + "eyJ0".encode("utf-16-le")


def _config_error(module: dict, **target: object) -> str:
    with pytest.raises(ConfigError) as raised:
        parse_config(
            {
                "auth_modules": {"m": {"entra": module}},
                "targets": {"sql": {"host": "db", "auth_module": "m", **target}},
            },
            source="test",
        )
    return str(raised.value)


def test_entra_with_freetds_is_refused_at_config_time():
    err = _config_error({"kind": "managed_identity"}, driver="freetds")
    assert "freetds cannot log in with an Entra ID access token" in err and "ODBC Driver 18" in err


@pytest.mark.parametrize(
    ("module", "expected"),
    [
        ({"kind": "service_principal", "client_id": "c"}, "needs tenant_id and client_id"),
        (
            {"kind": "service_principal", "tenant_id": "t", "client_id": "c"},
            "exactly one of client_secret_file",
        ),
        ({"kind": "managed_identity", "tenant_id": "t"}, "managed_identity does not use tenant_id"),
        ({"kind": "workload_identity", "client_secret_file": "s"}, "does not use client_secret_file"),
        ({"kind": "managed_identity", "authority_host": "http://login.example"}, "authority_host"),
    ],
)
def test_entra_bad_settings_are_refused_by_name(module, expected):
    assert expected in _config_error(module)


def test_entra_module_takes_no_password():
    with pytest.raises(ConfigError, match="an entra module logs in with an access token"):
        parse_config(
            {
                "auth_modules": {
                    "m": {"username": "u", "password_env": "HOME", "entra": {"kind": "managed_identity"}}
                },
                "targets": {"sql": {"host": "db", "auth_module": "m"}},
            },
            source="test",
        )


def test_entra_settings_never_carry_a_secret_in_argv_or_environment(entra_standin, endpoint, scraper_for):
    """The token travels in memory only: not in the connection string the exporter builds, nor in the
    process's environment."""
    config = entra_config(entra_standin)
    assert value(scrape_sql(scraper_for, config), "mssql_up") == 1
    token = endpoint.issued[0]
    assert all(token not in v for v in os.environ.values())
    samples = samples_of(exposition(scraper_for(config).probe(config.targets["sql"], PATIENT_SECONDS)))
    assert all(token not in str(k) for k in samples)


def test_entra_stand_in_checks_signature_audience_and_expiry(key):
    logins = EntraLogins(key.public_pem, logins={OID})
    good, _ = key.token(OID)
    assert logins.verdict(good)[0] is None
    expired, _ = key.token(OID, lifetime=-120)
    stranger, _ = SigningKey.make().token(OID)
    unknown, _ = key.token(str(uuid.uuid4()))
    for token, reason in [
        (expired, "ExpiredSignatureError"),
        (stranger, "InvalidSignatureError"),
        (unknown, "no login"),
    ]:
        refusal, user = logins.verdict(token)
        assert refusal is not None and refusal.number == 18456 and user == "<token-identified principal>"
        assert reason in logins.seen[-1][1]


TENANT = str(uuid.uuid4())
CLIENT = str(uuid.uuid4())


@pytest.fixture
def authority(key, tmp_path, monkeypatch) -> Iterator[AuthorityEndpoint]:
    """The https authority with a certificate from a CA made here, trusted through REQUESTS_CA_BUNDLE."""
    pki = standard_pki(tmp_path / "pki")
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(pki["ca"].cert))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(pki["server"].cert), str(pki["server"].key))
    with AuthorityEndpoint(key, OID, TENANT, context, secrets={"right-secret"}) as running:
        yield running


def sp_config(server: StandInServer, authority: AuthorityEndpoint, secret_file) -> object:
    require_odbc18()
    module = {
        "kind": "service_principal",
        "tenant_id": TENANT,
        "client_id": CLIENT,
        "client_secret_file": str(secret_file),
        "authority_host": authority.authority,
    }
    return parse_config(
        {
            "auth_modules": {"sp": {"entra": module}},
            "targets": {
                "sql": {
                    "host": "127.0.0.1",
                    "port": server.port,
                    "encryption": "off",
                    "auth_module": "sp",
                    "login_timeout_seconds": PATIENT_SECONDS,
                    "query_timeout_seconds": PATIENT_SECONDS,
                }
            },
        },
        source="test",
    )


def test_entra_service_principal_secret_logs_in_then_revoked_secret_names_the_cause(
    entra_standin, authority, scraper_for, tmp_path, caplog
):
    secret_file = tmp_path / "client-secret"
    secret_file.write_text("right-secret\n")
    secret_file.chmod(0o600)
    config = sp_config(entra_standin, authority, secret_file)
    scraper = scraper_for(config)
    with caplog.at_level(logging.DEBUG):
        assert value(scrape(scraper, config, "sql"), "mssql_up") == 1
        assert authority.requests[-1]["grant_type"] == ["client_credentials"]
        assert authority.requests[-1]["client_id"] == [CLIENT]
        # The secret is revoked in the directory; the token in hand is still good until it expires, so
        # the next login after it has to ask again (a fresh keeper: as after a restart).
        authority.secrets.clear()
        entra._KEEPERS.clear()
        entra_standin.drop_sessions()
        got = scrape(scraper, config, "sql")
    assert value(got, "mssql_up") == 0
    failed = [r for r in caplog.records if r.getMessage() == "scrape failed"]
    err = str(failed[-1].err)
    assert "AADSTS7000215" in err and authority.authority in err and CLIENT in err, err
    assert "right-secret" not in caplog.text and authority.issued[0] not in caplog.text


def test_entra_workload_identity_presents_the_federated_token_file(
    entra_standin, authority, scraper_for, tmp_path, monkeypatch
):
    """AKS workload identity: the webhook's AZURE_* variables, the federated token from the file."""
    token_file = tmp_path / "azure-identity-token"
    token_file.write_text("federated-service-account-token")
    authority.assertions.add("federated-service-account-token")
    monkeypatch.setenv("AZURE_TENANT_ID", TENANT)
    monkeypatch.setenv("AZURE_CLIENT_ID", CLIENT)
    monkeypatch.setenv("AZURE_FEDERATED_TOKEN_FILE", str(token_file))
    require_odbc18()
    module = {"kind": "workload_identity", "authority_host": authority.authority}
    config = parse_config(
        {
            "auth_modules": {"wi": {"entra": module}},
            "targets": {"sql": {"host": "127.0.0.1", "port": entra_standin.port, "encryption": "off",
                                "auth_module": "wi", "login_timeout_seconds": PATIENT_SECONDS}},
        },
        source="test",
    )  # fmt: skip
    assert value(scrape_sql(scraper_for, config), "mssql_up") == 1
    request = authority.requests[-1]
    assert request["client_id"] == [CLIENT] and request["grant_type"] == ["client_credentials"]
    assert request["client_assertion_type"] == ["urn:ietf:params:oauth:client-assertion-type:jwt-bearer"]
    assert entra_standin.entra.seen[-1] == (OID, "")


def test_entra_service_principal_certificate_logs_in(entra_standin, authority, scraper_for, tmp_path):
    cert_file, public = client_certificate(tmp_path)
    authority.certificates.append(public)
    require_odbc18()
    module = {
        "kind": "service_principal",
        "tenant_id": TENANT,
        "client_id": CLIENT,
        "certificate_file": str(cert_file),
        "authority_host": authority.authority,
    }
    config = parse_config(
        {
            "auth_modules": {"sp": {"entra": module}},
            "targets": {"sql": {"host": "127.0.0.1", "port": entra_standin.port, "encryption": "off",
                                "auth_module": "sp", "login_timeout_seconds": PATIENT_SECONDS}},
        },
        source="test",
    )  # fmt: skip
    assert value(scrape_sql(scraper_for, config), "mssql_up") == 1
    assert "client_assertion_type" in authority.requests[-1]


def test_entra_exporter_process_keeps_the_token_out_of_argv_environment_log_and_metrics(
    key, entra_standin, tmp_path
):
    """The real exporter process with a managed identity: up, and the token it was given appears in
    neither its command line, its environment, its log at debug level nor its exposition."""
    from tests.e2e_stack import Stack, http_get

    require_odbc18()
    with ManagedIdentityEndpoint(key, OID) as mi, Stack(tmp_path / "stack") as stack:
        cfg = {
            "auth_modules": {"mi": {"entra": {"kind": "managed_identity"}}},
            "targets": {"sql": {"host": "127.0.0.1", "port": entra_standin.port, "encryption": "off",
                                "auth_module": "mi", "login_timeout_seconds": PATIENT_SECONDS}},
        }  # fmt: skip
        base = stack.start_exporter(cfg, env=mi.env(), args=("--log.level=debug",))
        status, body = http_get(f"{base}/probe?target=sql", timeout=PATIENT_SECONDS + 20)
        assert status == 200 and re.search(r"^mssql_up(?:\{[^}]*\})? 1(?:\.0)?$", body, re.M), body[:500]
        process = stack.process("exporter")
        pid = process.popen.pid
        token = mi.issued[0]
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        environ = Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace")
        log = process.log.read_text(errors="replace")
        for where, text in [("argv", cmdline), ("environment", environ), ("log", log), ("metrics", body)]:
            assert token not in text and token[-40:] not in text, where
