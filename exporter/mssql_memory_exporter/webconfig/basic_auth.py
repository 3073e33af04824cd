"""HTTP basic auth against the file's bcrypt hashes, with a cache that keeps bcrypt off the hot path."""

from __future__ import annotations

import base64
import binascii
import hmac
import logging
import re
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
        self._dummy: dict[int, bytes] = {}

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
        top = _highest_cost(users)
        # Every check that is not answered from the cache costs the work of one bcrypt at the highest cost
        # in the file, whoever the user is: an unknown user is checked against a throwaway hash of that
        # cost, and a user whose hash is cheaper is topped up with throwaway checks (cost c, c+1 ... top-1
        # add up to 2^top rounds with the user's own 2^c). Otherwise a wrong password for a cost-4 user
        # (3 ms) and an unknown user (70 ms at cost 10) would tell which user names exist.
        target = hashed if hashed is not None else self._dummy_hash(top)
        key = hmac.digest(self._key, b"\x00".join((user.encode(), target, password.encode())), "sha256")
        if hashed is not None and self._cached(key):
            return True
        cost = _cost(target) or top
        padding = [self._dummy_hash(extra) for extra in range(cost, top)]
        # Requests are answered by a bounded set of threads (web/pool.py): a flood of wrong passwords must
        # not hold them all in this queue, so a check that cannot start soon is refused unchecked.
        if not self._bcrypt_lock.acquire(timeout=BCRYPT_WAIT_SECONDS):
            log.debug("basic auth refused unchecked: too many checks waiting")
            return False
        try:
            ok = _checkpw(password.encode(), target)
            for dummy in padding:
                _checkpw(password.encode(), dummy)
        finally:
            self._bcrypt_lock.release()
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

    def _dummy_hash(self, cost: int) -> bytes:
        with self._lock:
            dummy = self._dummy.get(cost)
        if dummy is None:
            dummy = bcrypt.hashpw(secrets.token_bytes(16).hex().encode(), bcrypt.gensalt(cost))
            with self._lock:
                self._dummy[cost] = dummy
        return dummy


# How long a check may wait for the one before it (each takes ~70 ms at cost 10).
BCRYPT_WAIT_SECONDS = 2.0
DEFAULT_COST = 10  # bcrypt's own default, for the dummy check when no users are configured
_COST = re.compile(rb"\$2[abxy]?\$(\d\d)\$")


def _cost(hashed: bytes) -> int | None:
    """The cost factor of a bcrypt hash (`$2b$10$...` -> 10), or None for a hash bcrypt would refuse."""
    match = _COST.match(hashed)
    if match is None or not 4 <= int(match.group(1)) <= 31:
        return None
    return int(match.group(1))


def _highest_cost(users: Mapping[str, bytes]) -> int:
    costs = [cost for cost in map(_cost, users.values()) if cost is not None]
    return max(costs, default=DEFAULT_COST)


def _checkpw(password: bytes, hashed: bytes) -> bool:
    try:
        return bcrypt.checkpw(password, hashed)
    except ValueError:  # longer than bcrypt's 72 bytes, or a hash bcrypt cannot read
        return False
