"""Back off after a refused login, so monitoring never locks its own login out.

Every scrape of a target whose login is refused is one more failed login, and where a lockout policy
applies (Windows logins, or SQL logins with CHECK_POLICY) a Prometheus scraping every 15 s locks the
account within a minute. After a refusal (SQL Server error 18456, SQLSTATE 28000) the target is not
logged in again for a while: 30 s, doubling up to 15 minutes. Scrapes meanwhile answer `mssql_up 0` at
once. A changed password (file content or environment variable, read on each scrape anyway) ends the
back-off at once, as does a successful login. Network errors and timeouts do not count: they say
nothing about the password.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

FIRST_SECONDS = 30.0
MAX_SECONDS = 900.0
_LOGIN_REFUSED_STATE = "28000"
_LOGIN_REFUSED_NATIVE = "(18456)"


def is_login_refused(exc: Exception) -> bool:
    """True for "Login failed": the server answered and refused the credentials."""
    args = [str(arg) for arg in getattr(exc, "args", ())]
    return bool(args) and (args[0] == _LOGIN_REFUSED_STATE or any(_LOGIN_REFUSED_NATIVE in a for a in args))


def is_windows_login_refused(exc: Exception) -> bool:
    """18452: the server could not authenticate a Windows login; for NTLM that is a wrong password,
    which a domain's lockout policy counts like any other."""
    return any("(18452)" in str(arg) for arg in getattr(exc, "args", ()))


def fingerprint(username: str, password: str) -> bytes:
    """Tells a changed credential from the refused one without keeping the password itself around."""
    return hashlib.sha256(f"{username}\0{password}".encode()).digest()


class LoginBackoff:
    """One target's back-off state; safe to use from the scrape workers and the HTTP threads."""

    def __init__(
        self,
        target: str,
        first: float = FIRST_SECONDS,
        cap: float = MAX_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._target = target
        self._first = first
        self._cap = cap
        self._clock = clock
        self._lock = threading.Lock()
        self._refused: bytes | None = None  # fingerprint of the credential last refused
        self._step = 0.0
        self._until = 0.0

    def seconds_left(self) -> float:
        if self._refused is None:  # read every probe: no lock for the common answer (one attribute read)
            return 0.0
        with self._lock:
            return max(0.0, self._until - self._clock()) if self._refused is not None else 0.0

    def blocked_for(self, credential: bytes) -> float:
        """Seconds before a login with `credential` may be tried; 0 when it may be tried now."""
        with self._lock:
            if self._refused is None:
                return 0.0
            if credential != self._refused:
                log.info("password changed, login back-off ended", extra={"target": self._target})
                self._reset()
                return 0.0
            return max(0.0, self._until - self._clock())

    def refused(self, credential: bytes) -> float:
        """Record a refused login; returns the back-off now in force."""
        with self._lock:
            self._step = self._first if credential != self._refused else min(self._cap, self._step * 2)
            self._refused = credential
            self._until = self._clock() + self._step
            step = self._step
        log.warning(
            "login refused; not logging in again before the back-off ends (a lockout policy would count "
            "every attempt); changing the password ends it",
            extra={"target": self._target, "backoff_seconds": round(step)},
        )
        return step

    def succeeded(self) -> None:
        with self._lock:
            self._reset()

    def _reset(self) -> None:
        self._refused = None
        self._step = 0.0
        self._until = 0.0
