"""A scrape of one target: one batch, one round trip, then every collector over the routed rows.

A failed round trip yields `mssql_up 0` and nothing else from the target: never the previous scrape's
values. A failing section or collector yields `mssql_exporter_collector_success{collector} 0` while
the others still export.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import ModuleType

import pyodbc
from prometheus_client.core import Metric

from .batch import BatchShapeError, render_batch, route, sections_of
from .collectors import COLLECTORS
from .collectors.base import FamilyBuilder, MissingData, ScrapeContext, Section
from .config import ConfigError, ExporterConfig, TargetConfig, build_connection_string, resolve_driver
from .connection import ScrapeFailed, TargetConnection

log = logging.getLogger(__name__)


@dataclass
class _TargetState:
    connection: TargetConnection
    memo: dict[str, object] = field(default_factory=dict)


class Scraper:
    """Holds one connection per configured target; `probe` is safe to call from many threads."""

    def __init__(self, config: ExporterConfig, collectors: Sequence[ModuleType] = COLLECTORS) -> None:
        self._config = config
        self._collectors = tuple(collectors)
        # Built once: the batch text never changes between scrapes, so the server reuses its plans.
        self._sections: list[Section] = sections_of(self._collectors)
        self.batch_sql = render_batch(self._sections)
        self._states: dict[str, _TargetState] = {}
        self._states_lock = threading.Lock()

    def probe(self, target: TargetConfig, timeout: float) -> list[Metric]:
        started = time.monotonic()
        out = FamilyBuilder(target.labels)
        state = self._state(target)
        up = 0.0
        try:
            result_sets = state.connection.run(self.batch_sql, started + timeout)
            results = route(result_sets, self._sections)
            up = 1.0
        except (ScrapeFailed, BatchShapeError) as exc:
            log.warning("scrape failed", extra={"target": target.name, "err": str(exc)})
            if isinstance(exc, BatchShapeError):
                state.connection.close()
        if up:
            ctx = ScrapeContext(now=time.time(), workload=target.workload, memo=state.memo)
            for module in self._collectors:
                self._run_collector(module, results, ctx, out, target.name)
        out.gauge("mssql_up", "1 if the last scrape of SQL Server succeeded, 0 otherwise.", up)
        out.gauge(
            "mssql_scrape_duration_seconds",
            "Seconds the scrape of this target took.",
            time.monotonic() - started,
        )
        return out.families()

    def _run_collector(
        self, module: ModuleType, results: dict, ctx: ScrapeContext, out: FamilyBuilder, target: str
    ) -> None:
        started = time.monotonic()
        errors = [results[tag].error for tag in module.sections if results[tag].error is not None]
        ok = not errors
        if errors:
            log.warning(
                "section failed",
                extra={
                    "target": target,
                    "collector": module.name,
                    "err": f"{errors[0].number}: {errors[0].message}",
                },
            )
        else:
            # Collect into a scratch builder so a collector that fails half-way leaves nothing behind.
            scratch = out.child()
            try:
                module.collect(results, ctx, scratch)
            except MissingData as exc:
                ok = False
                log.warning(
                    "collector found no data",
                    extra={"target": target, "collector": module.name, "err": str(exc)},
                )
            except Exception:
                ok = False
                log.exception("collector failed", extra={"target": target, "collector": module.name})
            else:
                out.merge(scratch)
        labels = {"collector": module.name}
        out.gauge(
            "mssql_exporter_collector_success",
            "1 if the collector's section was read and parsed, 0 otherwise.",
            1.0 if ok else 0.0,
            labels,
        )
        out.gauge(
            "mssql_exporter_collector_duration_seconds",
            "Seconds the exporter spent turning the collector's rows into metrics.",
            time.monotonic() - started,
            labels,
        )

    def _state(self, target: TargetConfig) -> _TargetState:
        with self._states_lock:
            state = self._states.get(target.name)
            if state is None:
                state = _TargetState(
                    TargetConnection(target.name, self._opener(target), target.query_timeout_seconds)
                )
                self._states[target.name] = state
            return state

    def _opener(self, target: TargetConfig):  # noqa: ANN202 - returns connection.OpenFn
        def open_connection(login_timeout: int) -> pyodbc.Connection:
            try:
                driver = resolve_driver(target.driver, pyodbc.drivers(), encryption=target.encryption)
                creds = self._config.credentials_for(target)
                conn_str = build_connection_string(target, driver, creds.password, username=creds.username)
            except ConfigError as exc:  # e.g. the password file vanished: say so, by name, not by value
                raise ScrapeFailed(str(exc)) from None
            timeout = max(1, min(login_timeout, math.ceil(target.login_timeout_seconds)))
            return pyodbc.connect(conn_str, timeout=timeout, autocommit=True)

        return open_connection

    def close(self) -> None:
        with self._states_lock:
            for state in self._states.values():
                state.connection.close()
