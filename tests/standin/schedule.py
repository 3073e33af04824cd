"""Faults on a timetable, for the stand-in run on its own (`python -m tests.standin --fault ...`).

The tests flip `ScenarioHandler.faults` and `Instance.denied` directly; a demo or a manual check has no
test to do that, so these command-line specs say when each fault is on, in seconds since the stand-in
started:

    --fault hang_batch@60-90      no answer to the batch from 60 s to 90 s
    --fault bad_login@120         every login refused from 120 s on
    --fault garbage               every answer garbage, from the start
    --deny sys.dm_os_sys_info:229@30-60   one section denied (error 229 or 300) for a while
    --restart-every 600           the instance restarts (sessions dropped) every 10 minutes
    --moment failover@40          the scenario's moment `failover` (scenario.py `moments:`) happens at
                                  40 s instead of when the file says: an availability group fails over
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, fields

from .handler import Faults, ScenarioHandler
from .scenario import DENIAL_MESSAGES

# The boolean switches of Faults; delay_seconds takes a number and is not scheduled here.
FAULT_KINDS = tuple(f.name for f in fields(Faults) if f.type in (bool, "bool"))
_WINDOW = re.compile(r"^(?P<what>[^@]+?)(?:@(?P<start>\d+(?:\.\d+)?)(?:-(?P<end>\d+(?:\.\d+)?))?)?$")


@dataclass(frozen=True)
class Window:
    start: float = 0.0
    end: float = math.inf

    def covers(self, t: float) -> bool:
        return self.start <= t < self.end


@dataclass(frozen=True)
class FaultSpec:
    kind: str
    window: Window


@dataclass(frozen=True)
class DenySpec:
    view: str
    error: int
    window: Window


@dataclass(frozen=True)
class MomentSpec:
    """A scenario moment brought forward to `at` seconds (it cannot be undone, so it has no end)."""

    name: str
    at: float


def _split(spec: str) -> tuple[str, Window]:
    match = _WINDOW.match(spec.strip())
    if match is None:
        raise ValueError(f"{spec!r}: expected WHAT, WHAT@START or WHAT@START-END (seconds)")
    start = float(match["start"] or 0)
    end = float(match["end"]) if match["end"] else math.inf
    if end <= start:
        raise ValueError(f"{spec!r}: the window ends ({end:g} s) before it starts ({start:g} s)")
    return match["what"], Window(start, end)


def parse_fault(spec: str) -> FaultSpec:
    kind, window = _split(spec)
    if kind not in FAULT_KINDS:
        raise ValueError(f"{spec!r}: unknown fault {kind!r}; known: {', '.join(FAULT_KINDS)}")
    return FaultSpec(kind, window)


def parse_deny(spec: str) -> DenySpec:
    what, window = _split(spec)
    view, _, error = what.partition(":")
    number = int(error) if error.isdigit() else 300 if not error else -1
    if number not in DENIAL_MESSAGES:
        raise ValueError(f"{spec!r}: error must be one of {sorted(DENIAL_MESSAGES)}")
    if not view.startswith("sys."):
        raise ValueError(f"{spec!r}: name a system view, for example sys.dm_os_sys_info")
    return DenySpec(view, number, window)


def parse_moment(spec: str) -> MomentSpec:
    name, window = _split(spec)
    if window.end != math.inf or "@" not in spec:
        raise ValueError(f"{spec!r}: expected NAME@SECONDS, a moment happens once and has no end")
    return MomentSpec(name, window.start)


class FaultSchedule:
    """Applies the specs to a handler as time passes; `apply(t)` is all there is to it, so the tests
    drive it with their own clock and the command line with a thread."""

    def __init__(
        self,
        handler: ScenarioHandler,
        faults: list[FaultSpec],
        denials: list[DenySpec],
        restart_every: float | None = None,
        moments: list[MomentSpec] | None = None,
    ) -> None:
        self.handler = handler
        self.faults = faults
        self.denials = denials
        self.restart_every = restart_every
        self.restarts = 0
        self.moments = list(moments or [])
        for moment in self.moments:  # a name the scenario lacks fails now, not silently at its time
            if moment.name not in handler.instance.moments:
                known = ", ".join(sorted(handler.instance.moments)) or "none"
                raise ValueError(f"moment {moment.name!r}: the scenario has no such moment (has: {known})")

    def apply(self, t: float) -> None:
        for kind in {f.kind for f in self.faults}:
            on = any(f.window.covers(t) for f in self.faults if f.kind == kind)
            setattr(self.handler.faults, kind, on)
        denied = self.handler.instance.denied
        for view in {d.view for d in self.denials}:
            active = [d for d in self.denials if d.view == view and d.window.covers(t)]
            if active:
                denied.add(view, active[0].error)
            else:
                denied.discard(view)
        for moment in self.moments:
            if t >= moment.at:
                self.handler.instance.reach(moment.name)  # once: later calls find it already past
        if self.restart_every and t >= (self.restarts + 1) * self.restart_every:
            self.restarts += 1
            self.handler.instance.restart(drop_sessions=True)

    def run(self, clock: Callable[[], float], stop: threading.Event, tick: float = 0.25) -> None:
        while not stop.wait(tick):
            self.apply(clock())


def run_together(schedules: list[FaultSchedule], tick: float = 0.25) -> threading.Event:
    """Run schedules on one clock, seconds from now, each on a thread of its own: two stand-ins playing
    the replicas of one availability group fail over on the same tick. Set the returned event to stop."""
    origin, stop = time.monotonic(), threading.Event()
    for schedule in schedules:
        threading.Thread(
            target=schedule.run, args=(lambda: time.monotonic() - origin, stop, tick), daemon=True
        ).start()
    return stop
