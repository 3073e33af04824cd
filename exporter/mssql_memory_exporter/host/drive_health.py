"""Drive health: smartctl read in a background thread, one drive at a time, on a slow cadence of its own.

A SMART read can take seconds (a busy controller, a drive spinning up) and, on a dying drive, forever;
none of that may reach a scrape. Scrapes read only the last good reading of each drive, with its age,
from memory. One drive at a time, because several smartctl processes against one controller at once
gain nothing and can time out together.

A drive that fails to read keeps its last good reading (exported with a growing age) and its failure is
logged once per change, not once per attempt. A drive asleep (exit bit 1 under -n standby) is not a
failure: its last reading stays.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ..config.drives import DriveConfig, DriveHealthConfig, command_words
from . import smartctl
from .drive_parse import DriveReading, parse

log = logging.getLogger(__name__)

Runner = Callable[[Sequence[str], float], smartctl.Outcome]


@dataclass
class DriveState:
    """What the exporter knows about one configured drive."""

    config: DriveConfig
    reading: DriveReading | None = None
    findings: dict[str, bool] = field(default_factory=dict)
    partial: bool = False
    read_at: float | None = None  # clock() of the last good reading
    attempted: bool = False
    ok: bool = True  # the last attempt gave a reading, or found the drive asleep
    error: str | None = None
    # Host bytes the drives that were in this slot before a replacement had written, so that a pool's sum
    # over its slots never goes down when a drive is swapped (drive_written_bytes).
    retired_host_bytes: float = 0.0


@dataclass(frozen=True)
class DriveView:
    """A copy of one drive's state for a scrape, taken under the monitor's lock."""

    name: str
    reading: DriveReading | None
    findings: Mapping[str, bool]
    partial: bool
    age_seconds: float | None
    attempted: bool
    ok: bool
    slot_host_bytes: float | None  # retired + the current drive's host bytes; None if it reports none


class DriveMonitor:
    def __init__(
        self,
        config: DriveHealthConfig,
        *,
        run: Runner = smartctl.run,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._config = config
        self._run = run
        self._clock = clock
        self._lock = threading.Lock()
        self._states = {drive.name: DriveState(drive) for drive in config.drives}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def redact_serial(self) -> bool:
        return self._config.redact_serial

    # -- reading -------------------------------------------------------------------------------------

    def argv(self, drive: DriveConfig) -> list[str]:
        program = command_words(drive.smartctl if drive.smartctl is not None else self._config.smartctl)
        return smartctl.command(program, drive.device_path, drive.device_args)

    def read_drive(self, name: str) -> None:
        """Run smartctl for one drive and keep what it says (the background thread's one job)."""
        drive = self._states[name].config
        try:
            outcome = self._run(self.argv(drive), self._config.timeout_seconds)
            reading = parse(outcome.doc) if outcome.doc is not None else None
        except ValueError as exc:
            outcome, reading = (
                smartctl.Outcome(None, error=f"smartctl's JSON is not a drive reading: {exc}"),
                None,
            )
        except Exception as exc:  # the thread must outlive any surprise in one drive's output
            log.exception("drive health: reading failed unexpectedly", extra={"device": name})
            outcome, reading = smartctl.Outcome(None, error=f"unexpected {type(exc).__name__}"), None
        with self._lock:
            self._settle(self._states[name], outcome, reading)

    def _settle(self, state: DriveState, outcome: smartctl.Outcome, reading: DriveReading | None) -> None:
        name = state.config.name
        was_ok = state.ok or not state.attempted
        state.attempted = True
        if reading is not None:
            self._replaced(state, reading)
            state.reading, state.read_at = reading, self._clock()
            state.findings, state.partial = outcome.findings, outcome.partial
            state.ok, state.error = True, None
            if not was_ok:
                log.info("drive health: reading again", extra={"device": name})
            return
        if outcome.asleep:
            state.ok, state.error = True, None
            log.debug("drive health: drive asleep, keeping its last reading", extra={"device": name})
            return
        state.ok = False
        if outcome.error != state.error:
            # Logged when the reason changes, not every interval: a missing smartctl is one line.
            log.warning(
                "drive health: no reading",
                extra={"device": name, "command": " ".join(self.argv(state.config)), "reason": outcome.error},
            )
        state.error = outcome.error

    def _replaced(self, state: DriveState, new: DriveReading) -> None:
        old = state.reading
        if old is None or old.host_written_bytes is None:
            return
        went_back = new.host_written_bytes is not None and new.host_written_bytes < old.host_written_bytes
        other_serial = bool(old.serial and new.serial and old.serial != new.serial)
        if went_back or other_serial:
            # Another drive in the slot (or a counter reset, which no drive does in service): the old
            # drive's bytes stay counted for the pool, the new one starts from its own counter.
            state.retired_host_bytes += old.host_written_bytes
            log.warning(
                "drive health: drive replaced, counting it as a new drive",
                extra={
                    "device": state.config.name,
                    "reason": "serial number changed" if other_serial else "bytes written went backwards",
                },
            )

    def read_all(self) -> None:
        for name in list(self._states):
            if self._stop.is_set():
                return
            self.read_drive(name)

    # -- the thread ------------------------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="drive-health", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _loop(self) -> None:
        while not self._stop.is_set():
            started = self._clock()
            self.read_all()
            # The cadence is per round, so a slow drive does not push the others later and later.
            self._stop.wait(max(0.0, self._config.interval_seconds - (self._clock() - started)))

    # -- for scrapes -----------------------------------------------------------------------------------

    def views(self) -> list[DriveView]:
        now = self._clock()
        with self._lock:
            return [
                DriveView(
                    name=state.config.name,
                    reading=state.reading,
                    findings=dict(state.findings),
                    partial=state.partial,
                    age_seconds=None if state.read_at is None else max(0.0, now - state.read_at),
                    attempted=state.attempted,
                    ok=state.ok,
                    slot_host_bytes=_slot_bytes(state),
                )
                for state in self._states.values()
            ]

    def names(self) -> frozenset[str]:
        return frozenset(self._states)

    def drive_written_bytes(self, names: Iterable[str]) -> float | None:
        """Host bytes written in their life by the drives `names` (and by those they replaced), summed;
        None unless every one of them has reported its bytes."""
        total = 0.0
        with self._lock:
            for name in names:
                state = self._states.get(name)
                value = _slot_bytes(state) if state is not None else None
                if value is None:
                    return None
                total += value
        return total


    def drive_wear(self, names: Iterable[str]) -> dict[str, tuple[float | None, float | None]]:
        """(life used ratio, lifetime host bytes) of the drive now in each named slot, from its last
        reading; drives without a reading are left out. The bytes are the current drive's own (not its
        predecessors'): with its life used they give the rating the drive implies."""
        with self._lock:
            return {
                name: (state.reading.life_used_ratio, state.reading.host_written_bytes)
                for name in names
                if (state := self._states.get(name)) is not None and state.reading is not None
            }


def _slot_bytes(state: DriveState) -> float | None:
    if state.reading is None or state.reading.host_written_bytes is None:
        return None
    return state.retired_host_bytes + state.reading.host_written_bytes
