"""Logging in to one target: the opener a session calls for a new connection.

Everything that depends on the kind of login lives here, not in the scrape: the driver chosen and checked
(FreeTDS's TLS set-up, which passwords it can send), the Kerberos ticket, the back-off after a refused
login, and the words a failed login is reported in.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable

import pyodbc
from pydantic import SecretStr

from ..config import (
    ConfigError,
    TargetConfig,
    build_connection_string,
    driver_kind,
    freetds_verifies,
    resolve_driver,
)
from ..config.windows_auth import freetds_spn
from . import entra, freetds, kerberos
from .driver_version import unsendable_password_reason
from .kerberos import TicketKeeper
from .login_backoff import LoginBackoff, fingerprint, is_login_refused, is_windows_login_refused
from .msodbc import available_drivers
from .session import OpenFn, ScrapeFailed, describe
from .tls_causes import tls_failure_cause

KDC_MARGIN_SECONDS = 1.0
# After a failed Kerberos login, the one question asked of the KDC (why) gets this long.
KDC_DIAGNOSE_SECONDS = 2.0

LOGIN_BACKOFF_REASON = (
    "login refused earlier; not logging in again until the back-off ends (so a lockout policy is not "
    "tripped; mssql_exporter_login_backoff_seconds says when; changing the password ends it)"
)


def login_opener(
    target: TargetConfig, backoff: LoginBackoff, kerberos_keeper: Callable[[], TicketKeeper | None]
) -> OpenFn:
    """How `target` logs in, as the session calls it from a worker thread: the driver and connection
    string resolved at each login (a password file may have changed), the Kerberos ticket made ready,
    the back-off honoured, and a refused or failed login explained in words a DBA can act on.
    `kerberos_keeper` returns the ticket keeper in force: a reload may replace it."""
    def open_connection(login_timeout: int) -> pyodbc.Connection:
        checked_against = None
        attrs: dict[int, bytes] = {}
        entra_settings = target.auth.entra if target.auth is not None else None
        try:
            # Only Driver 18 takes an access token: `auto` means it for an Entra target.
            choice = "odbc18" if entra_settings is not None and target.driver == "auto" else target.driver
            driver = resolve_driver(choice, available_drivers(), encryption=target.encryption)
            if driver_kind(driver) == "freetds" and freetds_verifies(target):
                checked_against = _freetds_ready(target)
            creds = target.credentials()
            kerberos_login = _kerberos_login(target)
            keeper = kerberos_keeper()
            if kerberos_login is not None and keeper is not None:
                # Renew from the keytab, or find the given cache expired; the KDC gets the login's
                # budget less a margin, so its silence is reported (naming it) before the deadline.
                began = time.monotonic()
                keeper.ready(max(0.5, login_timeout - KDC_MARGIN_SECONDS))
                spn = _kerberos_spn(target)
                if spn is not None:
                    left = login_timeout - KDC_MARGIN_SECONDS - (time.monotonic() - began)
                    silent = kerberos.service_ticket_in_time(spn, max(0.5, left))
                    if silent is not None:
                        raise kerberos.KerberosError(f"{silent}; {kerberos_login}")
            if driver_kind(driver) == "freetds":
                # Checked again here: the password file may have changed since start-up.
                unsendable = unsendable_password_reason(driver, creds.password.get_secret_value())
                if unsendable is not None:
                    raise ScrapeFailed(f"target {target.name}: {unsendable}")
            realm = _mapped_realm(target) if kerberos_login is not None else None
            conn_str = build_connection_string(
                target, driver, creds.password, username=creds.username, realm=realm
            )
            if entra_settings is not None:
                token = entra.keeper_for(entra_settings).token()
                attrs[entra.SQL_COPT_SS_ACCESS_TOKEN] = entra.token_struct(token)
                # A refused token backs off until a new one comes (the next refresh), not for ever.
                creds = creds._replace(password=SecretStr(token))
        except (ConfigError, freetds.FreeTdsConfError, kerberos.KerberosError, entra.EntraError) as exc:
            # e.g. the password file vanished: say so, by name, not by value
            raise ScrapeFailed(str(exc)) from None
        credential = fingerprint(creds.username, creds.password.get_secret_value())
        left = backoff.blocked_for(credential)
        if left > 0:
            # No countdown in the reason: it would make every scrape's line "new" to the repeat
            # log (the seconds left are in mssql_exporter_login_backoff_seconds).
            raise ScrapeFailed(LOGIN_BACKOFF_REASON)
        timeout = max(1, min(login_timeout, math.ceil(target.login_timeout_seconds)))
        try:
            cnxn = pyodbc.connect(conn_str, timeout=timeout, autocommit=True, attrs_before=attrs or None)
            backoff.succeeded()
            return cnxn
        except pyodbc.Error as exc:
            ntlm = target.auth is not None and target.auth.ntlm
            if is_login_refused(exc) or (ntlm and is_windows_login_refused(exc)):
                backoff.refused(credential)
            if kerberos_login is not None:
                failure = _kerberos_failure(target, exc, kerberos_login)
                if failure is not None:
                    raise ScrapeFailed(failure) from None
            cause = tls_failure_cause(target, str(exc)) if driver_kind(driver) != "freetds" else None
            if cause is not None:
                raise ScrapeFailed(f"{describe(exc)}; {cause}") from None
            # FreeTDS reports a failed TLS setup as a bare "Unable to connect to data source".
            if "Unable to connect to data source" not in str(exc):
                raise
            if checked_against is None:
                if driver_kind(driver) != "freetds" or target.encryption == "off":
                    raise
                raise ScrapeFailed(
                    f"{describe(exc)}; FreeTDS could not set up TLS: the server offers no encryption "
                    "(trust_server_certificate: true skips only the certificate check; encryption: "
                    f"{target.encryption} still needs TLS; set encryption: off for a server without it)"
                ) from None
            raise ScrapeFailed(
                f"{describe(exc)}; FreeTDS could not set up TLS: the server offers no encryption, or "
                f"its certificate is not signed by {checked_against} or not issued for {target.host}"
            ) from None

    return open_connection


def _mapped_realm(target: TargetConfig) -> str | None:
    """The SPN's realm by krb5.conf's [domain_realm], when the config names neither a realm nor an SPN."""
    auth = target.auth
    if auth is None or auth.kerberos is None or auth.kerberos.realm is not None:
        return None
    if target.spn is not None or target.instance is not None:
        return None
    return kerberos.host_realm(freetds_spn(target.host, target.port or 1433))


def _kerberos_spn(target: TargetConfig) -> str | None:
    """The service principal FreeTDS asks a ticket for; None when not Kerberos or not known here (a
    named instance's port comes from SQL Browser)."""
    auth = target.auth
    if auth is None or auth.kerberos is None:
        return None
    if target.spn is not None:
        return target.spn
    if target.instance is not None:
        return None
    realm = auth.kerberos.realm or _mapped_realm(target)
    return freetds_spn(target.host, target.port or 1433, realm)


def _kerberos_login(target: TargetConfig) -> str | None:
    """For a Kerberos target: who logs in and the service principal asked for, for error messages."""
    auth = target.auth
    if auth is None or auth.kerberos is None:
        return None
    spn = _kerberos_spn(target) or f"MSSQLSvc/{target.host}:<the port SQL Browser gives {target.instance}>"
    return f"Kerberos login as {auth.kerberos.identity()} for service principal {spn}"


def _kerberos_failure(target: TargetConfig, exc: pyodbc.Error, login: str) -> str | None:
    """A failed Kerberos login in words a DBA can act on: who, which SPN (what `setspn -L` checks) and,
    where FreeTDS only says "Unable to connect", the Kerberos library's own reason. None when the
    library finds nothing wrong with the ticket: then it is the TLS set-up (explained by the caller)."""
    if "Unable to connect to data source" not in str(exc):
        return f"{describe(exc)}; {login}"  # the server answered: 18452, 18456, ...
    spn = _kerberos_spn(target)
    why = kerberos.diagnose(spn, KDC_DIAGNOSE_SECONDS) if spn is not None else None
    return f"{describe(exc)}; {login}; the Kerberos library says: {why}" if why else None


def _freetds_ready(target: TargetConfig) -> str:
    """Check, at each login, what FreeTDS will verify the server against; returns it for messages."""
    if target.ca_file is None:
        freetds.ensure(target)
        return "a CA in the system trust store"
    if not os.access(target.ca_file, os.R_OK):
        raise ScrapeFailed(f"target {target.name}: ca_file {target.ca_file} is missing or not readable")
    freetds.ensure(target)
    return f"a CA in {target.ca_file}"
