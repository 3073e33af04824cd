"""HTTP basic auth against the file's bcrypt hashes, with a cache that keeps bcrypt off the hot path."""

from __future__ import annotations

import base64
import binascii
import contextlib
import hmac
import logging
import re
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping

import bcrypt

log = logging.getLogger(__name__)


class BasicAuthChecker:
    """Checks `Authorization: Basic` against bcrypt hashes, caching recent successes.

    bcrypt is slow on purpose (~70 ms at cost 10), too slow to pay on every scrape; a success is
    remembered for `cache_seconds` under an HMAC of (user, hash, password) with a key made at start, so
    the cache never holds a password and a changed hash invalidates its entries. Failures are not cached.

    Checks run one at a time in arrival order, as exporter-toolkit's behind its mutex, so guessing costs
    the guesser full bcrypt time without starving the CPU, and every check is made however long it waits:
    right credentials are answered 200, slowly under a flood, never refused unchecked. What is bounded is
    the work per client: the same credentials checked at once are checked once (Prometheus opens many
    probes together with one password), and a client (remote address) with MAX_CHECKS_PER_CLIENT other
    checks queued or running is refused at once, so a flood from one address holds neither the HTTP
    threads nor the queue, and a right password waits at most for two checks per flooding address.
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
        self._turns = _Turns()
        self._flights: dict[bytes, _Flight] = {}
        self._per_client: dict[str, int] = {}
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

    def check(self, users: Mapping[str, bytes], header: str | None, client: str = "") -> bool:
        """Whether `header` holds the credentials of one of `users`; `client` is the remote address the
        per-client bound counts by."""
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
        with self._lock:
            flight = self._flights.get(key)
            joined = flight is not None
            busy = not joined and self._per_client.get(client, 0) >= MAX_CHECKS_PER_CLIENT
            if flight is None and not busy:
                self._per_client[client] = self._per_client.get(client, 0) + 1
                flight = self._flights[key] = _Flight()
        if flight is None:
            log.debug("basic auth refused unchecked: checks of this client waiting", extra={"remote": client})
            return False
        if joined:
            flight.done.wait()
            return flight.ok
        ok = False
        try:
            with self._turns.turn():
                ok = _checkpw(password.encode(), target)
                for dummy in padding:
                    _checkpw(password.encode(), dummy)
            ok = ok and hashed is not None
            if ok:
                self._remember(key)
        finally:
            with self._lock:
                del self._flights[key]
                left = self._per_client.pop(client) - 1
                if left:
                    self._per_client[client] = left
            flight.ok = ok
            flight.done.set()
        return ok

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


# bcrypt checks one client may have queued or running at once (identical credentials count once).
MAX_CHECKS_PER_CLIENT = 2
DEFAULT_COST = 10  # bcrypt's own default, for the dummy check when no users are configured
_COST = re.compile(rb"\$2[abxy]?\$(\d\d)\$")


class _Flight:
    """One bcrypt check under way, which checks of the same credentials wait for instead of repeating."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.ok = False


class _Turns:
    """One check at a time, in the order they arrived (a ticket queue: a plain lock lets a late thread
    overtake ones that have waited long, so under a flood a right password could wait without bound)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._next = 0
        self._serving = 0

    @contextlib.contextmanager
    def turn(self) -> Iterator[None]:
        with self._cond:
            ticket = self._next
            self._next += 1
            while ticket != self._serving:
                self._cond.wait()
        try:
            yield
        finally:
            with self._cond:
                self._serving += 1
                self._cond.notify_all()


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
