"""Entra ID (federated authentication) logins for the stand-in: the FEDAUTH feature extension of LOGIN7 with
an access token, as Microsoft's ODBC Driver 18 sends it when given SQL_COPT_SS_ACCESS_TOKEN (MS-TDS 2.2.6.4
FeatureExt, FeatureId 0x02, library 0x01 "security token"), and the token checked as Azure SQL would: a
JWT signed by a key the test makes (PyJWT verifies it), for the SQL resource, not expired.

A refused token gets SQL Server's failed-login error, 18456 with state 1 (the only state a client sees),
naming the user as SQL Server names a token login it cannot map: '<token-identified principal>'.
"""

from __future__ import annotations

import struct
import threading
from dataclasses import dataclass, field

import jwt

from tests.standin.tds import SqlError

FEDAUTH = 0x02
TERMINATOR = 0xFF
LIBRARY_SECURITY_TOKEN = 0x01
FEATUREEXTACK = 0xAE
_OPTION_FLAGS3 = 27
_EXTENSION_FLAG = 0x10  # fExtension: ibExtension points at the FeatureExt block's offset
_IB_EXTENSION = 56
AUDIENCE = "https://database.windows.net/"
TOKEN_PRINCIPAL = "<token-identified principal>"


def refused() -> SqlError:
    return SqlError(18456, f"Login failed for user '{TOKEN_PRINCIPAL}'.", severity=14, state=1)


def features(payload: bytes) -> dict[int, bytes]:
    """LOGIN7's feature extensions by id (empty when the client sent none)."""
    if len(payload) <= _OPTION_FLAGS3 or not payload[_OPTION_FLAGS3] & _EXTENSION_FLAG:
        return {}
    pointer = struct.unpack_from("<H", payload, _IB_EXTENSION)[0]
    pos = struct.unpack_from("<I", payload, pointer)[0]
    found: dict[int, bytes] = {}
    while pos < len(payload) and payload[pos] != TERMINATOR:
        feature, length = payload[pos], struct.unpack_from("<I", payload, pos + 1)[0]
        found[feature] = payload[pos + 5 : pos + 5 + length]
        pos += 5 + length
    return found


def access_token(payload: bytes) -> str | None:
    """The access token of a FEDAUTH security-token login, or None for any other login."""
    data = features(payload).get(FEDAUTH)
    if not data or data[0] >> 1 != LIBRARY_SECURITY_TOKEN:
        return None
    length = struct.unpack_from("<I", data, 1)[0]
    return data[5 : 5 + length].decode("utf-16-le")


def encode_feature_ack() -> bytes:
    """FEATUREEXTACK acknowledging FEDAUTH (a security token has no acknowledgement data)."""
    return bytes([FEATUREEXTACK, FEDAUTH]) + struct.pack("<I", 0) + bytes([TERMINATOR])


@dataclass
class EntraLogins:
    """What the stand-in accepts: tokens signed by `public_key` (PEM) for `audience`, from principals
    (`oid` claims, the object id Azure SQL maps a login to) that have a login."""

    public_key: bytes
    audience: str = AUDIENCE
    logins: set[str] = field(default_factory=set)
    # Every token's outcome, for the tests: (oid or None, reason or "").
    seen: list[tuple[str | None, str]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def verdict(self, token: str) -> tuple[SqlError | None, str]:
        """(refusal or None, the user as SQL Server shows it)."""
        try:
            claims = jwt.decode(token, self.public_key, algorithms=["RS256"], audience=self.audience)
        except jwt.PyJWTError as exc:
            self._record(None, f"{type(exc).__name__}: {exc}")
            return refused(), TOKEN_PRINCIPAL
        oid = str(claims.get("oid", ""))
        self._record(oid, "" if oid in self.logins else "no login for this principal")
        if oid not in self.logins:
            return refused(), TOKEN_PRINCIPAL
        return None, str(claims.get("upn") or claims.get("appid") or oid)

    def _record(self, oid: str | None, reason: str) -> None:
        with self._lock:
            self.seen.append((oid, reason))
