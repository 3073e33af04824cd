"""Generate the Grafana dashboards from alerts/thresholds.yml, the spec the alert rules come from.

    python -m dashboards.generate              # write dashboards/*.json
    python -m dashboards.generate --check      # exit 1 if the committed files are stale
    python -m dashboards.generate --out DIR    # write elsewhere

Every threshold, window and runbook address is read from the spec (`alerts.spec.load()`); panels read the
generated recording rules (alerts/rules/mssql.recording.rules.yml) by their public names, and raw
counters only through `rate(...[$__rate_interval])`.

One module per dashboard (memory.py, endurance.py, fleet.py); their rows live in modules named like the
alert areas they sit beside (diagnosis.py, tempdb.py, capacity.py, pools.py, drives.py); shared pieces
in limits.py (the spec as the dashboards read it), queries.py, panels.py and frame.py; the JSON model in
grafana.py.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from alerts.generated import generator_main
from alerts.spec import Spec, load

from .endurance import endurance_dashboard
from .fleet import fleet_dashboard
from .frame import ENDURANCE_UID, FLEET_UID, MEMORY_UID
from .grafana import Json
from .limits import Limits
from .memory import memory_dashboard

DASHBOARDS_DIR = Path(__file__).resolve().parent

MIN_GRAFANA_VERSION = "12.4.0"  # the version the dashboards are built for: schema 42, core panels only

# The current Grafana release the compose bundle runs; one line, read by compose and the docs' tests.
GRAFANA_VERSION_FILE = DASHBOARDS_DIR / "grafana_version.txt"

FILES = {
    MEMORY_UID: "mssql-memory-pressure.json",
    ENDURANCE_UID: "mssql-tempdb-ssd-endurance.json",
    FLEET_UID: "mssql-fleet-capacity.json",
}


def build(spec: Spec) -> dict[str, Json]:
    """The three dashboards, by uid."""
    lim = Limits.from_spec(spec)
    boards = [memory_dashboard(lim), endurance_dashboard(lim), fleet_dashboard(lim)]
    for board in boards:
        board.requires_grafana = MIN_GRAFANA_VERSION
    return {board.uid: board.json() for board in boards}


def render(spec: Spec) -> dict[str, str]:
    """File name -> JSON text, exactly as committed."""
    return {
        FILES[uid]: json.dumps(board, indent=2, ensure_ascii=False) + "\n"
        for uid, board in build(spec).items()
    }


def main(argv: list[str] | None = None) -> int:
    return generator_main(
        "python -m dashboards.generate", __doc__, DASHBOARDS_DIR, lambda _: render(load()), argv
    )


if __name__ == "__main__":
    sys.exit(main())
