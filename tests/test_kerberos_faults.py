"""Kerberos faults an operator following docs/configuration.md meets (issue 36), against the real MIT KDC
of tests/kdc.py, in-process: the ticket keeper (connection/kerberos.py) asks the same library FreeTDS
uses, with the realm's krb5.conf in KRB5_CONFIG."""

# ruff: noqa: F811 - the `kdc` fixture is imported from test_windows_auth and named as a parameter

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from mssql_memory_exporter.config.windows_auth import KerberosSettings
from mssql_memory_exporter.connection import freetds, kerberos

from tests.kdc import REALM, Kdc
from tests.test_startup import start  # noqa: F401 - a fixture
from tests.test_windows_auth import (  # noqa: F401 - kdc, windows_standin and stack are fixtures
    client_keytab,
    config,
    kdc,
    log_of,
    probe,
    stack,
    windows_standin,
)
from tests.test_windows_auth import start as start_exporter


@pytest.fixture
def realm_env(kdc: Kdc, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Kdc]:
    for key, val in kdc.env().items():
        monkeypatch.setenv(key, val)
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{tmp_path / 'unused-cc'}")  # restored after: prepare() sets it
    freetds.private_directory(reopen=True)  # where the keeper writes its cache, as prepare() makes it
    yield kdc
    freetds.remove_directory()


def _keytab(kdc: Kdc, tmp_path: Path, name: str) -> tuple[str, Path]:
    principal = f"{name}@{REALM}"
    with contextlib.suppress(RuntimeError):  # made by an earlier test of the session's realm
        kdc.add_principal(name)
    return principal, kdc.keytab(name, tmp_path / f"{name}.keytab")


def test_a_keytab_with_another_principals_keys_is_reported_as_kinit_would(realm_env: Kdc, tmp_path: Path):
    # Before: "No credentials cache found (filename: ...)", which points at the cache, not the keytab.
    _other, keytab = _keytab(realm_env, tmp_path, "keytab-owner")
    wanted, _ = _keytab(realm_env, tmp_path, "keytab-wanted")
    keeper = kerberos.TicketKeeper(KerberosSettings(principal=wanted, keytab=str(keytab)))
    with pytest.raises(kerberos.KerberosError) as info:
        keeper.ready()
    message = str(info.value)
    assert f"No key table entry found for {wanted}" in message, message
    assert "credentials cache" not in message


def test_a_deleted_keytab_is_reported_as_kinit_would(realm_env: Kdc, tmp_path: Path):
    principal, keytab = _keytab(realm_env, tmp_path, "keytab-deleted")
    keeper = kerberos.TicketKeeper(KerberosSettings(principal=principal, keytab=str(keytab)))
    keytab.unlink()
    with pytest.raises(kerberos.KerberosError) as info:
        keeper.ready()
    message = str(info.value)
    assert f"Key table file '{keytab}' not found" in message, message
    assert "credentials cache" not in message


def _filled_cache(kdc: Kdc, tmp_path: Path, name: str) -> tuple[str, str]:
    principal, keytab = _keytab(kdc, tmp_path, name)
    cache = f"FILE:{tmp_path / f'{name}.ccache'}"
    subprocess.run(
        ["kinit", "-k", "-t", str(keytab), "-c", cache, principal],
        env={**os.environ, **kdc.env()},
        check=True,
        capture_output=True,
        timeout=60,
    )
    return principal, cache


def test_a_ccache_of_another_principal_than_configured_is_refused_naming_both(realm_env: Kdc, tmp_path: Path):
    # Before: FreeTDS logged in as whoever the cache held, and failures named the configured principal.
    holder, cache = _filled_cache(realm_env, tmp_path, "cache-holder")
    keeper = kerberos.TicketKeeper(KerberosSettings(principal=f"someone-else@{REALM}", ccache=cache))
    with pytest.raises(kerberos.KerberosError) as info:
        keeper.ready()
    message = str(info.value)
    assert f"holds tickets for {holder}, not for kerberos.principal someone-else@{REALM}" in message


