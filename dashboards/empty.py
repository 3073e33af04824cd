"""Why a panel is empty: the words of the panels' no-data texts.

Grafana 12.4 shows a panel's no-data text (fieldConfig.defaults.noValue) where it would say "No data": in
the middle of a time series or table, as the value of a stat or bar gauge. The builder makes every panel
carry one (grafana.Panel.no_value); these helpers keep the common reasons worded alike on every dashboard.

A collector can be turned off per target (`collectors:` in the exporter's config; the exporter reports it
as mssql_exporter_collector_enabled{collector} 0) or left out where the platform lacks what it reads
(docs/platforms.md), and it can fail (a permission, mssql_exporter_collector_success 0): a panel fed by one
says which, by the collector's own name.
"""

from __future__ import annotations

from types import ModuleType

NO_SCRAPE = "Instance not scraped (check job, instance, scrape config)"

AZURE_SQL_DATABASE = "left out on Azure SQL Database"


def collector_names(*collectors: ModuleType) -> str:
    """The collectors' own names (COLLECTOR.name of each module), as the exporter's config spells them."""
    return ", ".join(module.COLLECTOR.name for module in collectors)


def off(*collectors: ModuleType, also: str = "", lacking: str = "", narrow: bool = False) -> str:
    """Empty while a collector that feeds the panel is off or failing; `also`: another reason first (a
    feature not configured, an event that has not happened); `lacking`: where the platform lacks it.
    `narrow`: for a narrow stat, whose text 12.4 shrinks until it fits on its width."""
    word = "collector" if len(collectors) == 1 else "collectors"
    reason = f"{word} {collector_names(*collectors)} off or failing"
    if narrow:
        return reason.capitalize()
    if lacking:
        reason += f" ({lacking})"
    return f"{also}, or {reason}" if also else f"No data: {reason}"


def waits(window: str, *collectors: ModuleType) -> str:
    """A rate over `window`: empty for its first window of data, or with its collector off."""
    return off(*collectors, also=f"Shown after {window} of data")
