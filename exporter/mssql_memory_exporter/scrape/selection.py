"""Which collectors a scrape runs: the target's enabled set (config), narrowed per probe by `collect[]`,
plus what the enabled ones need.

A collector that is off is not in the batch and exports nothing, not even its success series. When an
enabled collector needs one that is off (its `needs`), the needed one is pulled in quietly: its sections
go into the batch and it runs, but none of its series are exported, so `collect[]=ssd_pools` works on its
own. The batch of each set is rendered once; the plans of recent sets are kept in a small LRU.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from ..collectors.base import CollectorRecord, Section
from ..collectors.files import FILES_TAG
from ..connection.batch import sections_of

# Distinct collector sets whose plans are kept: a site uses a handful (the config's, and one per
# narrowed Prometheus job); a client probing many combinations only costs renders, never memory.
PLAN_CACHE_SIZE = 32


class SelectionError(ValueError):
    """A collector name that is unknown, or off for the target; the message names it."""


def known_names(collectors: Iterable[CollectorRecord]) -> str:
    return ", ".join(record.name for record in collectors)


def check_needs(collectors: Sequence[CollectorRecord]) -> None:
    """Every `needs` names a collector listed earlier (it must run first in the same scrape)."""
    seen: set[str] = set()
    names = {record.name for record in collectors}
    for record in collectors:
        for needed in record.needs:
            if needed not in names:
                raise ValueError(f"collector {record.name} needs {needed!r}, which is not a collector")
            if needed not in seen:
                raise ValueError(f"collector {record.name} needs {needed}, which must be listed before it")
        seen.add(record.name)


def enabled_names(
    collectors: Sequence[CollectorRecord], include: Collection[str] | None, exclude: Collection[str] | None
) -> frozenset[str]:
    """The names a config's `include` (only these) or `exclude` (all but these) turns on; neither: all.
    The config has already checked the names."""
    every = [record.name for record in collectors]
    if include is not None:
        return frozenset(name for name in every if name in include)
    if exclude is not None:
        return frozenset(name for name in every if name not in exclude)
    return frozenset(every)


def narrow(
    requested: Iterable[str], enabled: Collection[str], collectors: Sequence[CollectorRecord], target: str
) -> frozenset[str]:
    """The set a probe's `collect[]` values ask for. A name the target's config turned off is refused
    rather than ignored: a narrowed job that silently exported nothing would look like a broken server."""
    known = {record.name for record in collectors}
    chosen: set[str] = set()
    for name in requested:
        if not name:
            raise SelectionError("query parameter 'collect[]' is empty; give a collector name")
        if name not in known:
            raise SelectionError(
                f"unknown collector {name[:64]!r} in collect[]; known: {known_names(collectors)}"
            )
        if name not in enabled:
            raise SelectionError(
                f"collector {name!r} is off for target {target!r} (its collectors setting in the config); "
                "collect[] can only narrow the collectors a target has on"
            )
        chosen.add(name)
    return frozenset(chosen)


@dataclass(frozen=True)
class Plan:
    """What one collector set costs a scrape: the collectors to run, in order, and the batch's sections."""

    exported: frozenset[str]  # their metrics and success/duration series are exported
    run: tuple[CollectorRecord, ...]  # exported ones plus the ones they need, in COLLECTORS order
    fast: tuple[Section, ...]  # sent with every scrape
    slow: tuple[Section, ...]  # sent on the slow cadence
    # The file list is in the batch: it alone answers the file catalog's asks for an early refresh and
    # for volume lookups, which other sets must leave for a set that can answer them.
    reads_files: bool


def plan_for(collectors: Sequence[CollectorRecord], enabled: frozenset[str]) -> Plan:
    by_name = {record.name: record for record in collectors}
    wanted = set(enabled & by_name.keys())
    pending = list(wanted)
    while pending:  # the closure of `needs`
        for needed in by_name[pending.pop()].needs:
            if needed not in wanted:
                wanted.add(needed)
                pending.append(needed)
    run = tuple(record for record in collectors if record.name in wanted)
    sections = sections_of(run)
    return Plan(
        exported=frozenset(enabled & by_name.keys()),
        run=run,
        fast=tuple(s for s in sections if not s.slow),
        slow=tuple(s for s in sections if s.slow),
        reads_files=any(s.tag == FILES_TAG for s in sections),
    )


class Planner:
    """Plans by enabled set, the most recently used PLAN_CACHE_SIZE kept; safe from many threads."""

    def __init__(self, collectors: Sequence[CollectorRecord]) -> None:
        check_needs(collectors)
        self.collectors = tuple(collectors)
        self._plans: OrderedDict[frozenset[str], Plan] = OrderedDict()
        self._lock = threading.Lock()

    def plan(self, enabled: frozenset[str]) -> Plan:
        with self._lock:
            found = self._plans.get(enabled)
            if found is not None:
                self._plans.move_to_end(enabled)
                return found
        made = plan_for(self.collectors, enabled)  # outside the lock: two threads may both make it
        with self._lock:
            self._plans[enabled] = made
            while len(self._plans) > PLAN_CACHE_SIZE:
                self._plans.popitem(last=False)
        return made
