"""Windows logins (issue 29), with the real parts: an MIT KDC (Debian's krb5kdc, tests/kdc.py) in a
throwaway realm, the exporter started as a user starts it (`python -m mssql_memory_exporter` with a
config), FreeTDS 1.3 through pyodbc, and the stand-in's SSPI acceptors (tests/standin/sspi.py: python-
gssapi with the service's keytab, pyspnego for NTLM).

FreeTDS asks for a ticket for MSSQLSvc/<host>:<port>; the host here is `localhost`, which has no dot and
no dotted canonical name on this machine, so FreeTDS keeps it as it is (src/tds/gssapi.c), and the
test realm's krb5.conf turns DNS canonicalisation off so the library does not change it either.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from mssql_memory_exporter.config import ConfigError, DriverError, build_connection_string, parse_config
from mssql_memory_exporter.config.windows_auth import freetds_spn

from tests.conftest import ROOT
from tests.e2e_stack import Stack, http_get
from tests.kdc import REALM, Kdc, missing_tools
from tests.standin.handler import ScenarioHandler
from tests.standin.scenario import Clock, Instance, Scenario
from tests.standin.server import StandInServer
from tests.standin.sspi import WindowsLogins

DOMAIN = REALM.split(".")[0]  # how the stand-in shows a Kerberos user: EXPORTER\name
NTLM_USER = "ntlmsvc"
# Deliberately distinctive: tests/secret_check.py looks for it in every output of the run.
NTLM_PASSWORD = "Ntlm-W1ndows-Pw-k4Rq"
WRONG_NTLM_PASSWORD = "Ntlm-Wr0ng-Pw-z8Lm"
SCRAPE_TIMEOUT = 10.0
LIBFAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")


def _need_kdc() -> None:
    absent = missing_tools()
    if absent:
        message = f"{', '.join(absent)} not installed (Debian krb5-kdc krb5-admin-server; bootstrap.sh test)"
        if os.environ.get("CI") or os.environ.get("REQUIRE_TEST_TOOLS") == "1":
            pytest.fail(message, pytrace=False)
        pytest.skip(message)


@pytest.fixture(scope="session")
def kdc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kdc]:
    _need_kdc()
    realm = Kdc(tmp_path_factory.mktemp("kdc"))
    realm.start()
    yield realm
    realm.stop()


@dataclass
class WindowsStandIn:
    server: StandInServer
    handler: ScenarioHandler
    windows: WindowsLogins
    spn: str

    @property
    def port(self) -> int:
        return self.server.port


@pytest.fixture
def windows_standin(
    request: pytest.FixtureRequest, tmp_path: Path, standin_parses_the_batch: None
) -> Iterator[WindowsStandIn]:
    """A stand-in that accepts Kerberos (its own keytab, made once the port is known, when the test
    uses the KDC) and NTLM (a user file) logins for the Windows logins in `logins`."""
    users = tmp_path / "ntlm-users"
    users.write_text(f"{DOMAIN}:{NTLM_USER}:{NTLM_PASSWORD}\n")
    users.chmod(0o600)
    windows = WindowsLogins(
        keytab=tmp_path / "mssqlsvc.keytab",
        ntlm_user_file=users,
        logins={f"{DOMAIN}\\{NTLM_USER}", f"{DOMAIN}\\exporter", f"{DOMAIN}\\renewer", f"{DOMAIN}\\cached"},
    )
    instance = Instance(Scenario.load("healthy-oltp"), Clock(manual=True))
    handler = ScenarioHandler(instance)
    server = StandInServer(handler, windows=windows)
    server.start()
    spn = f"MSSQLSvc/localhost:{server.port}"
    if "kdc" in request.fixturenames:
        realm: Kdc = request.getfixturevalue("kdc")
        realm.add_principal(spn)
        realm.keytab(spn, windows.keytab)
    yield WindowsStandIn(server, handler, windows, spn)
    server.stop()
    assert not server.errors, server.errors


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    with Stack(tmp_path / "stack") as running:
        yield running


def client_keytab(kdc: Kdc, tmp_path: Path, name: str, max_life: str | None = None) -> tuple[str, Path]:
    principal = kdc.add_principal(name, max_life=max_life)
    # requires_preauth, as Active Directory does: the KDC then checks the client's clock.
    kdc.kadmin(f"modprinc +requires_preauth {name}")
    return principal, kdc.keytab(name, tmp_path / f"{name}.keytab")


def config(port: int, module: dict, **target: object) -> dict:
    return {
        "auth_modules": {"windows": module},
        "targets": {
            "sql": {
                "host": "localhost",
                "port": port,
                "driver": "freetds",
                "encryption": "off",
                "auth_module": "windows",
                "login_timeout_seconds": 5,
                "login_backoff_seconds": 1,
                "login_backoff_max_seconds": 1,
                **target,
            }
        },
    }


def start(stack: Stack, cfg: dict, kdc: Kdc | None = None, **env: str) -> str:
    return stack.start_exporter(cfg, env={**(kdc.env() if kdc else {}), **env})


def probe(base: str) -> tuple[float, str, float]:
    """(mssql_up, exposition, seconds the scrape took)."""
    started = time.monotonic()
    status, body = http_get(f"{base}/probe?target=sql", timeout=SCRAPE_TIMEOUT + 20)
    took = time.monotonic() - started
    assert status == 200, body
    match = re.search(r"^mssql_up(?:\{[^}]*\})? (\S+)$", body, re.MULTILINE)
    assert match, body
    return float(match.group(1)), body, took


def wait_up(stack: Stack, base: str, timeout: float = 30.0) -> str:
    """A dropped connection costs one failed scrape before the exporter logs in again."""
    return stack.wait_for(
        lambda: (lambda r: r[1] if r[0] == 1.0 else None)(probe(base)), timeout, "mssql_up 1"
    )


def log_of(stack: Stack) -> str:
    return stack.process("exporter").log.read_text(errors="replace")


def as_requests(kdc: Kdc, principal: str) -> int:
    """Tickets the KDC issued to `principal` from its keytab (AS exchanges)."""
    return len(re.findall(rf"AS_REQ .* ISSUE: .* {re.escape(principal)} for krbtgt/", kdc.log.read_text()))


# --- Kerberos, against the real KDC ----------------------------------------------------------------


def test_kerberos_keytab_login_and_full_scrape(kdc, windows_standin, stack, tmp_path, driver):
    """Through both drivers: Driver 18 takes the ticket from the exporter's ccache through GSSAPI, as
    FreeTDS does (NTLM stays FreeTDS-only: Microsoft's Linux driver has no NTLM)."""
    principal, keytab = client_keytab(kdc, tmp_path, "exporter")
    base = start(
        stack,
        config(
            windows_standin.port,
            {"kerberos": {"principal": principal, "keytab": str(keytab)}},
            driver=driver,
        ),
        kdc,
    )
    up, body, _ = probe(base)
    assert up == 1.0, log_of(stack)
    # The full scrape: memory, buffer pool and every collector succeeded.
    assert "mssql_memory_" in body or "mssql_buffer" in body, body[:2000]
    failed = re.findall(r'^mssql_exporter_collector_success\{[^}]*collector="([^"]+)"[^}]*\} 0', body, re.M)
    assert not failed, failed
    # The stand-in authenticated a Kerberos ticket for its SPN, as the client principal.
    assert ("kerberos", f"{DOMAIN}\\exporter", "") in windows_standin.windows.seen
    assert as_requests(kdc, principal) >= 1
    # The ticket cache is the exporter's own, in its private directory, and goes when it stops.
    caches = list(Path(os.environ.get("TMPDIR", "/tmp")).glob("mssql-exporter-freetds-*/krb5cc"))
    assert caches and all(c.parent.stat().st_mode & 0o077 == 0 for c in caches)


def test_kerberos_ticket_renewed_from_the_keytab_across_expiry(kdc, windows_standin, stack, tmp_path):
    lifetime = 12
    principal, keytab = client_keytab(kdc, tmp_path, "renewer", max_life=f"{lifetime} seconds")
    base = start(
        stack,
        config(windows_standin.port, {"kerberos": {"principal": principal, "keytab": str(keytab)}}),
        kdc,
    )
    first = time.monotonic()
    assert probe(base)[0] == 1.0, log_of(stack)
    fetched = as_requests(kdc, principal)
    # Past the first ticket's end: a new login needs a new ticket.
    time.sleep(max(0.0, lifetime + 2 - (time.monotonic() - first)))
    windows_standin.server.drop_sessions()
    wait_up(stack, base)
    assert as_requests(kdc, principal) > fetched, "no new ticket from the keytab"
    assert windows_standin.windows.seen.count(("kerberos", f"{DOMAIN}\\renewer", "")) >= 2
    assert "Kerberos ticket fetched from the keytab" in log_of(stack)


def test_kerberos_expired_ccache_fails_in_the_client_before_the_standin(
    kdc, windows_standin, stack, tmp_path
):
    lifetime = 15  # long enough for the exporter to start and log in once on a loaded machine
    principal, keytab = client_keytab(kdc, tmp_path, "cached", max_life=f"{lifetime} seconds")
    ccache = tmp_path / "user-ccache"
    # Someone else's cache, kept (here: not kept) fresh by kinit; the exporter only reads it.
    subprocess.run(
        ["kinit", "-k", "-t", str(keytab), "-c", f"FILE:{ccache}", principal],
        env={**os.environ, **kdc.env()},
        check=True,
        capture_output=True,
        timeout=30,
    )
    got = time.monotonic()
    base = start(
        stack,
        config(windows_standin.port, {"kerberos": {"principal": principal, "ccache": str(ccache)}}),
        kdc,
    )
    assert probe(base)[0] == 1.0, log_of(stack)
    time.sleep(max(0.0, lifetime + 2 - (time.monotonic() - got)))
    windows_standin.server.drop_sessions()
    sessions_before = len(windows_standin.server.sessions)
    seen_before = len(windows_standin.windows.seen)
    for _ in range(2):  # the first scrape may only find the dropped connection
        up, _, took = probe(base)
        assert up == 0.0
        assert took < SCRAPE_TIMEOUT
    assert "The referenced credential has expired (renew it with kinit" in log_of(stack), log_of(stack)
    # Refused in the client: the stand-in saw no further login, nor even a connection.
    assert len(windows_standin.windows.seen) == seen_before
    assert len(windows_standin.server.sessions) == sessions_before


def test_kerberos_kdc_down_gives_mssql_up_0_naming_the_kdc_then_recovers(
    kdc, windows_standin, stack, tmp_path
):
    principal, keytab = client_keytab(kdc, tmp_path, "exporter-kdc-down")
    windows_standin.windows.allow([f"{DOMAIN}\\exporter-kdc-down"])
    kdc.stop()
    try:
        base = start(
            stack,
            config(windows_standin.port, {"kerberos": {"principal": principal, "keytab": str(keytab)}}),
            kdc,
        )
        up, _, took = probe(base)
        assert up == 0.0
        assert took < SCRAPE_TIMEOUT
        text = log_of(stack)
        assert f"KDC 127.0.0.1:{kdc.port} of realm {REALM}" in text, text
        assert "Cannot contact any KDC" in text, text
        assert not windows_standin.windows.seen
    finally:
        kdc.start()
    wait_up(stack, base)


def test_kerberos_wrong_spn_is_refused_and_the_error_names_it(kdc, windows_standin, stack, tmp_path):
    principal, keytab = client_keytab(kdc, tmp_path, "exporter")
    # A real service principal, but not the stand-in's: its ticket cannot be read with the stand-in's key.
    other = f"MSSQLSvc/sql-other.exporter.test:{windows_standin.port}"
    kdc.add_principal(other)
    module = {"kerberos": {"principal": principal, "keytab": str(keytab)}}
    base = start(stack, config(windows_standin.port, module, spn=other), kdc)
    up, _, took = probe(base)
    assert up == 0.0
    assert took < SCRAPE_TIMEOUT
    text = log_of(stack)
    assert "18452" in text and other in text, text
    assert windows_standin.windows.seen and windows_standin.windows.seen[-1][1] is None


def test_kerberos_spn_unknown_to_the_kdc_fails_in_the_client_naming_it(kdc, windows_standin, stack, tmp_path):
    principal, keytab = client_keytab(kdc, tmp_path, "exporter")
    unknown = f"MSSQLSvc/sql-unregistered.exporter.test:{windows_standin.port}"
    module = {"kerberos": {"principal": principal, "keytab": str(keytab)}}
    base = start(stack, config(windows_standin.port, module, spn=unknown), kdc)
    up, _, took = probe(base)
    assert up == 0.0
    assert took < SCRAPE_TIMEOUT
    text = log_of(stack)
    assert f"Server {unknown}@{REALM} not found in Kerberos database" in text, text
    assert not windows_standin.windows.seen  # no ticket, so no login reached the stand-in


def _skewed(kdc: Kdc, tmp_path: Path, *, timesync: bool) -> dict[str, str]:
    """Environment for an exporter whose clock is 20 minutes ahead (libfaketime; the realm allows 300 s),
    with MIT's kdc_timesync as the krb5.conf says (on by default; `kdc_timesync = 0` turns it off)."""
    if not LIBFAKETIME.exists():
        pytest.fail(f"{LIBFAKETIME} missing (Debian libfaketime; bootstrap.sh test)")
    env = {
        "LD_PRELOAD": str(LIBFAKETIME),
        "FAKETIME": "+20m",
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",  # the exporter's timeouts keep real time
    }
    if not timesync:
        conf = tmp_path / "krb5-no-timesync.conf"
        conf.write_text(
            kdc.krb5_conf.read_text().replace("[libdefaults]\n", "[libdefaults]\n  kdc_timesync = 0\n")
        )
        env["KRB5_CONFIG"] = str(conf)
    return env


def test_kerberos_clock_skew_beyond_the_kdc_limit_fails_the_login(kdc, windows_standin, stack, tmp_path):
    principal, keytab = client_keytab(kdc, tmp_path, "exporter")
    module = {"kerberos": {"principal": principal, "keytab": str(keytab)}}
    base = start(stack, config(windows_standin.port, module), kdc, **_skewed(kdc, tmp_path, timesync=False))
    up, _, took = probe(base)
    assert up == 0.0, log_of(stack)
    assert took < SCRAPE_TIMEOUT
    text = log_of(stack)
    # The KDC refuses the pre-authentication: no ticket, and the log says why and which KDC.
    assert f"KDC 127.0.0.1:{kdc.port} of realm {REALM}" in text and "Clock skew too great" in text, text
    assert not windows_standin.windows.seen


def test_kerberos_clock_skew_is_corrected_by_mit_kdc_timesync(kdc, windows_standin, stack, tmp_path):
    """MIT's default (kdc_timesync): the KDC's answer to the skewed request carries its time, the library
    retries with that offset and keeps it in the cache, so the login works: documented, not a failure."""
    principal, keytab = client_keytab(kdc, tmp_path, "exporter")
    module = {"kerberos": {"principal": principal, "keytab": str(keytab)}}
    base = start(stack, config(windows_standin.port, module), kdc, **_skewed(kdc, tmp_path, timesync=True))
    assert probe(base)[0] == 1.0, log_of(stack)
    assert "Clock skew too great" in kdc.log.read_text()  # the skew was real, and corrected


def test_kerberos_principal_without_a_login_gets_18456(kdc, windows_standin, stack, tmp_path):
    principal, keytab = client_keytab(kdc, tmp_path, "nologin")
    base = start(
        stack,
        config(windows_standin.port, {"kerberos": {"principal": principal, "keytab": str(keytab)}}),
        kdc,
    )
    up, _, _ = probe(base)
    assert up == 0.0
    text = log_of(stack)
    assert "18456" in text and "nologin" in text, text


# --- NTLM ------------------------------------------------------------------------------------------


def ntlm_module(tmp_path: Path, password: str) -> dict:
    secret = tmp_path / "ntlm-password"
    secret.write_text(password + "\n")
    secret.chmod(0o600)
    return {"username": f"{DOMAIN}\\{NTLM_USER}", "password_file": str(secret)}


def test_ntlm_login_with_the_right_password_scrapes(windows_standin, stack, tmp_path):
    base = start(stack, config(windows_standin.port, ntlm_module(tmp_path, NTLM_PASSWORD)))
    up, _, _ = probe(base)
    assert up == 1.0, log_of(stack)
    assert ("ntlm", f"{DOMAIN}\\{NTLM_USER}", "") in windows_standin.windows.seen
    # NTLMv2 (UseNTLMv2=yes): an NT response longer than NTLMv1's 24 bytes.
    assert windows_standin.windows.nt_response_lengths
    assert all(length > 24 for length in windows_standin.windows.nt_response_lengths)


def test_ntlm_wrong_password_is_refused_with_18452_and_backs_off(windows_standin, stack, tmp_path):
    base = start(stack, config(windows_standin.port, ntlm_module(tmp_path, WRONG_NTLM_PASSWORD)))
    up, body, took = probe(base)
    assert up == 0.0
    assert took < SCRAPE_TIMEOUT
    text = log_of(stack)
    assert "18452" in text and "untrusted domain" in text, text
    mechanism, user, reason = windows_standin.windows.seen[-1]
    assert (mechanism, user) == ("ntlm", None) and "NTLM" in reason
    # A wrong Windows password counts towards the domain's lockout policy: the exporter backs off.
    backoff = re.search(r"^mssql_exporter_login_backoff_seconds(?:\{[^}]*\})? (\S+)$", body, re.M)
    assert backoff and float(backoff.group(1)) > 0, body


# --- configuration ---------------------------------------------------------------------------------


def test_kerberos_config_asking_for_two_principals_is_refused_naming_both(tmp_path):
    modules = {
        "a": {"kerberos": {"principal": "svc-a@CORP.EXAMPLE"}},
        "b": {"kerberos": {"principal": "svc-b@CORP.EXAMPLE"}},
    }
    targets = {name: {"host": "sql1", "auth_module": name} for name in modules}
    with pytest.raises(ConfigError) as info:
        parse_config({"auth_modules": modules, "targets": targets})
    message = str(info.value)
    assert "auth_modules.b.kerberos" in message
    assert "svc-a@CORP.EXAMPLE" in message and "svc-b@CORP.EXAMPLE" in message


def test_kerberos_keytab_readable_by_others_stops_start_up(tmp_path):
    keytab = tmp_path / "svc.keytab"
    keytab.write_bytes(b"\x05\x02not-a-real-keytab")
    keytab.chmod(0o644)
    cfg = tmp_path / "exporter.yml"
    module = {"kerberos": {"principal": "svc@CORP.EXAMPLE", "keytab": str(keytab)}}
    cfg.write_text(yaml.safe_dump(config(1433, module)))
    done = start_up(cfg)
    assert done.returncode == 2, done.stderr
    assert f"auth_modules.windows.kerberos.keytab: {keytab} is readable by every user" in done.stderr
    # Like a password file, a keytab must be a regular file (or a secret mount's symlink to one).
    keytab.unlink()
    keytab.mkdir()
    done = start_up(cfg)
    assert done.returncode == 2, done.stderr
    assert f"auth_modules.windows.kerberos.keytab: {keytab} is a directory, not a regular file" in done.stderr


def start_up(cfg: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mssql_memory_exporter", "--config.file", str(cfg)],
        env={**os.environ, "PYTHONPATH": str(ROOT / "exporter")},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_entra_module_with_the_freetds_driver_is_refused_naming_why():
    """Entra ID logins work with Driver 18 only (tests/test_entra.py); with FreeTDS the config says so."""
    cfg = config(1433, {"entra": {"kind": "managed_identity"}})
    with pytest.raises(ConfigError) as info:
        parse_config(cfg)
    assert "targets.sql.driver: freetds cannot log in with an Entra ID access token" in str(info.value)


def test_ntlm_needs_freetds_and_sends_ntlmv2_only(tmp_path):
    cfg = parse_config(config(1433, ntlm_module(tmp_path, NTLM_PASSWORD)), base_dir=tmp_path)
    target = cfg.targets["sql"]
    text = build_connection_string(target, "FreeTDS", "pw", username=f"{DOMAIN}\\{NTLM_USER}")
    assert "UseNTLMv2=yes;" in text and f"UID={DOMAIN}\\{NTLM_USER};" in text
    with pytest.raises(DriverError, match=r"NTLM logins .* need FreeTDS"):
        build_connection_string(
            target, "ODBC Driver 18 for SQL Server", "pw", username=f"{DOMAIN}\\{NTLM_USER}"
        )


def test_kerberos_connection_string_has_no_user_and_the_spn_freetds_would_use():
    cfg = parse_config(
        config(
            1433,
            {"kerberos": {"principal": "svc@CORP.EXAMPLE", "realm": "CORP.EXAMPLE"}},
            spn="MSSQLSvc/sql1.corp.example:1433",
        )
    )
    text = build_connection_string(cfg.targets["sql"], "FreeTDS", "")
    assert "Trusted_Connection=yes;ServerSPN=MSSQLSvc/sql1.corp.example:1433;REALM=CORP.EXAMPLE;" in text
    assert "UID=" not in text and "PWD=" not in text
    # What FreeTDS derives without ServerSPN: a dotless host name is replaced by a dotted canonical one.
    assert freetds_spn("localhost", 1433) == "MSSQLSvc/localhost:1433"
    assert (
        freetds_spn("sql1.corp.example", 1433, "CORP.EXAMPLE")
        == "MSSQLSvc/sql1.corp.example:1433@CORP.EXAMPLE"
    )
