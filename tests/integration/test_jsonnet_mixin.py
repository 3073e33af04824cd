"""The jsonnet mixin (mixin/mixin.libsonnet): what a kube-prometheus or mixtool site vendors with
jsonnet-bundler, run through a real jsonnet (Debian's), must give what `make mixin` gives for the same
overrides, read as data (YAML and JSON parsed, not bytes), and refuse by name what it cannot give.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from alerts.spec import SPEC_PATH, load_site, number
from deploy import mixin
from generators import jsonnet_mixin
from tests import tools

ROOT = Path(__file__).resolve().parents[2]
LIBSONNET = ROOT / "mixin" / "mixin.libsonnet"

# mixtool's layout with plain jsonnet (docs/mixin.md), plus the bundle's two extra rule fields: the rule
# files as YAML strings (-S), the dashboards as JSON by jsonnet's own writer (std.manifestJsonEx, written in
# jsonnet, takes seconds a board).
MIXIN = "(import 'mixin/mixin.libsonnet') + { _config+:: %s }"
RULES = """
local mixin = %s;
{
  'prometheus_alerts.yaml': std.manifestYamlDoc(mixin.prometheusAlerts),
  'prometheus_rules.yaml': std.manifestYamlDoc(mixin.prometheusRules),
  'thanos_ruler_rules.yaml': std.manifestYamlDoc(mixin.thanosRulerRules),
  'thanos_ruler_watch_rules.yaml': std.manifestYamlDoc(mixin.thanosRulerWatchRules),
  'shipped_collectors_rules.yaml': std.manifestYamlDoc(mixin.shippedCollectorsRules),
}
"""
DASHBOARDS = "(%s).grafanaDashboards"
# Each mixtool file and the `make mixin` file it must equal.
SAME_AS = {
    "prometheus_alerts.yaml": "rules/mssql.alerts.rules.yml",
    "prometheus_rules.yaml": "rules/mssql.recording.rules.yml",
    "thanos_ruler_rules.yaml": "rules/thanos-ruler/mssql.fleet.rules.yml",
    "thanos_ruler_watch_rules.yaml": "rules/optional/mssql.thanos-ruler-watch.rules.yml",
    "shipped_collectors_rules.yaml": "rules/optional/mssql.shipped-collectors.rules.yml",
}

THRESHOLDS = """\
rate_window: 2m
memory:
  lazy_writes_per_second: {max: 35.5, for: 20m}
  internal_total_at_target_share: 0.93
  max_server_memory_default: {default_bytes: 1099511627776}
tempdb:
  headroom_for: 20m
  advised_max_data_files: 16
