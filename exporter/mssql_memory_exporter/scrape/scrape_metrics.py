"""What a probe exports besides its collectors' metrics, declared like theirs (metrics/declare.py), and
the label names a target's series carry: every collector's declared labels and these.

A target's constant labels (`labels:` in the config) go on exactly these series, so a constant label may
take none of these names (config/fields.py refuses them): the series would carry the label twice.
"""

from __future__ import annotations

from ..collectors import COLLECTORS
from ..metrics.declare import Label, MetricSpec

_COLLECTOR = (Label("collector", "the collector's name (`buffer_manager`, `wait_stats`, ...)"),)

UP = MetricSpec(
    "mssql_up",
    "gauge",
    "1 if the last scrape of SQL Server succeeded, 0 otherwise.",
    "0/1",
    "exporter: the batch's round trip",
    "Could the exporter log in and read the batch?",
)
LOGIN_BACKOFF = MetricSpec(
    "mssql_exporter_login_backoff_seconds",
    "gauge",
    "Seconds until the exporter tries this target's login again after a refused one (0: none).",
    "seconds",
    "exporter: the login back-off",
    "When will the exporter try a refused login again?",
)
SCRAPE_DURATION = MetricSpec(
    "mssql_scrape_duration_seconds",
    "gauge",
    "Seconds the scrape of this target took.",
    "seconds",
    "exporter: the probe's wall-clock time",
    "How long did the probe take?",
)
COLLECTOR_ENABLED = MetricSpec(
    "mssql_exporter_collector_enabled",
    "gauge",
    "1 if the collector runs in this probe (the target's collectors setting, narrowed by collect[]), "
    "0 if it is off: an off collector exports no other series.",
    "0/1",
    "exporter: the target's `collectors` setting and the probe's `collect[]`",
    "Is the collector on for this probe?",
    _COLLECTOR,
)
COLLECTOR_SUCCESS = MetricSpec(
    "mssql_exporter_collector_success",
    "gauge",
    "1 if the collector's section was read and parsed, 0 otherwise.",
    "0/1",
    "exporter: the collector's sections and its parse",
    "Did the collector export what it reads?",
    _COLLECTOR,
)
COLLECTOR_DURATION = MetricSpec(
    "mssql_exporter_collector_duration_seconds",
    "gauge",
    "Seconds the exporter spent turning the collector's rows into metrics.",
    "seconds",
    "exporter: the collector's parse",
    "What does the collector cost the exporter?",
    _COLLECTOR,
)
SCRAPE_METRICS = (
    UP,
    LOGIN_BACKOFF,
    SCRAPE_DURATION,
    COLLECTOR_ENABLED,
    COLLECTOR_SUCCESS,
    COLLECTOR_DURATION,
)

# Every label name a target's series may carry, read from the declarations: a new collector's labels are
# reserved the moment it declares them.
TARGET_SERIES_LABELS = frozenset(
    label.name
    for spec in (*SCRAPE_METRICS, *(spec for record in COLLECTORS for spec in record.metrics))
    for label in spec.labels
)
