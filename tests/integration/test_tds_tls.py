"""The stand-in's TLS, as FreeTDS 1.3 does it: the handshake inside TDS PRELOGIN packets, then TLS on the
raw socket (split from tests/integration/test_tds_protocol.py)."""

# ruff: noqa: F401, F811  (the handler, server and connect fixtures are imported from test_tds_protocol;
# pytest injects them by name)
from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator

import pyodbc
import pytest

from tests.integration.test_tds_protocol import (
    ScriptedHandler,
    connect,
    connection_string,
    handler,
    one_column,
    server,
    tuples,
)
from tests.standin.certs import Pem, standard_pki
from tests.standin.server import StandInServer, tls_context

# --------------------------------------------------------------------------------------------------
# TLS, as FreeTDS 1.3 does it
# --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Pem]:
    return standard_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture
def tls_server(handler: ScriptedHandler, pki: dict[str, Pem]) -> Iterator[Callable[[str], StandInServer]]:
    started: list[StandInServer] = []

    def start(cert: str = "server") -> StandInServer:
        srv = StandInServer(handler, tls=tls_context(str(pki[cert].cert), str(pki[cert].key)))
        srv.start()
        started.append(srv)
        return srv

    yield start
    for srv in started:
        srv.stop()


def freetds_conf(tmp_path, monkeypatch, port: int, **options: str) -> str:
    """A freetds.conf with one section for the server, found through FREETDSCONF; returns its name."""
    lines = ["[standin]", "host = 127.0.0.1", f"port = {port}", "tds version = 7.4"]
    lines += [f"{key.replace('_', ' ')} = {value}" for key, value in options.items()]
    path = tmp_path / "freetds.conf"
    path.write_text("\n".join(lines) + "\n")
    monkeypatch.setenv("FREETDSCONF", str(path))
    return "standin"


def servername_connection_string(name: str, encryption: str) -> str:
    return (
        f"DRIVER={{FreeTDS}};Servername={name};DATABASE=master;UID=exporter;PWD=secret;"
        f"TDS_Version=7.4;Encryption={encryption};ClientCharset=UTF-8"
    )


@pytest.mark.parametrize(("encryption", "tls"), [("require", "full"), ("request", "login"), ("off", "none")])
def test_tls_is_negotiated_in_prelogin_as_freetds_asks(
    tls_server, handler, encryption: str, tls: str
) -> None:
    handler.answers["SELECT 1"] = [one_column("one", "int", 1)]
    srv = tls_server()
    cnxn = pyodbc.connect(connection_string(srv.port, Encryption=encryption), timeout=3, autocommit=True)
    assert tuples(cnxn.cursor().execute("SELECT 1").fetchall()) == [(1,)]
    cnxn.close()
    assert [s.tls for s in srv.sessions] == [tls]
    assert handler.logins[-1].password == "secret"  # LOGIN7 arrived intact through TLS
    assert srv.errors == []


def test_freetds_without_a_ca_file_accepts_any_certificate(tls_server, handler) -> None:
    # The reason the exporter always gives FreeTDS a CA (its own or the system's): without one, FreeTDS
    # encrypts but takes any certificate, here one from a CA nobody trusts.
    handler.answers["SELECT 1"] = [one_column("one", "int", 1)]
    srv = tls_server("wrong-name")
    cnxn = pyodbc.connect(connection_string(srv.port, Encryption="require"), timeout=3, autocommit=True)
    assert tuples(cnxn.cursor().execute("SELECT 1").fetchall()) == [(1,)]
    cnxn.close()


def test_server_and_port_keys_do_not_read_freetds_conf(
    tls_server, handler, pki, tmp_path, monkeypatch
) -> None:
    # A [global] ca file is not read for a Server=/Port= connection string: only Servername= reads the
    # configuration file.
    path = tmp_path / "global.conf"
    path.write_text(f"[global]\nca file = {pki['other'].cert}\n")
    monkeypatch.setenv("FREETDSCONF", str(path))
    handler.answers["SELECT 1"] = [one_column("one", "int", 1)]
    srv = tls_server()
    cnxn = pyodbc.connect(connection_string(srv.port, Encryption="require"), timeout=3, autocommit=True)
    assert tuples(cnxn.cursor().execute("SELECT 1").fetchall()) == [(1,)]
    cnxn.close()


@pytest.mark.parametrize(
    ("cert", "ca", "encryption", "ok"),
    [
        ("server", "ca", "require", True),
        ("server", "ca", "request", True),
        ("server", "other", "require", False),  # signed by a CA we were not told to trust
        ("server", "other", "request", False),  # request still checks the certificate it is shown
        ("wrong-name", "ca", "require", False),  # right CA, but not issued for 127.0.0.1
        ("server", "system", "require", False),  # the system store does not know the test CA
    ],
)
def test_freetds_verifies_with_a_ca_file_in_its_servername_section(
    tls_server, handler, pki, tmp_path, monkeypatch, cert: str, ca: str, encryption: str, ok: bool
) -> None:
    handler.answers["SELECT 1"] = [one_column("one", "int", 1)]
    srv = tls_server(cert)
    ca_file = "system" if ca == "system" else str(pki[ca].cert)
    name = freetds_conf(tmp_path, monkeypatch, srv.port, ca_file=ca_file, encryption=encryption)
    connect_string = servername_connection_string(name, encryption)
    if ok:
        cnxn = pyodbc.connect(connect_string, timeout=3, autocommit=True)
        assert tuples(cnxn.cursor().execute("SELECT 1").fetchall()) == [(1,)]
        cnxn.close()
        assert srv.sessions[-1].tls == ("full" if encryption == "require" else "login")
    else:
        started = time.monotonic()
        with pytest.raises(pyodbc.Error, match="08001"):
            pyodbc.connect(connect_string, timeout=3, autocommit=True)
        assert time.monotonic() - started < 2.5
        assert not srv.sessions[-1].logged_in and handler.logins == []


@pytest.mark.parametrize(
    ("ca_file", "stage"),
    [("system", "Certificate status"), ("/nonexistent/ca.pem", "loading CA file failed")],
)
def test_ca_file_system_means_the_system_trust_store(
    tls_server, handler, tmp_path, monkeypatch, ca_file: str, stage: str
) -> None:
    # Both fail against the test CA; the driver's own log shows that "system" got as far as checking
    # the certificate against the loaded system store, while a missing file never did. In a child
    # process, because TDSDUMP stays on for the rest of a process once set.
    srv = tls_server()
    name = freetds_conf(tmp_path, monkeypatch, srv.port, ca_file=ca_file)
    dump = tmp_path / "tds.dump"
    script = (
        "import pyodbc, sys\n"
        "try:\n"
        "    pyodbc.connect(sys.argv[1], timeout=3, autocommit=True)\n"
        "except pyodbc.Error as exc:\n"
        "    print(exc.args[0])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, servername_connection_string(name, "require")],
        env={**os.environ, "TDSDUMP": str(dump)},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.stdout.strip() == "08001", done
    assert stage in dump.read_text(errors="replace")
