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

from prometheus_client.core import Metric

from ..config import ConfigError, ExporterConfig, ReloadRefused, load_config
from ..metrics.builder import FamilyBuilder

log = logging.getLogger(__name__)

# Checks beyond the config file's own validation that start-up refuses to serve with (the CLI's list of
# passwords the driver cannot send); returns one error line per problem.
ExtraChecks = Callable[[ExporterConfig], list[str]]


class ConfigReloader:
    """Owns the current config and swaps it for a new one on request; one reload at a time."""

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
        self.last_successful = True
        self.last_success_time = time.time()  # start-up counts as the first successful load

    def reload(self, trigger: str) -> str:
        """Load, check and apply the config file; returns the summary, raises ReloadRefused."""
        with self._lock:
            try:
                config = load_config(self._path)
                problems = self._extra_checks(config) if self._extra_checks is not None else []
                if problems:
                    raise ConfigError(problems)
            except ConfigError as exc:
                self.last_successful = False
                log.error(
                    "config reload refused; the running config keeps serving",
                    extra={"trigger": trigger, "file": self._path, "err": "; ".join(exc.lines)},
                )
                raise ReloadRefused(exc.lines) from None
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
        log.info("config reloaded", extra={"trigger": trigger, "file": self._path, "targets": summary})
        return summary

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
