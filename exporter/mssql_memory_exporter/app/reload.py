"""Reloading the config while serving: SIGHUP and `POST /-/reload`, as blackbox_exporter does.

A reload reads and validates the config file exactly as start-up does (secrets included: a password
file that vanished fails it the same way). A config that fails is refused: the reason is logged and
answered, `mssql_exporter_config_last_reload_successful` goes to 0, and the running config keeps
serving. A good one replaces it: the scraper keeps the connections of targets whose connection settings
did not change (scrape.Scraper.reload), and the HTTP server routes new requests with it. Requests already
in flight finish on the config they started with. The web config (--web.config.file) is re-read by the
server on its own; nothing here touches it.

The drive-health reader and the host collector are started once; a reload that changes `drive_health`
is applied to everything else and logged as needing a restart for that section.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import NoReturn

from prometheus_client.core import Metric

from ..config import ConfigError, ExporterConfig, LoadAbandoned, ReloadRefused, load_config
from ..config.errors import unexpected_error
from ..metrics.builder import FamilyBuilder

log = logging.getLogger(__name__)

# Checks beyond the config file's own validation that start-up refuses to serve with (the CLI's list of
# passwords the driver cannot send); returns one error line per problem.
ExtraChecks = Callable[[ExporterConfig], list[str]]


class ReloadAbandoned(ReloadRefused):
    """The exporter began stopping during the reload: nothing of the new config was applied."""


class ConfigReloader:
    """Owns the current config and swaps it for a new one on request; one reload at a time.

    `stop()` ends reloading for good: a reload still reading the file gives up at once (the YAML reader
    and the validation ask between nodes and targets), and one that has read it does not apply it. What
    is applied (the scraper's new targets, their freetds.conf sections, the server's config) is applied
    under `_commit_lock`, which `stop()` takes, so nothing of a reload is applied after the exporter logs
    "stopping" and removes its private directory (issue 36: a 10,000-target reload took 12 s after
    SIGTERM, then applied its config)."""

    def __init__(
        self,
        path: str,
        config: ExporterConfig,
        apply: Callable[[ExporterConfig], str],
        extra_checks: ExtraChecks | None = None,
    ) -> None:
        self._path = path
        self.config = config
        self._apply = apply  # hands the new config to the scraper and server; returns a summary for the log
        self._extra_checks = extra_checks
        self._lock = threading.Lock()
        self._commit_lock = threading.Lock()
        self._stopping = threading.Event()
        self.last_successful = True
        self.last_success_time = time.time()  # start-up counts as the first successful load

    def stop(self) -> None:
        """No reload applies anything once this returns; one applying now is waited for (about a second
        for 10,000 targets), one still loading is abandoned without being waited for."""
        self._stopping.set()
        with self._commit_lock:
            pass

    def reload(self, trigger: str) -> str:
        """Load, check and apply the config file; returns the summary, raises ReloadRefused (and
        ReloadAbandoned when stopping). Every failure is a refusal, whatever raised it: a reload must
        never take the exporter down."""
        with self._lock:
            log.info("reloading config", extra={"trigger": trigger, "file": self._path})
            try:
                config = load_config(self._path, cancelled=self._stopping.is_set)
                problems = self._extra_checks(config) if self._extra_checks is not None else []
                if problems:
                    raise ConfigError(problems)
                with self._commit_lock:
                    if self._stopping.is_set():
                        raise LoadAbandoned("stopping")
                    summary = self._commit(config, trigger)
            except LoadAbandoned:
                log.info("config reload abandoned: the exporter is stopping", extra={"trigger": trigger})
                raise ReloadAbandoned(["the exporter is stopping; the config was not reloaded"]) from None
            except ConfigError as exc:
                self._refuse(trigger, exc.lines)
            except Exception as exc:  # anything else is a refused reload too (issue 36)
                self._refuse(trigger, unexpected_error(self._path, exc).lines)
        return summary

    def _commit(self, config: ExporterConfig, trigger: str) -> str:
        for warning in config.secret_warnings():
            log.warning("secret file kept loosely", extra={"problem": warning})
        if config.drive_health != self.config.drive_health:
            log.warning(
                "drive_health changed: that section is applied at the next restart",
                extra={"file": self._path},
            )
        summary = self._apply(config)
        self.config = config
        self.last_successful = True
        self.last_success_time = time.time()
        # Logged before the lock is let go: "stopping" is logged only after stop() took it.
        log.info("config reloaded", extra={"trigger": trigger, "file": self._path, "targets": summary})
        return summary

    def _refuse(self, trigger: str, lines: list[str]) -> NoReturn:
        self.last_successful = False
        log.error(
            "config reload refused; the running config keeps serving",
            extra={"trigger": trigger, "file": self._path, "err": "; ".join(lines)},
        )
        raise ReloadRefused(lines) from None

    def families(self) -> list[Metric]:
        out = FamilyBuilder({})
        out.gauge(
            "mssql_exporter_config_last_reload_successful",
            "1 if the last config reload (SIGHUP or POST /-/reload) succeeded, 0 if it was refused and "
            "the previous config still serves; 1 from start-up until the first reload.",
            1.0 if self.last_successful else 0.0,
        )
        out.gauge(
            "mssql_exporter_config_last_reload_success_timestamp_seconds",
            "Unix time the config was last loaded successfully (start-up or reload).",
            self.last_success_time,
        )
        return out.families()
