"""HTTP basic auth against the file's bcrypt hashes, with a cache that keeps bcrypt off the hot path."""

from __future__ import annotations

import base64
import binascii
import hmac
import logging
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping

import bcrypt

log = logging.getLogger(__name__)


class BasicAuthChecker:
    """Checks `Authorization: Basic` against bcrypt hashes, caching recent successes.

    bcrypt is slow on purpose (~70 ms at cost 10), too slow to pay on every scrape; a success is
    remembered for `cache_seconds` under an HMAC of (user, hash, password) with a key made at start, so
    the cache never holds a password and a changed hash invalidates its entries. Failures are not cached
    and run one at a time, so guessing costs the guesser full bcrypt time without starving the CPU.
    """

    def __init__(
        self,
        *,
        cache_seconds: float = 60.0,
        cache_size: int = 256,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._key = secrets.token_bytes(32)
        self._cache: OrderedDict[bytes, float] = OrderedDict()
        self._cache_seconds = cache_seconds
        self._cache_size = cache_size
        self._clock = clock
        self._lock = threading.Lock()
        self._bcrypt_lock = threading.Lock()
        self._dummy: dict[bytes, bytes] = {}

    @staticmethod
    def parse(header: str | None) -> tuple[str, str] | None:
        """(user, password) from an Authorization header value, or None if it is not valid Basic auth."""
        if not header:
            return None
        scheme, _, token = header.strip().partition(" ")
        if scheme.lower() != "basic" or not token or len(token) > 4096:
            return None
        try:
            decoded = base64.b64decode(token.strip(), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return None
        user, sep, password = decoded.partition(":")
        return (user, password) if sep else None

    def check(self, users: Mapping[str, bytes], header: str | None) -> bool:
        credentials = self.parse(header)
        if credentials is None:
            return False
        user, password = credentials
        hashed = users.get(user)
        # An unknown user is checked against a throwaway hash of the same cost, so the answer takes as
        # long as for a known user and timing does not tell which user names exist.
        target = hashed if hashed is not None else self._dummy_hash(users)
        key = hmac.digest(self._key, b"\x00".join((user.encode(), target, password.encode())), "sha256")
        if hashed is not None and self._cached(key):
            return True
        with self._bcrypt_lock:
            try:
                ok = bcrypt.checkpw(password.encode(), target)
            except ValueError:  # longer than bcrypt's 72 bytes, or a hash bcrypt cannot read
                ok = False
        if ok and hashed is not None:
            self._remember(key)
            return True
        return False

    def _cached(self, key: bytes) -> bool:
        with self._lock:
            expires = self._cache.get(key)
            if expires is None:
                return False
            if expires < self._clock():
                del self._cache[key]
                return False
            return True

    def _remember(self, key: bytes) -> None:
        with self._lock:
            self._cache[key] = self._clock() + self._cache_seconds
            self._cache.move_to_end(key)
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)

    def _dummy_hash(self, users: Mapping[str, bytes]) -> bytes:
        costs = [int(hashed[4:6]) for hashed in users.values()]
        cost = f"{max(costs) if costs else 10:02d}".encode()
        with self._lock:
            dummy = self._dummy.get(cost)
        if dummy is None:
            dummy = bcrypt.hashpw(secrets.token_bytes(16).hex().encode(), bcrypt.gensalt(int(cost)))
            with self._lock:
                self._dummy[cost] = dummy
        return dummy
