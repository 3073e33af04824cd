"""The committed rule files are exactly what the generator makes from the thresholds spec."""

from __future__ import annotations

import subprocess
from pathlib import Path

from alerts import evaluators, generate
from alerts.spec import load
from tests import tools

ROOT = Path(__file__).resolve().parents[2]


def test_committed_rules_are_not_stale():
    for name, text in generate.render(load()).items():
        committed = (generate.RULES_DIR / name).read_text()
        assert committed == text, f"alerts/rules/{name} is stale: run `make generate` and commit the result"


def test_check_mode_notices_a_stale_file(tmp_path):
    assert generate.main(["--out", str(tmp_path)]) == 0
    assert generate.main(["--out", str(tmp_path), "--check"]) == 0
    victim = tmp_path / "mssql.alerts.rules.yml"
    victim.write_text(victim.read_text().replace("> 20", "> 21"))
    assert generate.main(["--out", str(tmp_path), "--check"]) == 1


def test_no_threshold_is_written_twice_in_the_generator():
    # Every number comes from thresholds.yml: the generator's source holds none of Dell's figures.
    source = (ROOT / "alerts" / "generate.py").read_text()
    for figure in (
        "300",
        "0.95",
        "0.9",
        "5242880",
        "4294967296",
        "15552000",
        "2592000",
        "> 2",
        "> 20",
        "> 100",
    ):
        assert figure not in source, f"{figure!r} is spelled in generate.py; take it from thresholds.yml"


@tools.needs(tools.PROMTOOL)
def test_promtool_accepts_the_rules():
    # The optional files too (rules/optional/), which the bundle does not load by default. Thanos Ruler's
    # files (rules/thanos-ruler/) use its partial_response_strategy, which promtool refuses: checked by
    # `thanos tools rules-check` and promtool in tests/promtool/test_fleet_rules.py.
    files = sorted(
        str(p) for p in generate.RULES_DIR.rglob("*.rules.yml") if evaluators.RULER_DIR not in p.parts
    )
    assert any("/optional/" in f for f in files)
    result = subprocess.run(
        ["promtool", "check", "rules", *files], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr
