"""Warnings that repeat every scrape, logged once and then summarised.

A target that is down is scraped every 15 s, and each failed scrape used to log the same warning: 5,760
lines a day per target, burying everything else. Now the first failure is logged at once, a change of
reason at once, the same reason again at most once per interval with the count of repeats in between,
and the recovery once, with the count of failures since the first (whatever their reasons). A reason
must therefore not carry anything that changes every scrape (a countdown, a timestamp): each change is
a "new" reason logged at once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

REPEAT_INTERVAL_SECONDS = 300.0


@dataclass
class _Streak:
    reason: str
    since: float  # wall time of the streak's first failure
    logged_at: float  # monotonic time of the last line written
    failures: int = 1
    unlogged: int = 0  # failures since the last line written


class RepeatLimitedLog:
    """One instance per Scraper; keys are (target, what failed)."""

    def __init__(
        self,
        logger: logging.Logger,
        interval: float = REPEAT_INTERVAL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._log = logger
        self.interval = interval  # seconds between lines for one streak; 0 logs every failure
        self._clock = clock
        self._streaks: dict[tuple[str, str], _Streak] = {}
        self._lock = threading.Lock()

    def failed(
        self,
        target: str,
        what: str,
        reason: str,
        msg: str,
        *,
        level: int = logging.WARNING,
        exc_info: BaseException | None = None,
        **extra: object,
    ) -> None:
        """`exc_info`: an exception whose traceback goes with the streak's first line (and a new
        reason's), not with the summaries: one traceback says where; repeating it says nothing more."""
        now = self._clock()
        with self._lock:
            streak = self._streaks.get((target, what))
            if streak is None:
                self._streaks[(target, what)] = _Streak(reason, time.time(), now)
                repeats = None
            elif streak.reason != reason:
                # A new reason is logged at once, but the target has been failing all along (a refused
                # login, then its back-off): the recovery line counts every failure since the first.
                self._streaks[(target, what)] = _Streak(reason, streak.since, now, streak.failures + 1)
                repeats = None
            else:
                streak.failures += 1
                streak.unlogged += 1
                if now - streak.logged_at < self.interval:
                    return
                repeats = (streak.unlogged, streak.since)
                streak.unlogged = 0
                streak.logged_at = now
        fields: dict[str, object] = {"target": target, **extra, "err": reason}
        if repeats is not None:
            count, since = repeats
            fields["repeated"] = count
            fields["failing_since"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(since))
        self._log.log(level, msg, extra=fields, exc_info=exc_info if repeats is None else None)

    def succeeded(self, target: str, what: str, msg: str, **extra: object) -> None:
        if not self._streaks:  # nothing failing anywhere: the common case (one call per collector), no lock
            return
        with self._lock:
            streak = self._streaks.pop((target, what), None)
        if streak is not None:
            self._log.info(msg, extra={"target": target, **extra, "failures": streak.failures})

    def forget(self, target: str) -> None:
        """Drop a target's streaks: it was removed or now points elsewhere (a reload), so its next
        failure starts a new story and no recovery line speaks of the old one."""
        with self._lock:
            for key in [key for key in self._streaks if key[0] == target]:
                del self._streaks[key]
