"""Scale and history without Docker or a Go build: no panel asks for more than its store keeps, the
compose long-term profile keeps each resolution as docs/scaling.md says, and scripts/thanos.sh builds
into the cache once (against a stand-in `go`, as tests/integration/test_prometheus3_script.py does for
Prometheus)."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
import yaml

from alerts.spec import duration_seconds
from tests import tools

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "compose" / "compose.yaml"
SCALING_DOC = ROOT / "docs" / "scaling.md"
DASHBOARDS = sorted((ROOT / "dashboards").glob("*.json"))


def _compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def _flag(service: str, name: str) -> str:
    for arg in _compose()["services"][service]["command"]:
        if arg.startswith(f"--{name}="):
            value = arg.split("=", 1)[1]
            # ${VAR:-default}: the default is what the bundle ships
            match = re.fullmatch(r"\$\{\w+:-([^}]+)\}", value)
            return match.group(1) if match else value
    raise AssertionError(f"{service} has no --{name}")


def _relative(text: str) -> float:
    """Grafana's "now-7d" or "8w" as seconds."""
    return duration_seconds(text.removeprefix("now-"))


def _panels(node: object):
    if isinstance(node, dict):
        if "type" in node and "gridPos" in node:
            yield node
        for value in node.values():
            yield from _panels(value)
    elif isinstance(node, list):
        for value in node:
            yield from _panels(value)


@pytest.mark.parametrize("path", DASHBOARDS, ids=[p.name for p in DASHBOARDS])
def test_no_panel_asks_for_a_range_the_single_prometheus_has_deleted(path: Path):
    """compose's Prometheus keeps 30 days (the bundle's smallest store); a panel of 8 weeks drew three
    empty weeks and a line that looked like a trend."""
    kept = duration_seconds(_flag("prometheus", "storage.tsdb.retention.time"))
    board = json.loads(path.read_text())
    assert _relative(board["time"]["from"]) <= kept
    for panel in _panels(board):
        if "timeFrom" in panel:
            asked = _relative(panel["timeFrom"])
            assert asked <= kept, f"{panel['title']}: {panel['timeFrom']} but Prometheus keeps {kept:g} s"


def test_long_term_profile_keeps_each_resolution_as_documented():
    assert _flag("thanos-compactor", "retention.resolution-raw") == "30d"
    assert _flag("thanos-compactor", "retention.resolution-5m") == "365d"
    assert _flag("thanos-compactor", "retention.resolution-1h") == "1825d"
    doc = SCALING_DOC.read_text()
    for line in ("raw | 30 days", "5 m | 1 year", "1 h | 5 years"):
        assert line in doc, line
    services = _compose()["services"]
    thanos = {name for name, s in services.items() if name.startswith("thanos-")}
    assert thanos == {
        "thanos-bucket-volume", "thanos-sidecar", "thanos-store", "thanos-compactor", "thanos-query",
        "thanos-ruler",
    }
    for name in thanos:
        assert services[name]["profiles"] == ["long-term"]
        assert services[name]["image"].endswith(f":v{tools.THANOS_VERSION}")
    # The sidecar uploads only uncompacted blocks: Prometheus must cut 2-hour blocks and never merge them.
    assert _flag("prometheus", "storage.tsdb.min-block-duration") == "2h"
    assert _flag("prometheus", "storage.tsdb.max-block-duration") == "2h"
    endpoints = yaml.safe_load((ROOT / "compose" / "thanos" / "endpoints.yml").read_text())["endpoints"]
    assert all(e["strict"] for e in endpoints), "a store that is down must show as a partial response"


# --- scripts/thanos.sh against a stand-in go -----------------------------------------------------------

FAKE_GO = r"""#!/usr/bin/env bash
set -eu
echo "$1 ${*: -1}" >> "$FAKE_GO_LOG"
case "$1" in
env) echo "${FAKE_GOVERSION:-go1.26.8}" ;;
mod) printf '{\n\t"Dir": "%s"\n}\n' "$FAKE_MODULE" ;;
build)
    out=$(printf '%s\n' "$@" | sed -n '/^-o$/{n;p}')
    case "$*" in *"version.Version=0.42.4"*) ;; *) echo "fake go: version not stamped" >&2; exit 1 ;; esac
    case "$*" in *"-tags netgo,slicelabels "*) ;; *) echo "fake go: not the release tags" >&2; exit 1 ;; esac
    if [ "$(pwd -P)" = "$(cd "$FAKE_MODULE" && pwd -P)" ] || [ ! -f go.mod ]; then
        echo "fake go: built in $PWD, not in a copy of the module" >&2; exit 1
    fi
    printf '#!/bin/sh\necho "thanos, version 0.42.4 (branch: fake)"\n' > "$out"
    chmod +x "$out"
    ;;
esac
"""


