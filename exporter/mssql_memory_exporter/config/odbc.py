"""ODBC drivers and connection strings: which driver a target uses, and how its pairs are quoted."""

from __future__ import annotations

import hashlib
import re

from pydantic import (
    SecretStr,
)

from .errors import ConfigError, DriverError
from .fields import FREETDS, ODBC17, ODBC18, DriverKind
from .models import TargetConfig
from .windows_auth import freetds_spn, is_ntlm_user

# Microsoft's driver library by file name: the `msodbc` extra's driver goes by its path, which unixODBC
# takes where a registered name goes (connection/msodbc.py).
_MS_LIBRARY = re.compile(r"(?:^|/)libmsodbcsql-(1[78])\.[^/]*$")


def driver_kind(driver: str) -> DriverKind:
    """Which connection-string dialect an installed driver name (from pyodbc.drivers(), or the path of
    the packaged Driver 18) speaks."""
    lowered = driver.lower()
    library = _MS_LIBRARY.search(lowered)
    if library is not None:
        return "odbc18" if library.group(1) == "18" else "odbc17"
    if "freetds" in lowered:
        return "freetds"
    if lowered.startswith("odbc driver 18 "):
        return "odbc18"
    if lowered.startswith("odbc driver 17 "):
        return "odbc17"
    raise DriverError(
        f"unsupported ODBC driver {driver!r}; use ODBC Driver 18 or 17 for SQL Server or FreeTDS"
    )


def resolve_driver(choice: str, available: list[str], *, encryption: str = "require") -> str:
    """The installed driver name to use for a target's `driver` choice.

    `auto` prefers ODBC Driver 18, then 17, then FreeTDS; with `encryption: strict` only 18 qualifies,
    because neither 17 nor FreeTDS 1.3 speaks TDS 8.
    """
    kinds: dict[str, str] = {}
    for name in available:
        try:
            kinds.setdefault(driver_kind(name), name)
        except DriverError:
            continue
    wanted = ["odbc18", "odbc17", "freetds"] if choice == "auto" else [choice]
    if encryption == "strict":
        wanted = [kind for kind in wanted if kind == "odbc18"]
    for kind in wanted:
        if kind in kinds:
            return kinds[kind]
    installed = ", ".join(available) if available else "none"
    label = {"odbc18": ODBC18, "odbc17": ODBC17, "freetds": FREETDS}
    needed = " or ".join(label.get(kind, kind) for kind in wanted) or choice
    why = " for encryption strict" if encryption == "strict" else ""
    raise DriverError(
        f"driver {choice!r} needs {needed}{why}, which is not installed (installed ODBC drivers: {installed})"
    )


def _odbc_value(value: str) -> str:
    # ODBC connection-string quoting: braces protect ';' and '}'; a closing brace inside is doubled.
    if ";" in value or "}" in value or value.startswith("{") or value != value.strip():
        return "{" + value.replace("}", "}}") + "}"
    return value


_MS_ENCRYPT = {"off": "no", "request": "no", "require": "yes", "strict": "strict"}


def freetds_verifies(target: TargetConfig) -> bool:
    """Whether FreeTDS must check this target's certificate: it encrypts, and nobody said to trust."""
    return target.encryption in ("request", "require") and not target.trust_server_certificate


FREETDS_SYSTEM_CA = "system"  # freetds.conf's name for the system trust store


def freetds_section(target: TargetConfig) -> tuple[str, str]:
    """The freetds.conf section (name, text) that makes FreeTDS check the target's certificate.

    FreeTDS 1.3 takes a CA file only from freetds.conf, and reads that file only for a `Servername=`
    connection string (measured; tests/test_tds_protocol.py), so the address moves into the section.
    The name carries a digest of the text: two configs never share a section, even in one process.
    """
    lines = [f"host = {target.host}"]
    lines.append(f"instance = {target.instance}" if target.instance else f"port = {target.port}")
    lines += [
        "tds version = 7.4",
        f"ca file = {target.ca_file or FREETDS_SYSTEM_CA}",
        "check certificate hostname = yes",
    ]
    body = "".join(f"\t{line}\n" for line in lines)
    digest = hashlib.sha256(f"{target.name}\n{body}".encode()).hexdigest()[:12]
    readable = re.sub(r"[^A-Za-z0-9_-]", "_", target.name)[:40]
    name = f"mssql-exporter-{readable}-{digest}"
    return name, f"[{name}]\n{body}"


