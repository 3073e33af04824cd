"""`make mixin`: a site's partial overrides file merged over alerts/thresholds.yml, and the files it writes.

What a site sees: the alert firing in promtool on its own job with its runbook address and team label,
the dashboards querying its job through its datasource under its uids, and a typo refused by name with
the output directory left as it was.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from alerts.spec import SPEC_PATH, SpecError, load, load_site, merged
from deploy import mixin
from tests import tools

ROOT = Path(__file__).resolve().parent.parent

SITE = """\
selector: 'job="sqlserver-prod"'
runbook_base_url: https://wiki.example/runbooks
memory:
  page_life_expectancy:
    floor_seconds: 600
alert_labels:
  team: dba
  routing: sqlserver
grafana:
  datasource_uid: prod-prometheus
  uid_prefix: prod-
  folder: "DBA: SQL Server"
"""

# Where each file of the mixin's output is committed (what `make generate` writes).
COMMITTED = {
    mixin.RULES: ROOT / "alerts" / "rules",
    mixin.DASHBOARDS: ROOT / "dashboards",
    mixin.KUBERNETES: ROOT / "deploy" / "kubernetes",
}


def run_mixin(out: Path, overrides: Path | None) -> subprocess.CompletedProcess[str]:
    args = [sys.executable, "-m", "deploy.mixin", "--out", str(out)]
    if overrides is not None:
        args += ["--overrides", str(overrides)]
    return subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)


def files_under(directory: Path) -> dict[str, bytes]:
    paths = sorted(p for p in directory.rglob("*") if p.is_file())
    return {str(p.relative_to(directory)): p.read_bytes() for p in paths}


@pytest.fixture(scope="module")
def site_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("site")
    (work / "site.yml").write_text(SITE)
    result = run_mixin(work / "out", work / "site.yml")
    assert result.returncode == 0, result.stderr
    return work / "out"


# --- no overrides: today's files ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "overrides", ["", "# nothing changed here\n", None], ids=["empty", "comment", "none"]
)
def test_no_overrides_give_the_committed_files_byte_for_byte(tmp_path, overrides):
    site = None
    if overrides is not None:
        site = tmp_path / "site.yml"
        site.write_text(overrides)
    result = run_mixin(tmp_path / "out", site)
    assert result.returncode == 0, result.stderr
    written = files_under(tmp_path / "out")
    compared = 0
    for name, data in written.items():
        top, _, rest = name.partition("/")
        if name == mixin.MARKER or name.startswith(mixin.DASHBOARD_CONFIGMAPS + "/"):
            continue  # the ConfigMaps exist only in a mixin's output
        assert data == (COMMITTED[top] / rest).read_bytes(), f"{name} differs from the committed file"
        compared += 1
    # Every generated file the repository commits is among them.
    committed = [
        *(ROOT / "alerts" / "rules").rglob("*.rules.yml"),
        *(ROOT / "dashboards").glob("*.json"),
        ROOT / "dashboards" / "provisioning" / "dashboards" / "mssql.yml",
        ROOT / "deploy" / "kubernetes" / "prometheusrule.yaml",
        *(ROOT / "deploy" / "kubernetes" / "optional").glob("*.prometheusrule.yaml"),
        ROOT / "deploy" / "kubernetes" / "thanos-ruler" / "prometheusrule.yaml",
    ]
    # 15 since the shipped collectors' optional rule file and its PrometheusRule (issue 40).
    assert compared == len(committed) == 15
    # The shard side and Thanos Ruler's side apart: no shard loads rules/thanos-ruler/ (rules/*.rules.yml).
    assert "rules/thanos-ruler/mssql.fleet.rules.yml" in written
    assert "kubernetes/thanos-ruler/prometheusrule.yaml" in written
    shard_rules = [n for n in written if n.startswith("rules/") and n.count("/") == 1]
    assert all(b"partial_response_strategy" not in written[n] for n in shard_rules)


def test_the_site_evaluators_decide_which_side_each_group_is_written_to(tmp_path):
    site = tmp_path / "site.yml"
    site.write_text("rule_groups:\n  evaluators:\n    mssql.fleet: prometheus\n")
    result = run_mixin(tmp_path / "out", site)
    assert result.returncode == 0, result.stderr
    out = tmp_path / "out"
    assert not (out / mixin.RULES / "thanos-ruler").exists()
    assert not (out / mixin.KUBERNETES / "thanos-ruler").exists()
    fleet_rules = yaml.safe_load((out / mixin.RULES / "mssql.fleet.rules.yml").read_text())
    assert [g["name"] for g in fleet_rules["groups"]] == ["mssql.fleet"]
    shard = yaml.safe_load((out / mixin.KUBERNETES / "prometheusrule.yaml").read_text())
    assert "mssql.fleet" in [g["name"] for g in shard["spec"]["groups"]]
    # The other shard files as shipped.
    for name in ("mssql.recording.rules.yml", "mssql.alerts.rules.yml"):
        assert (out / mixin.RULES / name).read_bytes() == (ROOT / "alerts" / "rules" / name).read_bytes()


def test_the_dashboard_configmaps_hold_the_dashboards_for_the_sidecar(site_out):
    for board in (site_out / mixin.DASHBOARDS).glob("*.json"):
        configmap = site_out / mixin.DASHBOARD_CONFIGMAPS / board.name.replace(".json", ".configmap.yaml")
        data = yaml.safe_load(configmap.read_text())
        assert data["kind"] == "ConfigMap"
        assert data["metadata"]["name"] == "prod-" + board.stem
        assert data["metadata"]["labels"][mixin.SIDECAR_LABEL] == "1"
        assert data["metadata"]["annotations"][mixin.FOLDER_ANNOTATION] == "DBA: SQL Server"
        assert data["data"] == {board.name: board.read_text()}
        # `kubectl apply` keeps the applied object in a 256 kB annotation.
        assert len(configmap.read_bytes()) < 256 * 1024


# --- a site's file where the user sees it ------------------------------------------------------------

# A 2 GiB node: 2/4 x 300 s = 150 s scaled, so the floor is the flat one, 600 s in the site's file. PLE
# 500 s is under it (and above the shipped 300 s: with the shipped spec nothing fires).
PLE_TEST = """\
rule_files:
  - {rules}/mssql.recording.rules.yml
  - {rules}/mssql.alerts.rules.yml
