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

TESTS = Path(__file__).resolve().parent.parent
ROOT = TESTS.parent


def test_the_tier_directories_are_the_tiers_and_hold_test_modules() -> None:
    directories = {p.parent.name for p in TESTS.glob("*/test_*.py")}
    assert directories <= set(tiers.TIERS), "a test directory must be named for a tier"
    assert directories == set(tiers.TIERS), "every tier has its directory"
    assert all((TESTS / tier / "__init__.py").is_file() for tier in tiers.TIERS)


def test_every_test_takes_at_least_its_directory_s_tier() -> None:
    assert tiers.ASSIGNED, "the collection hook (conftest.py) assigned nothing"
    for nodeid, assignment in tiers.ASSIGNED.items():
        parts = Path(nodeid.split("::")[0]).parts
        floor = parts[1] if len(parts) > 2 and parts[1] in tiers.TIERS else tiers.DEFAULT_TIER
        own = assignment.tiers[0]
        # Below its directory only by its own mark (a unit test in an integration module).
        if tiers.TIERS.index(own) < tiers.TIERS.index(floor):
            assert own == "unit", nodeid


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
    # Whatever a module's directory, what uses the stand-in over TDS is integration or higher.
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
    from tests import tier_guard, tiers


    def pytest_configure(config):
        config.pluginmanager.register(tier_guard, "tier_guard")


    def pytest_collection_modifyitems(items):
        tiers.assign(items)
"""


@pytest.mark.integration
def test_a_module_outside_the_tier_directories_is_unit_and_guarded(tmp_path: Path) -> None:
    """A new module dropped in tests/ (outside unit/, integration/...) is unit by default, and the guard
    fails each of its tests that opens a socket or starts a process: misplaced is loud, never skipped."""
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
