"""What the recording rules cost a real Prometheus, per group, at fleet scale (issue 27 item 3).

promtool evaluates every group at its test's interval and ignores a group's own `interval`, so the
split of alerts/rule_groups.py is measured here on a real Prometheus: 500 stand-in targets (five demo
scenarios, 100 each) through /probe of one exporter, scraped every 15 s; the rule files loaded are
either main's (one recording group; `--before`, read with `git show`) or this checkout's. After the run
this prints, per group, Prometheus's own prometheus_rule_group_interval_seconds and
prometheus_rule_group_last_duration_seconds (median and maximum of its samples over the run).

    PYTHONPATH=. .venv/bin/python bench/rule_groups.py [--before REF] [--minutes 4] [--targets 500]

Prometheus is young here (minutes of data): the 1d and 7d windows hold only what it has scraped, so
the long-window group's duration grows with the days of data a site keeps; the interval's effect (how
often that cost is paid) does not.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.common import Exporter, Farm, MachineLoad, load_note, target_yaml  # noqa: E402
from tests.e2e_stack import Stack, probe_scrape_config, prometheus_config  # noqa: E402
from tests.tools import prometheus_versions  # noqa: E402

MIX = ("healthy-oltp", "memory-pressure", "numa-4-nodes", "micron-960gb-8stream", "tempdb-filling")
RULES = ("mssql.recording.rules.yml", "mssql.alerts.rules.yml")


def rule_files(ref: str | None, into: Path) -> list[Path]:
    paths = []
    for name in RULES:
        path = into / name
        if ref is None:
            path.write_text((ROOT / "alerts" / "rules" / name).read_text())
        else:
            text = subprocess.run(
                ["git", "-C", str(ROOT), "show", f"{ref}:alerts/rules/{name}"],
                capture_output=True, text=True, check=True,
            ).stdout  # fmt: skip
            path.write_text(text)
        paths.append(path)
    return paths


_RULE_GROUP_LINE = re.compile(r'^(prometheus_rule_group_\w+)\{rule_group="[^"]*;([^"]+)"\} (\S+)$', re.M)


def _own_metrics(base: str) -> list[tuple[str, str, float]]:
    text = urllib.request.urlopen(f"{base}/metrics", timeout=10).read().decode()
    return [(m.group(1), m.group(2), float(m.group(3))) for m in _RULE_GROUP_LINE.finditer(text)]


def measure(ref: str | None, targets: int, minutes: float) -> dict[str, dict[str, float]]:
    per = max(1, targets // len(MIX))
    farms = [Farm(scenario, per) for scenario in MIX]
    try:
        config = {
            f"t{i}-{farm.scenario}": target_yaml(port)
            for farm in farms
            for i, port in enumerate(farm.ports)
        }
        with Exporter(config, "rule-groups") as exporter, tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            with Stack(work / "stack") as stack:
                job = probe_scrape_config("mssql", f"127.0.0.1:{exporter.port}", list(config), "15s")
                job["scrape_timeout"] = "10s"
                binary = max(prometheus_versions(), key=lambda v: v.version).path
                prom = stack.start_prometheus(
                    prometheus_config([job], rule_files(ref, work), interval="15s"), binary=binary
                )
                deadline = time.monotonic() + minutes * 60
                samples: dict[str, list[float]] = {}
                intervals: dict[str, float] = {}
                while time.monotonic() < deadline:
                    time.sleep(15)
                    # Prometheus's own /metrics (it does not scrape itself here).
                    for name, group, number in _own_metrics(prom.url):
                        if name == "prometheus_rule_group_last_duration_seconds":
                            samples.setdefault(group, []).append(number)
                        elif name == "prometheus_rule_group_interval_seconds":
                            intervals[group] = number
                series = prom.query("count({job='mssql'})")
                print(f"  series scraped: {series[0]['value'][1] if series else 0}", flush=True)
    finally:
        for farm in farms:
            farm.close()
    return {
        group: {
            "interval_s": intervals.get(group, 0.0),
            "median_ms": statistics.median(values) * 1000,
            "max_ms": max(values) * 1000,
            "per_minute_ms": statistics.median(values) * 1000 * 60 / max(intervals.get(group, 15.0), 1.0),
        }
        for group, values in samples.items()
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--before", default="main", help="git ref whose rules are the 'before' run")
    parser.add_argument("--targets", type=int, default=500)
    parser.add_argument("--minutes", type=float, default=4.0)
    args = parser.parse_args()
    for label, ref in (("before", args.before), ("after", None)):
        load = MachineLoad()
        load.start()
        result = measure(ref, args.targets, args.minutes)
        print(f"{label} ({ref or 'this checkout'}), {args.targets} targets, {args.minutes:g} min:")
        for group, figures in sorted(result.items()):
            print(
                f"  {group:40s} interval {figures['interval_s']:5.0f} s  last duration p50"
                f" {figures['median_ms']:8.1f} ms  max {figures['max_ms']:8.1f} ms"
                f"  per minute {figures['per_minute_ms']:8.1f} ms"
            )
        print(load_note(load.stop()), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