def test_a_ccache_logs_the_principal_it_holds(realm_env: Kdc, tmp_path: Path, caplog):
    holder, cache = _filled_cache(realm_env, tmp_path, "cache-logged")
    for principal in (None, holder, "cache-logged"):  # none, the full name, the name in the default realm
        keeper = kerberos.TicketKeeper(KerberosSettings(principal=principal, ccache=cache))
        with caplog.at_level(logging.INFO):
            keeper.ready()
            keeper.ready()
        used = [r for r in caplog.records if r.getMessage() == "Kerberos logins use the credential cache"]
        assert len(used) == 1 and used[0].principal == holder, used
        caplog.clear()


def test_the_spn_realm_follows_domain_realm_not_default_realm(
    kdc: Kdc, windows_standin, stack, tmp_path: Path
):
    """docs/configuration.md: kerberos.realm defaults to "the realm krb5.conf maps the host to". Before,
    FreeTDS asked for MSSQLSvc/localhost:<port>@<default_realm> whatever [domain_realm] said: "Server
    krbtgt/OTHER.TEST@EXPORTER.TEST not found in Kerberos database". Here default_realm is another
    realm and [domain_realm] maps localhost to the test realm, where the SQL Server's SPN lives."""
    principal, keytab = client_keytab(kdc, tmp_path, "exporter")
    conf = tmp_path / "krb5-other-default.conf"
    conf.write_text(
        kdc.krb5_conf.read_text().replace(f"default_realm = {REALM}", "default_realm = OTHER.TEST")
    )
    module = {"kerberos": {"principal": principal, "keytab": str(keytab)}}
    base = start_exporter(stack, config(windows_standin.port, module), kdc, KRB5_CONFIG=str(conf))
    up, _, _ = probe(base)
    assert up == 1.0, log_of(stack)
    assert "OTHER.TEST" not in log_of(stack)