evaluation_interval: 1m
group_eval_order: [mssql.recording, mssql.recording.long_window, mssql.alerts]
tests:
  - name: the site's job, floor, runbook address and labels
    interval: 1m
    input_series:
      - series: 'mssql_start_time_seconds{{job="{job}",instance="db1:1433"}}'
        values: '-86400x30'
      - series: 'mssql_buffer_node_database_pages{{job="{job}",instance="db1:1433",node="0"}}'
        values: '262144x30'
      - series: 'mssql_buffer_node_page_life_expectancy_seconds{{job="{job}",instance="db1:1433",node="0"}}'
        values: '500x30'
    alert_rule_test:
      - alertname: MSSQLPageLifeExpectancyLow
        eval_time: 9m
        exp_alerts: []
      - alertname: MSSQLPageLifeExpectancyLow
        eval_time: 15m
        exp_alerts: {expected}
"""

FIRING = [
    {
        "exp_labels": {
            "severity": "warning",
            "job": "sqlserver-prod",
            "instance": "db1:1433",
            "node": "0",
            "team": "dba",
            "routing": "sqlserver",
        },
        "exp_annotations": {
            "summary": "Page life expectancy low on db1:1433 node 0",
            "description": (
                "NUMA node 0 keeps pages for 8m 20s, under its floor of 10m 0s (300 s per 4 GiB of the node's"
                " buffer pool, at least 600 s). Only counted once the instance has been up longer than the"
                " floor."
            ),
            "runbook_url": "https://wiki.example/runbooks/MSSQLPageLifeExpectancyLow.md",
        },
    }
]


def promtool_test(promtool: tools.Versioned, tmp_path: Path, rules: Path, job: str, expected: list) -> str:
    test = tmp_path / f"ple-{job}.test.yml"
    test.write_text(PLE_TEST.format(rules=rules, job=job, expected=json.dumps(expected)))
    result = subprocess.run(
        [promtool.path, "test", "rules", str(test)], capture_output=True, text=True, timeout=240, check=False
    )
    return f"exit {result.returncode}\n{result.stdout}{result.stderr}"


@pytest.mark.parametrize("promtool", tools.promtool_versions(), ids=str)
def test_the_site_alert_fires_on_its_job_with_its_runbook_and_labels(promtool, site_out, tmp_path):
    tools.check_binary(promtool)
    rules = site_out / mixin.RULES
    assert promtool_test(promtool, tmp_path, rules, "sqlserver-prod", FIRING).startswith("exit 0"), (
        promtool_test(promtool, tmp_path, rules, "sqlserver-prod", FIRING)
    )
    # The shipped job is no longer the site's: the same series under it stay silent.
    assert promtool_test(promtool, tmp_path, rules, "mssql", []).startswith("exit 0")
    # And the shipped rules do not fire on 500 s at all (their floor is 300 s): the site's floor did it.
    shipped = ROOT / "alerts" / "rules"
    assert promtool_test(promtool, tmp_path, shipped, "mssql", []).startswith("exit 0")


def walk(node: Any) -> Any:
    yield node
    if isinstance(node, dict):
        for value in node.values():
            yield from walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from walk(value)


def test_the_site_dashboards_query_its_job_through_its_datasource_under_its_uids(site_out):
    boards = {p.name: json.loads(p.read_text()) for p in (site_out / mixin.DASHBOARDS).glob("*.json")}
    assert len(boards) == 3
    for name, board in boards.items():
        text = json.dumps(board)
        assert board["uid"].startswith("prod-mssql-"), name
        exprs = [n["expr"] for n in walk(board) if isinstance(n, dict) and isinstance(n.get("expr"), str)]
        assert exprs and all('job="mssql"' not in e for e in exprs), name
        assert sum('job="sqlserver-prod"' in e for e in exprs) > len(exprs) / 2, name
        # Every Prometheus query, panel, variable and annotation names the site's datasource.
        sources = [n["datasource"] for n in walk(board) if isinstance(n, dict) and "datasource" in n]
        prometheus = [s for s in sources if s.get("type") == "prometheus"]
        assert prometheus and all(s == {"type": "prometheus", "uid": "prod-prometheus"} for s in prometheus)
        assert "${datasource}" not in text and "var-datasource" not in text, name
        assert "datasource" not in [v["name"] for v in board["templating"]["list"]], name
        # Links between the dashboards and to the runbooks.
        urls = [n["url"] for n in walk(board) if isinstance(n, dict) and isinstance(n.get("url"), str)]
        dashboard_links = [u for u in urls if u.startswith("/d/")]
        assert dashboard_links and all(u.startswith("/d/prod-mssql-") for u in dashboard_links), name
        runbooks = [u for u in urls if "runbook" in u]
        assert runbooks and all(u.startswith("https://wiki.example/runbooks") for u in runbooks), name
    assert "Dell's 600 s" in json.dumps(boards["mssql-memory-pressure.json"])
    provider = yaml.safe_load((site_out / mixin.DASHBOARDS / "provisioning/dashboards/mssql.yml").read_text())
    assert provider["providers"][0]["folder"] == "DBA: SQL Server"
    assert provider["providers"][0]["folderUid"] == "prod-mssql-memory-exporter"


def test_the_site_prometheusrule_wraps_the_site_rules(site_out):
    resource = yaml.safe_load((site_out / mixin.KUBERNETES / "prometheusrule.yaml").read_text())
    rules = [r for g in resource["spec"]["groups"] for r in g["rules"]]
    alerts = [r for r in rules if "alert" in r]
    assert alerts and all(r["labels"]["team"] == "dba" for r in alerts)
    assert all("job=\"mssql\"" not in r["expr"] for r in rules)
    optional = site_out / mixin.KUBERNETES / "optional" / "smartctl-exporter.prometheusrule.yaml"
    assert "sqlserver-prod" in optional.read_text()


# --- bad files: refused by name, nothing written -------------------------------------------------------


@pytest.mark.parametrize(
    ("site", "named"),
    [
        (
            "memory:\n  page_life_expectancy:\n    flor_seconds: 600\n",
            "memory.page_life_expectancy.flor_seconds: unknown key",
        ),
        ("rate_windw: 5m\n", "rate_windw: unknown key"),
        ("grafana: {folderr: X}\n", "grafana.folderr: unknown key"),
        (
            "memory:\n  page_life_expectancy:\n    floor_seconds: ten minutes\n",
            "memory.page_life_expectancy.floor_seconds: expected a number, got a string 'ten minutes'",
        ),
        ("selector: 5\n", "selector: expected a string, got int 5"),
        ("memory: 5\n", "memory: expected a mapping"),
        ("alert_labels: [team]\n", "alert_labels: expected a mapping"),
        ("endurance: {coverage_tiers: {reach: 1d}}\n", "endurance.coverage_tiers: expected a list"),
        ("memory: {lazy_writes_per_second: {for: 10 minutes}}\n", "memory.lazy_writes_per_second.for"),
        ("alert_labels: {severity: page}\n", "alert_labels: 'severity' is set by the rules themselves"),
        ("alert_labels: {team-name: dba}\n", "alert_labels: 'team-name' is not a label name"),
        ("grafana: {uid_prefix: 'a b'}\n", "grafana.uid_prefix"),
        ("grafana: {uid_prefix: averyveryverylongprefix-}\n", "longer than Grafana's 40 characters"),
        ("- selector: x\n", "expected a mapping of settings, got a list"),
        ("selector: [unclosed\n", "site.yml, line 2: not YAML"),
        (
            "memory:\n  lazy_writes_per_second: {max: 30}\n"
            "memory:\n  free_list_stalls_per_second: {max: 3}\n",
            "site.yml, line 3: 'memory' is given twice in one mapping",
        ),
    ],
)
def test_a_bad_site_file_exits_2_naming_the_key_and_leaves_out_untouched(tmp_path, site, named):
    out = tmp_path / "out"
    assert run_mixin(out, None).returncode == 0  # a previous good run
    before = files_under(out)
    (tmp_path / "site.yml").write_text(site)
    result = run_mixin(out, tmp_path / "site.yml")
    assert result.returncode == 2, result.stdout + result.stderr
    assert named in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert files_under(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "site.yml"]  # no staging left behind


def test_a_missing_site_file_exits_2(tmp_path):
    result = run_mixin(tmp_path / "out", tmp_path / "nowhere.yml")
    assert result.returncode == 2 and "nowhere.yml: cannot read it" in result.stderr
    assert not (tmp_path / "out").exists()


def test_a_directory_the_mixin_did_not_write_is_never_replaced(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    result = run_mixin(tmp_path, None)
    assert result.returncode == 2 and "was not written by `make mixin`" in result.stderr
    assert files_under(tmp_path) == {"notes.txt": b"mine"}


def test_a_second_run_replaces_the_first(tmp_path):
    site = tmp_path / "site.yml"
    site.write_text(SITE)
    assert run_mixin(tmp_path / "out", site).returncode == 0
    site.write_text("")
    assert run_mixin(tmp_path / "out", site).returncode == 0
    assert "sqlserver-prod" not in (tmp_path / "out" / "rules" / "mssql.alerts.rules.yml").read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "site.yml"]


def test_make_mixin(tmp_path):
    (tmp_path / "site.yml").write_text("alert_labels: {team: dba}\n")
    result = subprocess.run(
        ["make", "-s", "mixin", f"OVERRIDES={tmp_path / 'site.yml'}", f"OUT={tmp_path / 'out'}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "team: dba" in (tmp_path / "out" / "rules" / "mssql.alerts.rules.yml").read_text()
    missing = subprocess.run(["make", "-s", "mixin"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert missing.returncode != 0 and "OUT=directory is required" in missing.stderr


# --- the merge ------------------------------------------------------------------------------------------


def test_mappings_merge_all_the_way_down_and_lists_are_replaced(tmp_path):
    site = tmp_path / "site.yml"
    site.write_text(
        "memory: {page_life_expectancy: {for: 20m}}\n"
        "endurance:\n  coverage_tiers:\n    - {reach: 1d, step: 5m}\n    - {reach: 7d, step: 1h}\n"
    )
    spec, shipped = load_site(site), load()
    ple, shipped_ple = spec.memory.page_life_expectancy, shipped.memory.page_life_expectancy
    assert ple.for_ == "20m" and ple.floor_seconds == shipped_ple.floor_seconds
    assert spec.memory.lazy_writes_per_second == shipped.memory.lazy_writes_per_second
    assert [t.reach for t in spec.endurance.coverage_tiers] == ["1d", "7d"]  # not four with two changed
    assert merged({"a": {"b": 1, "c": 2}}, {"a": {"c": 3}, "d": 4}) == {"a": {"b": 1, "c": 3}, "d": 4}


def test_the_shipped_spec_is_unchanged_by_no_overrides():
    assert load_site(None) == load()
    assert load_site(None).raw == yaml.safe_load(SPEC_PATH.read_text())


def test_a_null_section_is_refused_rather_than_wiping_it(tmp_path):
    site = tmp_path / "site.yml"
    site.write_text("memory:\n  # page_life_expectancy: {floor_seconds: 600}\n")
    with pytest.raises(SpecError, match="memory: expected a mapping, got nothing"):
        load_site(site)


# --- routing on the site's labels (docs/alerts.md) ------------------------------------------------------


def documented_team_route() -> dict[str, Any]:
    """The example of docs/alerts.md's "Routing on a site's own labels", as a user would copy it."""
    text = (ROOT / "docs" / "alerts.md").read_text()
    section = text.split("### Routing on a site's own labels", 1)[1]
    return yaml.safe_load(section.split("```yaml\n", 1)[1].split("```", 1)[0])


