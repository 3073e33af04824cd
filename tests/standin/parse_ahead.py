"""The exporter's batch texts, checked by the stand-in before it listens.

The stand-in checks each new batch text with sqlfluff: some 2 s for the exporter's, over 5 s on a
loaded machine, and ten or more on one as busy as a shared CI runner. Landing inside the first scrape,
that cost counted against its timeout: the demo's first probes timed out (issue 36). The tests' conftest
and the demo's stand-in (`--parse-ahead`) both check the texts here first.
"""

from __future__ import annotations

import os

from mssql_memory_exporter.collectors import COLLECTORS
from mssql_memory_exporter.config import parse_config
from mssql_memory_exporter.scrape.scraper import Scraper

PASSWORD_ENV = "MSSQL_STANDIN_PARSE_AHEAD_UNUSED"  # nothing logs in: the variable only has to be set


def batch_scraper() -> Scraper:
    """A scraper whose batches are the ones every stand-in target gets (all collectors on)."""
    os.environ.setdefault(PASSWORD_ENV, "unused")
    target = {"host": "127.0.0.1", "port": 1, "driver": "freetds", "encryption": "off", "auth_module": "m"}
    config = parse_config(
        {"auth_modules": {"m": {"username": "u", "password_env": PASSWORD_ENV}}, "targets": {"t": target}}
    )
    return Scraper(config)


def batch_variants(scraper: Scraper) -> list[str]:
    """Every batch text the exporter sends a stand-in scenario with every collector on and no per-target
    volume lookups: the fast sections alone (most scrapes) and with the slow ones (the first scrape and
    each refresh), with and without the collectors a server older than SQL Server 2025 leaves out (every
    scenario older than 17.x, from its first scrape on). Narrowed sets (collect[], a target's collectors)
    are parsed ahead where they are sent (test_collector_selection.narrowed_batches_parsed)."""
    target = next(iter(scraper._config.targets.values()))
    enabled = scraper.enabled_for(target)
    missing = frozenset(r.name for r in COLLECTORS if r.left_out_when_missing)
    return list(dict.fromkeys([*scraper.batches_for(enabled), *scraper.batches_for(enabled - missing)]))