def _connection_pairs(
    target: TargetConfig, driver: str, username: str, password: str, realm: str | None = None
) -> list[tuple[str, str]]:
    kind = driver_kind(driver)
    if kind == "freetds":
        if target.encryption == "strict":
            raise DriverError(f"target {target.name}: FreeTDS cannot do strict (TDS 8) encryption")
        if freetds_verifies(target):
            server = [("Servername", freetds_section(target)[0])]
        elif target.instance:
            server = [("Server", f"{target.host}\\{target.instance}")]
        else:
            server = [("Server", target.host), ("Port", str(target.port))]
        # FreeTDS ignores Encrypt=; its own key is Encryption= (design.md, Drivers).
        dialect = [("TDS_Version", "7.4"), ("Encryption", target.encryption), ("ClientCharset", "UTF-8")]
    else:
        if target.encryption == "strict" and kind != "odbc18":
            raise DriverError(f"target {target.name}: {driver} cannot do strict (TDS 8) encryption")
        address = (
            f"{target.host}\\{target.instance}" if target.instance else f"tcp:{target.host},{target.port}"
        )
        server = [("Server", address)]
        dialect = [
            ("Encrypt", _MS_ENCRYPT[target.encryption]),
            ("TrustServerCertificate", "yes" if target.trust_server_certificate else "no"),
        ]
    return [
        ("Driver", driver),
        *server,
        ("Database", target.database),
        *dialect,
        ("APP", "mssql-memory-exporter"),
        *_login_pairs(target, kind, username, password, realm),
    ]


def _login_pairs(
    target: TargetConfig, kind: DriverKind, username: str, password: str, realm: str | None = None
) -> list[tuple[str, str]]:
    """How the driver logs in: a SQL login, NTLM (DOMAIN\\user, FreeTDS) or Kerberos (the ticket cache).
    `realm`: the SPN's realm found at login (krb5.conf's [domain_realm]) when the config sets none."""
    auth = target.auth
    if auth is not None and auth.entra is not None:
        if kind != "odbc18":
            raise DriverError(f"target {target.name}: Entra ID logins need ODBC Driver 18, not {kind}")
        return []  # the access token goes to the driver before it connects (connection/entra.py)
    if auth is not None and auth.kerberos is not None:
        # Trusted_Connection=yes empties FreeTDS's user name, which is what selects GSSAPI; Microsoft's
        # drivers take the same key (on Windows: the service account's own logon).
        pairs = [("Trusted_Connection", "yes")]
        if target.spn is not None:
            pairs.append(("ServerSPN", target.spn))
        realm = auth.kerberos.realm or realm
        if target.spn is None and kind != "freetds" and target.instance is None:
            # Driver 18 derives its own SPN from a reverse lookup (measured: "localhost" became the
            # machine's name); naming the one FreeTDS derives makes both drivers ask the KDC for the
            # same service principal, the one the exporter's error messages name.
            pairs.append(("ServerSPN", freetds_spn(target.host, target.port or 1433, realm)))
        if realm is not None and kind == "freetds":
            pairs.append(("REALM", realm))
        return pairs
    pairs = [("UID", username), ("PWD", password)]
    if is_ntlm_user(username):
        if kind != "freetds":
            raise DriverError(
                f"target {target.name}: NTLM logins (DOMAIN\\user with a password) need FreeTDS; set "
                "driver: freetds (Microsoft's drivers log in to Windows accounts only with Kerberos)"
            )
        pairs.append(("UseNTLMv2", "yes"))  # never the older NTLMv1/LM answers
    return pairs


def _join(pairs: list[tuple[str, str]]) -> str:
    # The driver name is always braced: that is the form every driver manager documents. The closing
    # `;` matters: without it FreeTDS 1.3 keeps a last braced value's closing brace, so a password with
    # `;` or leading/trailing blanks (the values that need braces) never logged in.
    return "".join(
        (f"{key}={{{value.replace('}', '}}')}}}" if key == "Driver" else f"{key}={_odbc_value(value)}") + ";"
        for key, value in pairs
    )


def _username(target: TargetConfig, username: str | None) -> str:
    resolved = username if username is not None else target.username
    if resolved is None:
        raise ConfigError(f"target {target.name}: no username; load the target through ExporterConfig")
    return resolved


def build_connection_string(
    target: TargetConfig,
    driver: str,
    password: str | SecretStr,
    *,
    username: str | None = None,
    realm: str | None = None,
) -> str:
    """ODBC connection string for `target` through the installed `driver` (a pyodbc.drivers() name).

    The username comes from the target's auth module unless given. The result holds the password:
    log `connection_string_redacted()` instead.
    """
    secret = password.get_secret_value() if isinstance(password, SecretStr) else password
    return _join(_connection_pairs(target, driver, _username(target, username), secret, realm))


def connection_string_redacted(target: TargetConfig, driver: str, *, username: str | None = None) -> str:
    """The same connection string with the password replaced, for logs and error messages."""
    return _join(_connection_pairs(target, driver, _username(target, username), "********"))