@tools.needs(tools.AMTOOL)
def test_the_documented_team_route_sends_the_site_labels_to_the_team(tmp_path):
    example = documented_team_route()
    config = yaml.safe_load((ROOT / "alerts" / "alertmanager.yml").read_text())
    config["route"]["routes"] = example["route"]["routes"] + config["route"]["routes"]
    config["receivers"] += example["receivers"]
    (tmp_path / "alertmanager.yml").write_text(yaml.safe_dump(config, sort_keys=False))
    (tmp_path / "templates").symlink_to(ROOT / "alerts" / "templates")

    def receiver(*labels: str) -> str:
        result = subprocess.run(
            ["amtool", "config", "routes", "test", f"--config.file={tmp_path / 'alertmanager.yml'}", *labels],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert result.returncode == 0, result.stdout + result.stderr
        return result.stdout.strip()

    # The labels every alert of the site file above carries.
    site_alert = [f"{key}={value}" for key, value in yaml.safe_load(SITE)["alert_labels"].items()]
    assert receiver(*site_alert, "severity=critical") == "dba-pager"
    assert receiver(*site_alert, "severity=warning") == "dba-tickets"
    assert receiver(*site_alert, "severity=info") == "blackhole"
    # Alerts without the label keep the bundle's routing.
    assert receiver("severity=critical") == "pager"
    assert receiver("severity=warning") == "ticket"


# --- docs/mixin.md's examples ---------------------------------------------------------------------------


def doc_blocks(language: str) -> list[str]:
    text = (ROOT / "docs" / "mixin.md").read_text()
    return [block.split("```", 1)[0] for block in text.split(f"```{language}\n")[1:]]


def test_the_documented_site_file_is_a_valid_site_file(tmp_path):
    site = tmp_path / "site.yml"
    site.write_text(doc_blocks("yaml")[0])
    spec = load_site(site)
    assert spec.selector == 'job="sqlserver-prod"'
    assert spec.alert_labels == {"team": "dba", "routing": "sqlserver"}
    assert spec.grafana.folder == "DBA / SQL Server"
    assert run_mixin(tmp_path / "out", site).returncode == 0


def test_the_documented_compose_file_replaces_the_bundles_mounts():
    # Compose merges volumes by their path in the container: each documented mount must replace one of
    # compose.yaml's, or the bundle's own files would still be read.
    [example] = [yaml.safe_load(b) for b in doc_blocks("yaml") if b.startswith("# compose/site.yaml")]
    bundle = yaml.safe_load((ROOT / "compose" / "compose.yaml").read_text())
    for service, settings in example["services"].items():
        targets = {v.split(":")[1] for v in bundle["services"][service]["volumes"] if isinstance(v, str)}
        for volume in settings["volumes"]:
            source, target, _ = volume.split(":")
            assert target in targets, f"{service}: {target} is not mounted by compose/compose.yaml"
            assert source.startswith("../build/site/")
