"""A scrape of one target: one batch, one round trip, then every collector over the routed rows.

A failed round trip yields `mssql_up 0` and nothing else from the target: never the previous scrape's
values. A failing section or collector yields `mssql_exporter_collector_success{collector} 0` while
the others still export.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from prometheus_client.core import Metric

from ..collectors import COLLECTORS
from ..collectors.base import EXTRA_SECTIONS, FORCE_SLOW, CollectorRecord, ScrapeContext, Section
from ..collectors.custom import due_sections
from ..collectors.server_properties import ENGINE_EDITION_KEY, PRODUCT_VERSION_KEY
from ..collectors.sys_info import MEMO_KEY as START_TIME_KEY
from ..collectors.view import HostView
from ..config import (
    ExporterConfig,
    TargetConfig,
)
from ..connection import freetds, kerberos
from ..connection.batch import BatchShapeError, render_batch, route, sections_of
from ..connection.login import login_opener
from ..connection.login_backoff import LoginBackoff
from ..connection.session import ScrapeFailed, TargetConnection
from ..metrics.builder import FamilyBuilder, MissingData
from . import platform
from .repeat_log import RepeatLimitedLog
from .scrape_metrics import (
    COLLECTOR_DURATION,
    COLLECTOR_ENABLED,
    COLLECTOR_SUCCESS,
    LOGIN_BACKOFF,
    SCRAPE_DURATION,
    UP,
)
from .selection import Plan, Planner

log = logging.getLogger(__name__)


DEFAULT_REFRESH_SECONDS = 300.0
# Batch texts kept (LRU): one per collector set and slow/fast variant, plus per-target volume lookups.
RENDERED_CACHE_SIZE = 64


@dataclass
class _TargetState:
    target: TargetConfig  # the config this state was built for
    connection: TargetConnection
    backoff: LoginBackoff
    memo: dict[str, object] = field(default_factory=dict)
    next_slow_at: float = 0.0  # monotonic time the slow sections are due again
    # The same for probes narrowed by collect[], per collector set: each keeps its own cadence, so a
    # narrowed probe never delays the refresh of the target's full set, nor the other way round.
    narrowed_slow_at: dict[frozenset[str], float] = field(default_factory=dict)
    # Collectors the target's platform cannot answer, decided once from its EngineEdition (platform.py).
    left_out: frozenset[str] = frozenset()
    left_out_why: dict[str, str] = field(default_factory=dict)
    platform_pending: bool = True
    # Collectors whose objects this server lacks (platform.missing_objects: an older release, a Managed
    # Instance update policy), and the SQL Server start time they were found missing at: after a restart
    # (an upgrade is one) they are tried again.
    missing: frozenset[str] = frozenset()
    missing_at_start: object = None


# Names listed per kind of change in the reload summary; a 10,000-target reload names the first ones.
SUMMARY_NAMES = 10


@dataclass
class ReloadSummary:
    """What a reload changed, by target name: the old config's targets against the new one's (issue 36:
    it was counted from the targets probed so far, so a reload before any probe reported every target
    as added)."""

    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)  # connection settings changed: a new connection
    kept_connection: list[str] = field(default_factory=list)  # other settings changed: connection kept
    unchanged: list[str] = field(default_factory=list)

    @classmethod
    def diff(cls, old: ExporterConfig, new: ExporterConfig) -> ReloadSummary:
        summary = cls()
        for name in sorted(set(old.targets) | set(new.targets)):
            before, after = old.targets.get(name), new.targets.get(name)
            if before is None:
                summary.added.append(name)
            elif after is None:
                summary.removed.append(name)
            elif before.connection_key() != after.connection_key():
                summary.changed.append(name)
            elif before != after or before.enabled_collectors != after.enabled_collectors:
                summary.kept_connection.append(name)
            else:
                summary.unchanged.append(name)
        return summary

    def text(self) -> str:
        parts = [
            f"{what} {_names(names)}"
            for what, names in (
                ("added", self.added),
                ("removed", self.removed),
                ("reconnecting", self.changed),
                ("refreshed", self.kept_connection),
            )
            if names
        ]
        parts.append(f"unchanged {len(self.unchanged)}")
        return "; ".join(parts)


def _names(names: list[str]) -> str:
    shown = ",".join(names[:SUMMARY_NAMES])
    more = len(names) - SUMMARY_NAMES
    return f"{len(names)} ({shown}{f' and {more} more' if more > 0 else ''})"


SCRAPE = ""  # the key of the round trip's own outcome in `outcomes`


@dataclass(frozen=True)
class Outcome:
    """What became of one collector in a probe, for --check-target (app/check_target.py)."""

    status: str  # ok, failed, left out
    reason: str = ""
    error_number: int = 0  # SQL Server's error number when a section failed
    rows: int = 0
    series: int = 0


def _records_of(config: ExporterConfig) -> tuple[CollectorRecord, ...]:
    return tuple(getattr(config, "collector_records", COLLECTORS))


def _rows(results: dict, record: CollectorRecord) -> int:
    total = 0
    for tag in record.sections:
        result = results.get(tag)
        if result is not None:
            total += len(result.raw) if result.raw else len(result.rows)
    return total


class Scraper:
    """Holds one connection per configured target; `probe` is safe to call from many threads."""

    def __init__(
        self,
        config: ExporterConfig,
        collectors: Sequence[CollectorRecord] | None = None,
        host: HostView | None = None,
    ) -> None:
        self._config = config
        # Without an explicit list: the built-in collectors and the config's custom ones, again at reload.
        self._fixed_collectors = collectors is not None
        self._use_collectors(collectors if collectors is not None else _records_of(config))
        self._host = host
        # The batch text is rendered once per variant and reused, so the server reuses its plans too.
        self._rendered: OrderedDict[tuple[Section, ...], str] = OrderedDict()
        self._rendered_lock = threading.Lock()
        self._states: dict[str, _TargetState] = {}
        self._states_lock = threading.Lock()
        self.repeat_log = RepeatLimitedLog(log)  # repeated failures logged once, then counted
        # Here, before any worker thread exists: it may set FREETDSCONF (see freetds.py).
        freetds.prepare(config.targets.values())
        # Likewise KRB5CCNAME, and the first tickets from a keytab (kerberos.py).
        self._kerberos = kerberos.prepare(config)

    def _use_collectors(self, collectors: Sequence[CollectorRecord]) -> None:
        self._collectors = tuple(collectors)
        self._planner = Planner(self._collectors)
        self._names = frozenset(record.name for record in self._collectors)
        self._sections: list[Section] = sections_of(self._collectors)
        self._fast = tuple(s for s in self._sections if not s.slow)
        self._slow = tuple(s for s in self._sections if s.slow)

    @property
    def collectors(self) -> tuple[CollectorRecord, ...]:
        return self._collectors

    @property
    def batch_sql(self) -> str:
        """The batch of a refresh scrape, every static section included."""
        return self._batch_for(self._fast + self._slow)

    def batches_for(self, enabled: frozenset[str]) -> tuple[str, str]:
        """The batch texts a collector set sends: without and with its slow sections."""
        plan = self._planner.plan(enabled)
        return self._batch_for(plan.fast), self._batch_for(plan.fast + plan.slow)

    def _batch_for(self, sections: tuple[Section, ...]) -> str:
        with self._rendered_lock:
            sql = self._rendered.get(sections)
            if sql is None:
                sql = self._rendered[sections] = render_batch(sections)
                while len(self._rendered) > RENDERED_CACHE_SIZE:
                    self._rendered.popitem(last=False)
            else:
                self._rendered.move_to_end(sections)
            return sql

    def _sections_for(self, state: _TargetState, plan: Plan, narrowed: bool) -> tuple[Section, ...]:
        due_at = state.narrowed_slow_at.get(plan.exported, 0.0) if narrowed else state.next_slow_at
        due = time.monotonic() >= due_at
        if plan.reads_files:
            # Only a batch with the file list can answer these asks; other sets leave them in the memo.
            due = due or bool(state.memo.pop(FORCE_SLOW, False))
        if not due or not plan.slow:
            return plan.fast
        asked = state.memo.pop(EXTRA_SECTIONS, None) if plan.reads_files else None
        extra = tuple(asked) if isinstance(asked, list) else ()  # the Sections files.py asks for
        return plan.fast + plan.slow + extra

    def enabled_for(self, target: TargetConfig, collect: Collection[str] | None = None) -> frozenset[str]:
        """The collectors a probe of `target` exports: its config's set, narrowed to `collect` (names
        the web layer checked against that set, selection.narrow)."""
        enabled = getattr(target, "enabled_collectors", None)
        chosen = self._names if enabled is None or enabled == self._names else self._names & enabled
        return chosen if collect is None else chosen & frozenset(collect)

    def probe(
        self,
        target: TargetConfig,
        timeout: float,
        collect: Collection[str] | None = None,
        outcomes: dict[str, Outcome] | None = None,
    ) -> list[Metric]:
        """One scrape of `target`; `collect` narrows it to those collectors (already checked). `outcomes`,
        when given, is filled with what became of each collector (--check-target)."""
        started = time.monotonic()
        out = FamilyBuilder(target.labels)
        state, one_off = self._state_for(target)
        up = 0.0
        planner, collectors = self._planner, self._collectors  # one reload's set for the whole probe
        # Less what the target's platform cannot answer, once the first scrape has told (platform.py).
        own = self.enabled_for(target) - state.left_out - state.missing
        plan = planner.plan(own if collect is None else own & frozenset(collect))
        narrowed = plan.exported != own
        # Less the custom collectors whose min_interval has not passed: they serve their last result.
        sections = due_sections(self._sections_for(state, plan, narrowed), state.memo, time.monotonic())
        try:
            result_sets = state.connection.run(self._batch_for(sections), started + timeout)
            results = route(result_sets, sections)
            up = 1.0
        except (ScrapeFailed, BatchShapeError) as exc:
            self.repeat_log.failed(target.name, "scrape", str(exc), "scrape failed")
            if outcomes is not None:
                outcomes[SCRAPE] = Outcome("failed", str(exc))
            if isinstance(exc, BatchShapeError):
                # The session's state is unknown after an answer we cannot read; never wait for the
                # lock here, a concurrent probe's worker may be stuck in the driver holding it.
                state.connection.discard_soon()
            if len(sections) > len(plan.fast) and plan.reads_files:
                state.memo[FORCE_SLOW] = True  # the refresh did not happen; try again next time
        if up:
            self.repeat_log.succeeded(target.name, "scrape", "scrape succeeded again")
            if len(sections) > len(plan.fast):
                refresh = getattr(target, "volume_refresh_seconds", DEFAULT_REFRESH_SECONDS)
                if not narrowed:
                    state.next_slow_at = time.monotonic() + refresh
                else:
                    state.narrowed_slow_at[plan.exported] = time.monotonic() + refresh
                    while len(state.narrowed_slow_at) > RENDERED_CACHE_SIZE:  # a client trying many sets
                        # pop with a default: a concurrent probe of the target may drop the same one
                        state.narrowed_slow_at.pop(next(iter(state.narrowed_slow_at)), None)
            host = self._host if getattr(target, "colocated", False) else None
            ctx = ScrapeContext(
                now=time.time(), workload=target.workload, memo=state.memo, target=target, host=host
            )
            for record in plan.run:
                if record.name in state.left_out:
                    if outcomes is not None:
                        outcomes[record.name] = Outcome("left out", state.left_out_why.get(record.name, ""))
                    continue  # left out after server_properties ran in this very scrape
                if platform.missing_objects(record, results, target.name):
                    state.missing = state.missing | {record.name}
                    state.missing_at_start = ctx.memo.get(START_TIME_KEY)
                    if outcomes is not None:
                        outcomes[record.name] = Outcome("left out", platform.missing_text(record))
                    continue
                self._run_collector(record, results, ctx, out, target.name, plan.exported, outcomes)
                if state.platform_pending and ENGINE_EDITION_KEY in ctx.memo:
                    state.platform_pending = False
                    state.left_out_why = platform.decide(
                        ctx.memo[ENGINE_EDITION_KEY],
                        collectors,
                        target.name,
                        ctx.memo.get(PRODUCT_VERSION_KEY),
                    )
                    state.left_out = frozenset(state.left_out_why)
            if state.missing and ctx.memo.get(START_TIME_KEY) != state.missing_at_start:
                state.missing = frozenset()  # restarted (upgraded?) since: look for the objects again
            # Beside the success series, so a down target still exports only what describes the scrape.
            off = state.left_out | state.missing
            for record in collectors:
                on = 1.0 if record.name in plan.exported and record.name not in off else 0.0
                out.emit(COLLECTOR_ENABLED, on, {"collector": record.name})
        out.emit(UP, up)
        out.emit(LOGIN_BACKOFF, state.backoff.seconds_left())
        out.emit(SCRAPE_DURATION, time.monotonic() - started)
        if one_off:
            state.connection.retire()
        return out.families()

    def _run_collector(
        self,
        module: CollectorRecord,
        results: dict,
        ctx: ScrapeContext,
        out: FamilyBuilder,
        target: str,
        exported: Collection[str],
        outcomes: dict[str, Outcome] | None = None,
    ) -> None:
        """Runs one collector; one that is not `exported` runs only for a collector that needs it: its
        failure is logged, and shows as the failure of the one that needs it."""
        started = time.monotonic()
        errors = [
            results[tag].error for tag in module.sections if tag in results and results[tag].error is not None
        ]
        ok = not errors
        outcome = (
            Outcome("failed", f"{errors[0].number}: {errors[0].message}", errors[0].number)
            if errors
            else None
        )
        if errors:
            self.repeat_log.failed(
                target,
                f"collector:{module.name}",
                f"{errors[0].number}: {errors[0].message}",
                "section failed",
                collector=module.name,
            )
        else:
            # Collect into a scratch builder so a collector that fails half-way leaves nothing behind.
            scratch = out.child()
            try:
                module.collect(results, ctx, scratch)
                outcome = Outcome("ok", rows=_rows(results, module), series=scratch.series_count())
            # Both through the repeat-limited log: a collector that fails on one scrape fails on the next
            # (the same answer), and a line per scrape per target buried everything else.
            except MissingData as exc:
                ok = False
                outcome = Outcome("failed", str(exc))
                self.repeat_log.failed(
                    target,
                    f"collector:{module.name}",
                    str(exc),
                    "collector found no data",
                    collector=module.name,
                )
            except Exception as exc:  # an exporter bug: the traceback with the first line says where
                ok = False
                outcome = Outcome("failed", f"exporter bug: {type(exc).__name__}: {exc}")
                self.repeat_log.failed(
                    target,
                    f"collector:{module.name}",
                    f"{type(exc).__name__}: {exc}",
                    "collector failed",
                    level=logging.ERROR,
                    exc_info=exc,
                    collector=module.name,
                )
            else:
                if module.name in exported:
                    out.merge(scratch)
                self.repeat_log.succeeded(
                    target, f"collector:{module.name}", "section succeeded again", collector=module.name
                )
        if module.name not in exported:
            return
        if outcomes is not None and outcome is not None:
            outcomes[module.name] = outcome
        labels = {"collector": module.name}
        out.emit(COLLECTOR_SUCCESS, 1.0 if ok else 0.0, labels)
        out.emit(COLLECTOR_DURATION, time.monotonic() - started, labels)

    def _state(self, target: TargetConfig) -> _TargetState:
        return self._state_for(target)[0]

    def _state_for(self, target: TargetConfig) -> tuple[_TargetState, bool]:
        """The target's state, and whether it is a one-off: a probe that picked its target from the
        config before a reload replaced or removed it runs on a connection of its own, closed after."""
        with self._states_lock:
            state = self._states.get(target.name)
            if state is not None and (
                state.target is target or state.target.connection_key() == target.connection_key()
            ):
                return state, False
            current = self._config.targets.get(target.name)
            one_off = current is None or current.connection_key() != target.connection_key()
            backoff = LoginBackoff(
                target.name, target.login_backoff_seconds, target.login_backoff_max_seconds
            )
            opener = login_opener(target, backoff, lambda: self._kerberos)
            state = _TargetState(
                target, TargetConnection(target.name, opener, target.query_timeout_seconds), backoff
            )
            if not one_off:
                self._states[target.name] = state
            return state, one_off

    def reload(self, config: ExporterConfig) -> ReloadSummary:
        """Serve `config` from now on. A target whose connection settings (host, port, login, password
        source, driver, TLS, timeouts) are unchanged keeps its connection and back-off; its cached
        readings (memo: per-file volume lookups, SSD pool totals, the slow sections' schedule) are kept
        only when nothing at all changed in it. A changed or removed target's connection is retired
        (closed once a scrape in flight on it ends) and its state dropped. Probes in flight keep the
        state they started with."""
        summary = ReloadSummary.diff(self._config, config)
        if not self._fixed_collectors:
            self._use_collectors(_records_of(config))
        # Before any login on the new config may run: it writes new targets' freetds.conf sections, and
        # a changed Kerberos identity gets its own ticket keeper (the same settings keep the running one).
        freetds.prepare(config.targets.values())
        self._kerberos = kerberos.prepare(config)
        retired: list[_TargetState] = []
        with self._states_lock:
            self._config = config
            kept: dict[str, _TargetState] = {}
            for name, state in self._states.items():
                new = config.targets.get(name)
                if new is None or new.connection_key() != state.target.connection_key():
                    retired.append(state)
                elif new != state.target:
                    kept[name] = _TargetState(new, state.connection, state.backoff)
                else:
                    state.target = new
                    state.platform_pending = True  # the custom collectors may have changed: decide again
                    kept[name] = state
            self._states = kept
        for state in retired:
            state.connection.retire()
            self.repeat_log.forget(state.target.name)
        return summary

    def close(self) -> None:
        """Close every connection without waiting for scrapes stuck in the driver (a hung server must not
        delay a stop); their connections close when their scrapes end, or with the process."""
        with self._states_lock:
            for state in self._states.values():
                state.connection.retire()