@pytest.fixture
def silent_kdc(kdc: Kdc, tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """A KDC that accepts TCP connections and never answers, and a krb5.conf naming it for the realm."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            with contextlib.suppress(TimeoutError, OSError):
                held.append(listener.accept()[0])

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    conf = tmp_path / "krb5-silent.conf"
    silent = kdc.krb5_conf.read_text().replace(f"kdc = 127.0.0.1:{kdc.port}", f"kdc = 127.0.0.1:{port}")
    conf.write_text(silent)
    yield port, conf
    stop.set()
    thread.join(timeout=5)
    for sock in held:
        sock.close()
    listener.close()


def test_a_silent_kdc_fails_the_ticket_fetch_within_the_budget_naming_it(
    realm_env: Kdc, silent_kdc, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    # Before: the fetch waited for MIT's library (54 s), and the scrape said "timed out waiting for SQL
    # Server" without naming the KDC.
    port, conf = silent_kdc
    principal, keytab = _keytab(realm_env, tmp_path, "silent-fetch")
    monkeypatch.setenv("KRB5_CONFIG", str(conf))
    keeper = kerberos.TicketKeeper(KerberosSettings(principal=principal, keytab=str(keytab)))
    started = time.monotonic()
    with pytest.raises(kerberos.KerberosError) as info:
        keeper.ready(2.0)
    took = time.monotonic() - started
    assert took < 10.0, took  # a test about a timeout: 2 s asked, MIT's own wait is about a minute
    assert f"KDC 127.0.0.1:{port} of realm {REALM}" in str(info.value), info.value
    assert "did not answer" in str(info.value)


def test_renewal_from_a_silent_kdc_logs_in_with_the_ticket_still_valid(
    realm_env: Kdc, silent_kdc, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog
):
    port, conf = silent_kdc
    name = "silent-renew"
    with contextlib.suppress(RuntimeError):
        realm_env.add_principal(name, max_life="8 seconds")
    principal, keytab = f"{name}@{REALM}", realm_env.keytab(name, tmp_path / f"{name}.keytab")
    keeper = kerberos.TicketKeeper(KerberosSettings(principal=principal, keytab=str(keytab)))
    keeper.ready(30.0)  # the first ticket, from the real KDC
    time.sleep(4.5)  # past half of its life: the next login renews
    monkeypatch.setenv("KRB5_CONFIG", str(conf))  # and the KDC has gone silent
    started = time.monotonic()
    with caplog.at_level(logging.WARNING):
        keeper.ready(1.0)  # no exception: the ticket is valid for a few seconds more
    assert time.monotonic() - started < 8.0
    warned = [r.getMessage() for r in caplog.records if "did not answer" in r.getMessage()]
    assert warned and f"KDC 127.0.0.1:{port}" in warned[0] and "still valid" in warned[0], warned


def test_sigterm_abandons_a_start_up_waiting_for_a_silent_kdc_at_once(
    kdc: Kdc, silent_kdc, start, tmp_path: Path
):
    # Before: the first ticket fetch held start-up for MIT's own wait (54 s), and SIGTERM waited with
    # it, though docs/operations.md says start-up is abandoned at once.
    _port, conf = silent_kdc
    principal, keytab = _keytab(kdc, tmp_path, "silent-start")
    body = {
        "auth_modules": {"k": {"kerberos": {"principal": principal, "keytab": str(keytab)}}},
        "targets": {
            "sql": {"host": "localhost", "driver": "freetds", "encryption": "off", "auth_module": "k"}
        },
    }
    path = tmp_path / "c.yml"
    path.write_text(yaml.safe_dump(body))
    run = start(path, hooked=False, KRB5_CONFIG=str(conf), KRB5_KDC_PROFILE=str(kdc.kdc_conf))
    run.wait_for(r"msg=starting", timeout=60)
    time.sleep(2.0)  # in the ticket request by now
    run.proc.send_signal(signal.SIGTERM)
    signalled = time.monotonic()
    code = run.proc.wait(timeout=120)
    took = time.monotonic() - signalled
    assert took < 3.0, f"stopped {took:.1f} s after SIGTERM: {run.log()}"
    assert code == 0, run.log()
    assert "during=start-up" in run.log()
    assert run.leftovers() == [], run.log()


def test_a_service_ticket_request_to_a_silent_kdc_is_bounded_and_names_it(
    realm_env: Kdc, silent_kdc, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """With a ticket-granting ticket in the cache, FreeTDS asks the KDC for the service ticket inside
    the driver, where a silent KDC held the login past the scrape's deadline ("timed out waiting for SQL
    Server"). The login now gets it first, within its budget; a ticket the cache holds costs nothing."""
    port, conf = silent_kdc
    principal, keytab = _keytab(realm_env, tmp_path, "silent-tgs")
    spn = "MSSQLSvc/silent-tgs.exporter.test:1433"
    with contextlib.suppress(RuntimeError):
        realm_env.add_principal(spn)
    keeper = kerberos.TicketKeeper(KerberosSettings(principal=principal, keytab=str(keytab)))
    keeper.prepare()  # KRB5CCNAME at the keeper's cache, and the first ticket from the real KDC
    assert kerberos.service_ticket_in_time(spn, 30.0) is None  # fetched into the cache
    monkeypatch.setenv("KRB5_CONFIG", str(conf))  # the KDC goes silent
    assert kerberos.service_ticket_in_time(spn, 2.0) is None  # the cached ticket: no request
    other = "MSSQLSvc/silent-tgs-2.exporter.test:1433"
    started = time.monotonic()
    silent = kerberos.service_ticket_in_time(other, 2.0)
    assert time.monotonic() - started < 10.0
    assert silent is not None and f"KDC 127.0.0.1:{port} of realm {REALM}" in silent, silent
    assert f"did not answer a service ticket request for {other}" in silent
