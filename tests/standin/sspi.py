"""Integrated (Windows) logins for the stand-in: the SSPI exchange inside LOGIN7.

FreeTDS 1.3 sends one of two things in LOGIN7's SSPI field (read from its src/tds/login.c, gssapi.c and
challenge.c):

* an empty user name with `Trusted_Connection=yes`: a plain Kerberos AP-REQ (the krb5 mechanism, not
  SPNEGO) asking for mutual authentication, so the server answers with an SSPI token (0xED) holding the
  AP-REP in the same message as the login answer; the client sends nothing more;
* a `DOMAIN\\user` name: an NTLM NEGOTIATE message; the server answers with an SSPI token holding the
  CHALLENGE and nothing else, the client sends the AUTHENTICATE message in an SSPI packet (type 0x11),
  and only then does the server answer the login.

`KerberosAcceptor` checks tickets with python-gssapi against its own keytab (a ticket for another SPN
cannot be decrypted with it); `NtlmAcceptor` checks NTLM answers with pyspnego against a user file
(`DOMAIN:user:password` lines, pyspnego's NTLM_USER_FILE format). A failed exchange is refused the way
SQL Server refuses it: 18452, "untrusted domain" (the errorlog's 17806 "SSPI handshake failed" never
reaches the client). An authenticated Windows user without a login gets 18456 with state 1, the only
state SQL Server shows a client (the real reason is in its errorlog).
"""

from __future__ import annotations

import os
import struct
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from tests.standin.tds import SqlError, login_failed_error

UNTRUSTED_DOMAIN = SqlError(
    18452,
    "Login failed. The login is from an untrusted domain and cannot be used with Integrated authentication.",
    severity=14,
    state=1,
)

NTLM_SIGNATURE = b"NTLMSSP\x00"


class Exchange(Protocol):
    """One login's SSPI conversation: `step` takes the client's token and returns the server's answer
    (empty when there is none); `user` is set once the client is authenticated."""

    complete: bool
    user: str | None

    def step(self, token: bytes) -> bytes: ...


class SspiRefused(Exception):
    """The client's token did not authenticate it; the message is for the stand-in's records only."""


@dataclass
class WindowsLogins:
    """What the stand-in accepts: Kerberos (with a keytab) and/or NTLM (with a user file), and which
    authenticated Windows users have a login (`CREATE LOGIN [...] FROM WINDOWS`)."""

    keytab: Path | None = None
    ntlm_user_file: Path | None = None
    logins: set[str] = field(default_factory=set)
    # Every exchange's outcome, for the tests: (mechanism, user or None, reason or "").
    seen: list[tuple[str, str | None, str]] = field(default_factory=list)
    # NTLM only: the length of each AUTHENTICATE message's NT response; 24 bytes is NTLMv1, NTLMv2's
    # carries a blob and is longer.
    nt_response_lengths: list[int] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self, first_token: bytes) -> Exchange:
        if first_token.startswith(NTLM_SIGNATURE):
            if self.ntlm_user_file is None:
                raise SspiRefused("NTLM login but the stand-in has no NTLM user file")
            return _NtlmExchange(self.ntlm_user_file, self.nt_response_lengths)
        if self.keytab is None:
            raise SspiRefused("Kerberos login but the stand-in has no keytab")
        return _KerberosExchange(self.keytab)

    def verdict(self, mechanism: str, user: str | None, reason: str = "") -> SqlError | None:
        with self._lock:
            self.seen.append((mechanism, user, reason))
        if user is None:
            return UNTRUSTED_DOMAIN
        if user.lower() not in {name.lower() for name in self.logins}:
            return login_failed_error(user)
        return None

    def allow(self, names: Iterable[str]) -> None:
        self.logins.update(names)


class _KerberosExchange:
    mechanism = "kerberos"

    def __init__(self, keytab: Path) -> None:
        import gssapi  # the test extras; only a Kerberos login needs it

        # The keytab is read at each login, so a test may write it after the server started.
        creds = gssapi.Credentials(usage="accept", store={"keytab": str(keytab)})
        self._context = gssapi.SecurityContext(creds=creds, usage="accept")
        self.complete = False
        self.user: str | None = None

    def step(self, token: bytes) -> bytes:
        import gssapi.exceptions

        try:
            answer = self._context.step(token)
            # python-gssapi raises a failed step's error on the next use of the context, here.
            self.complete = self._context.complete
        except gssapi.exceptions.GSSError as exc:
            raise SspiRefused(f"AcceptSecurityContext failed: {exc.gen_message()}") from None
        if self.complete:
            # SQL Server shows a Kerberos login as DOMAIN\user; here the realm plays the domain.
            principal = str(self._context.initiator_name)
            name, _, realm = principal.partition("@")
            self.user = f"{realm.split('.')[0]}\\{name}" if realm else name
        return answer or b""


class _NtlmExchange:
    mechanism = "ntlm"

    def __init__(self, user_file: Path, nt_response_lengths: list[int]) -> None:
        import spnego

        self._nt_response_lengths = nt_response_lengths
        # pyspnego's pure-Python NTLM acceptor reads its users from the file NTLM_USER_FILE names.
        os.environ["NTLM_USER_FILE"] = str(user_file)
        self._context = spnego.server(protocol="ntlm", options=spnego.NegotiateOptions.use_ntlm)
        self.complete = False
        self.user: str | None = None

    def step(self, token: bytes) -> bytes:
        from spnego.exceptions import SpnegoError

        if token.startswith(NTLM_SIGNATURE) and len(token) >= 24 and token[8] == 3:
            # AUTHENTICATE: NtChallengeResponseFields' length at offset 20 (MS-NLMP 2.2.1.3).
            self._nt_response_lengths.append(struct.unpack_from("<H", token, 20)[0])
        try:
            answer = self._context.step(token)
        except SpnegoError as exc:
            raise SspiRefused(f"NTLM: {exc.message}") from None
        self.complete = self._context.complete
        if self.complete:
            self.user = str(self._context.client_principal)
        return answer or b""