@pytest.fixture
def fake_go(tmp_path: Path):
    module = tmp_path / "mod" / "thanos@v0.42.4"
    (module / "cmd" / "thanos").mkdir(parents=True)
    (module / "go.mod").write_text("module github.com/thanos-io/thanos\n")
    go = tmp_path / "go"
    go.write_text(FAKE_GO)
    go.chmod(go.stat().st_mode | stat.S_IXUSR)
    env = {**os.environ, "GO": str(go), "FAKE_MODULE": str(module), "FAKE_GO_LOG": str(tmp_path / "go.log"),
           "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    env.pop("THANOS_CACHE", None)
    return env


def _run(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(ROOT / tools.THANOS_SCRIPT)], env=env, capture_output=True, text=True,
                          timeout=60, check=False)


def test_thanos_script_builds_once_into_the_cache_the_tests_read(fake_go: dict[str, str]):
    first = _run(fake_go)
    assert first.returncode == 0, first.stderr
    binary = tools.thanos_bin(fake_go)
    assert binary == Path(fake_go["XDG_CACHE_HOME"]) / "mssql-memory-exporter/thanos-0.42.4/bin/thanos"
    assert tools._reported_version(str(binary), "thanos") == "0.42.4"
    assert sorted(p.name for p in binary.parent.parent.iterdir()) == [".lock", "bin"]
    assert (binary.parent / "thanos.tags").read_text() == "netgo,slicelabels\n"
    calls = Path(fake_go["FAKE_GO_LOG"]).read_text()
    second = _run(fake_go)
    assert second.returncode == 0 and second.stderr == ""
    assert Path(fake_go["FAKE_GO_LOG"]).read_text() == calls, "nothing rebuilt, go not even asked"


def test_thanos_built_without_the_release_tags_is_rebuilt(fake_go: dict[str, str]):
    """The first build here left out `slicelabels`: its store gateway segfaulted on the first block sync
    although `--version` answered 0.42.4. Such a binary (no tags file) must not pass for built."""
    assert _run(fake_go).returncode == 0
    binary = tools.thanos_bin(fake_go)
    (binary.parent / "thanos.tags").unlink()
    again = _run(fake_go)
    assert again.returncode == 0, again.stderr
    assert "building thanos 0.42.4" in again.stderr
    assert (binary.parent / "thanos.tags").read_text() == "netgo,slicelabels\n"


def test_thanos_script_refuses_an_old_go_before_downloading(fake_go: dict[str, str]):
    result = _run({**fake_go, "FAKE_GOVERSION": "go1.25.3"})
    assert result.returncode == 1
    assert "go1.25.3 is too old to build Thanos 0.42.4" in result.stderr
    assert "mod " not in Path(fake_go["FAKE_GO_LOG"]).read_text()


def test_thanos_script_without_go_says_what_it_would_build(fake_go: dict[str, str], tmp_path: Path):
    result = _run({**fake_go, "GO": str(tmp_path / "no-such-go")})
    assert result.returncode == 1
    assert "thanos: Go is not installed (looked in /usr/local/go/bin and PATH); it builds Thanos 0.42.4" in (
        result.stderr
    )


def test_thanos_script_leaves_no_build_directory_after_a_failed_build(fake_go: dict[str, str]):
    """The shared EXIT trap (scripts/go-module.sh) removes the writable copy of the module."""
    bad = {**fake_go, "GO": fake_go["GO"]}
    Path(bad["GO"]).write_text(FAKE_GO.replace("version.Version=0.42.4", "version.Version=9.9.9"))
    result = _run(bad)
    assert result.returncode == 1 and "version not stamped" in result.stderr
    cache = tools.thanos_bin(fake_go).parent.parent
    assert sorted(p.name for p in cache.iterdir()) == [".lock", "bin"]


# --- the capacity report shown in both docs (issue 30's done-when) ---------------------------------------

ENDURANCE_DOC = ROOT / "docs" / "endurance.md"
REPORT_PICTURE = "img/capacity-report.png"


def _report_table(path: Path) -> list[str]:
    lines = path.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| Instance | Pool | From | To |"))
    end = next(i for i in range(start, len(lines)) if not lines[i].startswith("|"))
    return lines[start:end]


def test_both_docs_show_the_same_capacity_report_and_its_picture():
    scaling, endurance = _report_table(SCALING_DOC), _report_table(ENDURANCE_DOC)
    assert scaling == endurance, "docs/endurance.md's capacity report differs from docs/scaling.md's"
    assert len(scaling) == 2 + 8  # header, separator and the eight rows of the backfilled year
    for doc in (SCALING_DOC, ENDURANCE_DOC):
        assert f"]({REPORT_PICTURE})" in doc.read_text(), doc.name
    picture = ROOT / "docs" / REPORT_PICTURE
    assert picture.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    # The shares follow from the other columns: write rate x 5 years / rating (the first sql-a row).
    header = [cell.strip() for cell in scaling[0].strip("|").split("|")]
    row = dict(zip(header, (cell.strip() for cell in scaling[2].strip("|").split("|")), strict=True))
    assert (row["Instance"], row["Pool"]) == ("sql-a", "tempdb")
    assert row["Max server memory"] == "262,144 MB (256 GiB)"  # as SQL Server sets it, in binary MB
    rate, rated = float(row["Write rate"].split()[0]) * 1e6, float(row["Rated"].split()[0]) * 1e15
    share = float(row["Share"])
    assert abs(rate * 5 * 365.25 * 86400 / rated - share) < 0.001