io_latency: {min_operations_per_second: 2.5}
fleet: {shard_label: prometheus_shard}
runbook_base_url: https://runbooks.example/sql
"""


@pytest.fixture(scope="module", autouse=True)
def jsonnet_installed() -> None:
    tools.check(tools.JSONNET)


def overrides_jsonnet(site: Any) -> str:
    """A site file as a `_config` override: mappings merged key by key (`+:`) as `make mixin` merges
    them, anything else replacing the value."""
    if isinstance(site, dict):
        fields = [
            f"{json.dumps(k)}{'+:' if isinstance(v, dict) else ':'} {overrides_jsonnet(v)}"
            for k, v in site.items()
        ]
        return "{ " + ", ".join(fields) + " }"
    return json.dumps(site)


def run_jsonnet(site: dict[str, Any], out: Path) -> subprocess.CompletedProcess[str]:
    """`jsonnet -S -m out` of the rule files, then `jsonnet -m out/dashboards_out` of the dashboards."""
    mixin = MIXIN % overrides_jsonnet(site)
    (out / "dashboards_out").mkdir(parents=True, exist_ok=True)  # C++ jsonnet -m makes no directories
    boards = out / "dashboards_out"
    runs = ((["-S", "-m", str(out)], RULES % mixin), (["-m", str(boards)], DASHBOARDS % mixin))
    for args, code in runs:
        result = subprocess.run(
            ["jsonnet", "-J", str(ROOT), *args, "-e", code],
            capture_output=True, text=True, timeout=600, check=False,
        )
        if result.returncode != 0:
            return result
    return result


def mixtool_files(site: dict[str, Any], out: Path) -> dict[str, Any]:
    result = run_jsonnet(site, out)
    assert result.returncode == 0, result.stderr
    return parsed({str(p.relative_to(out)): p.read_text() for p in out.rglob("*") if p.is_file()})


def parsed(files: dict[str, str]) -> dict[str, Any]:
    return {n: (json.loads(t) if n.endswith(".json") else yaml.safe_load(t)) for n, t in files.items()}


def make_mixin_files(site_text: str, tmp_path: Path) -> dict[str, Any]:
    site = tmp_path / "site.yml"
    site.write_text(site_text)
    return parsed(mixin.render(load_site(site)))


def assert_same(site_text: str, tmp_path: Path) -> None:
    ours = mixtool_files(yaml.safe_load(site_text) or {}, tmp_path / "jsonnet")
    theirs = make_mixin_files(site_text, tmp_path)
    boards = {n for n in theirs if n.startswith("dashboards/") and n.endswith(".json")}
    assert set(ours) == set(SAME_AS) | {f"dashboards_out/{n.removeprefix('dashboards/')}" for n in boards}
    for name, same_as in SAME_AS.items():
        assert ours[name] == theirs[same_as], name
    for board in boards:
        assert ours[f"dashboards_out/{board.removeprefix('dashboards/')}"] == theirs[board], board


def docs_site_file() -> str:
    """The site file docs/mixin.md shows first (its 'A site file' example)."""
    page = (ROOT / "docs" / "mixin.md").read_text()
    return re.search(r"## A site file.*?```yaml\n(.*?)```", page, re.S).group(1)


def test_no_overrides_gives_make_mixins_files(tmp_path: Path):
    assert_same("", tmp_path)


def refused_keys() -> list[list[str]]:
    """The keys the libsonnet refuses, as it lists them."""
    return json.loads(re.search(r"^local refused = (.*);$", LIBSONNET.read_text(), re.M).group(1))


def test_the_docs_site_file_gives_make_mixins_files_less_the_key_it_refuses(tmp_path: Path):
    site = yaml.safe_load(docs_site_file())
    assert "datasource_uid" in site["grafana"] and site["alert_labels"]  # the structural keys are exercised
    result = run_jsonnet(site, tmp_path / "whole")
    assert "endurance.remaining_warning_seconds: " in result.stderr and "make mixin" in result.stderr
    for path in refused_keys():
        parent = site
        for key in path[:-1]:
            parent = parent.get(key, {})
        parent.pop(path[-1], None)
    assert site["endurance"] == {}
    del site["endurance"]
    assert_same(yaml.safe_dump(site), tmp_path)


def test_the_docs_jsonnet_example_gives_make_mixins_files(tmp_path: Path):
    """docs/mixin.md's site.libsonnet, rules.jsonnet and dashboards.jsonnet, run by its commands against
    the mixin vendored as jsonnet-bundler lays it out."""
    page = (ROOT / "docs" / "mixin.md").read_text()
    for block in re.findall(r"```jsonnet\n(.*?)```", page, re.S):
        name = re.match(r"// ([\w.]+)", block).group(1)  # each block's first line names its file
        (tmp_path / name).write_text(block)
    (tmp_path / "vendor").mkdir()
    (tmp_path / "vendor" / "mixin").symlink_to(ROOT / "mixin")
    commands = re.search(r"```sh\n(mkdir -p out/dashboards_out .*?)```", page, re.S).group(1)
    subprocess.run(["bash", "-euc", commands], cwd=tmp_path, check=True, timeout=600)
    out = tmp_path / "out"
    ours = parsed({str(p.relative_to(out)): p.read_text() for p in out.rglob("*") if p.is_file()})
    site = yaml.safe_load(docs_site_file())
    del site["endurance"]  # refused: the example leaves it out
    theirs = make_mixin_files(yaml.safe_dump(site), tmp_path)
    assert ours.pop("prometheus_alerts.yaml") == theirs["rules/mssql.alerts.rules.yml"]
    assert ours.pop("prometheus_rules.yaml") == theirs["rules/mssql.recording.rules.yml"]
    boards = {n.removeprefix("dashboards/"): theirs[n] for n in theirs if n.endswith(".json")}
    assert ours == {f"dashboards_out/{name}": board for name, board in boards.items()}


def test_threshold_overrides_give_make_mixins_files(tmp_path: Path):
    assert_same(THRESHOLDS, tmp_path)


def test_a_transformed_key_is_refused_by_name(tmp_path: Path):
    refused = "rule_groups.long_window"
    assert refused in LIBSONNET.read_text()  # listed as refused in the file's header
    result = run_jsonnet({"rule_groups": {"long_window": "2d"}}, tmp_path)
    assert result.returncode != 0
    assert f"{refused}: " in result.stderr and "make mixin" in result.stderr


def test_a_misspelt_key_and_a_runbook_address_ending_in_a_slash_are_refused(tmp_path: Path):
    result = run_jsonnet({"memory": {"page_life_expectancy": {"flor_seconds": 600}}}, tmp_path / "misspelt")
    assert result.returncode != 0
    assert "memory.page_life_expectancy.flor_seconds: unknown key" in result.stderr
    # make mixin strips the / in the alerts' runbook_url and keeps it in the dashboards' link
    result = run_jsonnet({"runbook_base_url": "https://wiki.example/rb/"}, tmp_path / "slash")
    assert result.returncode != 0 and "runbook_base_url: end it without a /" in result.stderr


def test_a_reserved_alert_label_is_refused(tmp_path: Path):
    result = run_jsonnet({"alert_labels": {"severity": "x"}}, tmp_path)
    assert result.returncode != 0
    assert "alert_labels.severity: set by the rules themselves" in result.stderr


@pytest.mark.parametrize(
    "value", [0.95, 0.9, 0.25, 0.1, 1e-07, 1.5e-05, 0.000123, 1234.5, 300, 4294967296, 2251799812636672, -0.5,
              1 / 3, 99.99, 123456789.125, 1e-300, 0.30000000000000004]
)
def test_jsonnet_prints_a_number_as_the_python_generators_do(value: float, tmp_path: Path):
    helpers = "local shipped = {}, refused = [], whole = [], reservedLabels = [], refusedWhy = '';\n"
    code = helpers + jsonnet_mixin.PARTS.read_text() + f"\nnumber({json.dumps(value)})"
    result = subprocess.run(
        ["jsonnet", "-S", "-e", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.rstrip("\n") == number(value)


@pytest.mark.slow  # a few hundred renders of the spec
def test_libsonnet_is_current():
    result = subprocess.run(
        [sys.executable, "-m", "generators.jsonnet_mixin", "--check"], cwd=ROOT,
        capture_output=True, text=True, timeout=1800, check=False,
    )
    assert result.returncode == 0, result.stderr


def test_jsonnetfile_names_no_dependencies():
    jsonnetfile = json.loads((ROOT / "mixin" / "jsonnetfile.json").read_text())
    assert jsonnetfile["dependencies"] == [] and SPEC_PATH.exists()
