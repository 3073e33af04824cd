"""The names of the bundle's rule groups, written once: the generators name their groups with these, and
the spec (`rule_groups.evaluators`) refuses a group it does not know by checking against them.

Kept free of imports so alerts/spec.py can read it (every other module of alerts/ imports the spec).
"""

from __future__ import annotations

RECORDING = "mssql.recording"
RECORDING_LONG_WINDOW = "mssql.recording.long_window"
ALERTS = "mssql.alerts"
# The opt-in group translating prometheus-community/smartctl_exporter series (alerts/smartctl_exporter.py).
SMARTCTL_EXPORTER = "mssql.smartctl_exporter"
# Counts and sums across every target of every shard (alerts/fleet.py): evaluated by Thanos Ruler.
FLEET = "mssql.fleet"
# The watch on the ruler evaluating FLEET (alerts/thanos_ruler.py): evaluated by a shard's Prometheus that
# scrapes the ruler, never by the ruler itself, so it still pages when the ruler or Query is down.
THANOS_RULER_WATCH = "mssql.thanos_ruler"

# The opt-in alerts on the shipped collector files (alerts/shipped_collectors.py): Agent jobs, backups,
# blocking; for the sites that switch those files on.
SHIPPED_COLLECTORS = "mssql.shipped_collectors"

ALL = (
    RECORDING,
    RECORDING_LONG_WINDOW,
    ALERTS,
    SMARTCTL_EXPORTER,
    FLEET,
    THANOS_RULER_WATCH,
    SHIPPED_COLLECTORS,
)

# Where a group is evaluated (rule_groups.evaluators in alerts/thresholds.yml).
PROMETHEUS = "prometheus"  # each shard's own Prometheus: the group reads one target's series
THANOS_RULER = "thanos_ruler"  # Thanos Ruler through Thanos Query: the group reads every shard
EVALUATORS = (PROMETHEUS, THANOS_RULER)