REAL_GO_FOR_ALL_BUT_BUILD = r"""#!/usr/bin/env bash
# The real go for `env` and `mod download` (what scripts/go-module.sh parses), the stand-in for the build.
if [ "$1" = build ]; then exec "$FAKE_GO" "$@"; fi
exec "$REAL_GO" "$@"
"""


def test_thanos_script_reads_the_real_gos_module_directory(fake_go: dict[str, str], tmp_path: Path):
    """The shared download step (scripts/go-module.sh) against the real Go and Thanos' real module, which
    the bootstrap's build left in Go's module cache; only the 10-20 minute build is the stand-in's."""
    installed = Path("/usr/local/go/bin/go")
    real_go = str(installed) if installed.exists() else shutil.which("go")
    if real_go is None:
        pytest.skip("no Go here: scripts/thanos.sh cannot build Thanos either")
    wrapper = tmp_path / "go-wrapper"
    wrapper.write_text(REAL_GO_FOR_ALL_BUT_BUILD)
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    env = {**fake_go, "GO": str(wrapper), "FAKE_GO": fake_go["GO"], "REAL_GO": real_go, "GOPROXY": "off"}
    result = _run(env)
    if "module lookup disabled" in result.stderr:
        pytest.skip("github.com/thanos-io/thanos@v0.42.4 is not in Go's module cache")
    assert result.returncode == 0, result.stderr
    assert "building thanos 0.42.4" in result.stderr
    assert tools._reported_version(str(tools.thanos_bin(fake_go)), "thanos") == "0.42.4"


# --- the watch on Thanos Ruler in the long-term profile ----------------------------------------------


def test_long_term_profile_gives_prometheus_the_ruler_watch(tmp_path: Path):
    """The one-shot's own script, run here against directories standing in for its mounts, leaves what the
    Prometheus config's globs read: the opt-in rule file (promtool loads it) and the ruler as the target of
    the job the rules select. Without the profile the volume is empty and nothing of it loads."""
    from alerts import thanos_ruler
    from alerts.spec import load
    from tests.integration.test_compose import container_view

    services = _compose()["services"]
    oneshot = services["prometheus-long-term"]
    assert oneshot["profiles"] == ["long-term"]
    assert "profiles" not in services["prometheus"], "the default profile keeps its Prometheus"
    volume, inside = next(v.split(":")[:2] for v in oneshot["volumes"] if not v.startswith("."))
    mounted = {v.split(":")[0]: v.split(":")[1] for v in services["prometheus"]["volumes"]}
    assert mounted[volume] == "/etc/prometheus/long-term"
    source, src = next(v.split(":")[:2] for v in oneshot["volumes"] if v.startswith("."))
    assert (COMPOSE.parent / source).resolve() == ROOT / "alerts" / "rules" / thanos_ruler.FILE_NAME

    root = container_view("prometheus", tmp_path / "view")
    filled = root / "etc" / "prometheus" / "long-term"
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "wget").write_text(f'#!/bin/sh\necho "$@" > {tmp_path / "wget.args"}\n')
    (shim / "wget").chmod(0o755)
    script = oneshot["entrypoint"][-1].replace(f"{inside}/", f"{filled}/")
    script = script.replace(src, str(COMPOSE.parent / source))
    subprocess.run(["sh", "-c", script], env={**os.environ, "PATH": f"{shim}:{os.environ['PATH']}"},
                   check=True, timeout=30)
    assert (tmp_path / "wget.args").read_text().split()[-1] == "http://prometheus:9090/-/reload"

    promtool = tools.promtool_versions()[-1]
    tools.check_binary(promtool)
    config = root / "etc" / "prometheus" / "prometheus.yml"
    result = subprocess.run([promtool.path, "check", "config", str(config)], capture_output=True, text=True,
                            timeout=120, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    name = Path(thanos_ruler.FILE_NAME).name
    assert re.search(rf"Checking \S*/long-term/{re.escape(name)}\n\s+SUCCESS", result.stdout), result.stdout

    prometheus = yaml.safe_load(config.read_text())
    ruler_job = re.fullmatch(r'job="([^"]+)"', load().fleet.ruler_selector).group(1)
    job = next(j for j in prometheus["scrape_configs"] if j["job_name"] == ruler_job)
    targets = [t for f in job["file_sd_configs"] for pattern in f["files"]
               for path in (config.parent).glob(pattern) for g in yaml.safe_load(path.read_text())
               for t in g["targets"]]
    http = _flag("thanos-ruler", "http-address").rsplit(":", 1)[1]
    assert targets == [f"thanos-ruler:{http}"]


def test_every_generated_prometheusrule_has_a_name_of_its_own():
    """The ruler's PrometheusRule and the opt-in watch on the ruler are applied side by side: one name for
    both would let the second `kubectl apply` replace the first."""
    paths = sorted((ROOT / "deploy" / "kubernetes").rglob("*prometheusrule.yaml"))
    names = [yaml.safe_load(p.read_text())["metadata"]["name"] for p in paths]
    assert len(paths) >= 3 and len(names) == len(set(names)), dict(zip(map(str, paths), names, strict=True))
