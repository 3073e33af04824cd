"""The tiers of tests/tiers.py: every test has exactly one, and the unit tier is what it claims to be."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests import tiers
from tests.timeouts import PATIENT_SECONDS

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent


def test_every_test_module_is_given_a_tier_and_every_named_test_exists() -> None:
    modules = {p.stem for p in TESTS.glob("test_*.py")}
    untiered = sorted(m for m in modules if tiers.module_tier(m) is None)
    assert untiered == [], "add these to MODULE_TIERS in tests/tiers.py (or name them for a collector)"
    assert sorted(set(tiers.MODULE_TIERS) - modules) == [], "MODULE_TIERS names modules that are gone"
    # A collector's module takes its tier by its name alone: naming it as well would be a second copy.
    assert sorted(set(tiers.MODULE_TIERS) & tiers.collector_modules()) == []
    assert set(tiers.MODULE_TIERS.values()) | set(tiers.TEST_TIERS.values()) <= set(tiers.TIERS)
    for name in [*tiers.TEST_TIERS, *tiers.SLOW_TESTS]:
        file, _, function = name.partition("::")
        source = (TESTS / file).read_text(encoding="utf-8")
        assert not function or re.search(rf"^def {re.escape(function)}\(", source, re.M), f"{name} is gone"


def test_a_collector_module_is_tiered_by_its_name_and_only_for_a_registered_collector() -> None:
    assert tiers.module_tier("test_collector_plan_cache") == tiers.COLLECTOR_MODULE_TIER
    assert "test_collector_wait_stats" in tiers.collector_modules()
    # A misspelt or removed collector's module is not tiered by the convention: the check above fails it.
    assert tiers.module_tier("test_collector_plan_cahce") is None
    assert tiers.module_tier("test_collector_contract") == "unit"  # named in MODULE_TIERS: not a collector
    assert tiers.module_tier("test_something_new") is None


def test_every_collected_test_has_exactly_one_tier(request: pytest.FixtureRequest) -> None:
    assert tiers.ASSIGNED, "the collection hook (conftest.py) assigned nothing"
    several = {nodeid: a.tiers for nodeid, a in tiers.ASSIGNED.items() if len(a.tiers) != 1}
    assert several == {}
    for item in request.session.items:  # what this run selected carries the same marks
        assert [m.name for m in item.iter_markers() if m.name in tiers.TIERS] == list(
            tiers.ASSIGNED[item.nodeid].tiers
        )


def test_the_unit_tier_uses_no_stand_in_no_server_and_no_prometheus_tool() -> None:
    unit = {nodeid: a for nodeid, a in tiers.ASSIGNED.items() if a.tiers == ("unit",)}
    assert not [n for n, a in unit.items() if a.fixtures & tiers.INTEGRATION_FIXTURES]
    assert not [n for n, a in unit.items() if a.prometheus_release]
    # Whatever a module's default, what uses the stand-in is integration or higher.
    standin = [n for n, a in tiers.ASSIGNED.items() if "standin" in a.fixtures]
    assert all(tiers.ASSIGNED[n].tiers[0] != "unit" for n in standin)


def test_every_e2e_and_promtool_test_is_slow() -> None:
    assert all(a.slow for a in tiers.ASSIGNED.values() if a.tiers[0] in ("e2e", "promtool"))


PLANTED = """
    import socket
    import subprocess


    def test_opens_a_socket():
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))


    def test_starts_a_process():
        subprocess.run(["true"], check=True)


    def test_computes():
        assert sum(range(4)) == 6
"""

PLANTED_CONFTEST = """
    import pytest

    from tests import tier_guard


    def pytest_configure(config):
        config.pluginmanager.register(tier_guard, "tier_guard")


    def pytest_collection_modifyitems(items):
        for item in items:
            item.add_marker(pytest.mark.unit)
"""


def test_the_guard_fails_a_unit_test_that_opens_a_socket_or_starts_a_process(tmp_path: Path) -> None:
    (tmp_path / "test_planted.py").write_text(textwrap.dedent(PLANTED), encoding="utf-8")
    (tmp_path / "conftest.py").write_text(textwrap.dedent(PLANTED_CONFTEST), encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--rootdir={tmp_path}", tmp_path],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=4 * PATIENT_SECONDS,
        check=False,
    )
    out = result.stdout + result.stderr
    assert result.returncode == 1, out
    assert "2 failed, 1 passed" in out, out
    assert "test_opens_a_socket is in the unit tier but did socket.bind" in out, out
    assert "test_starts_a_process is in the unit tier but did subprocess.Popen" in out, out


def test_make_test_fast_runs_the_fast_unit_tier_and_installs_no_prometheus() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    recipe = re.search(r"^test-fast:.*\n((?:\t.*\n)+)", makefile, re.M)
    assert recipe, "no test-fast target"
    lines = recipe.group(1)
    assert "scripts/bootstrap.sh standin" in lines  # the stand-in's packages; not `test`: no Prometheus
    assert "bootstrap.sh test" not in lines
    assert '-m "unit and not slow"' in lines
