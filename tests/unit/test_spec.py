"""The typed thresholds spec: alerts/thresholds.yml is checked key by key before any rule is written."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from alerts.spec import SPEC_PATH, Spec, SpecError, load

ROOT = Path(__file__).resolve().parents[2]


def raw_spec() -> dict:
    return yaml.safe_load(SPEC_PATH.read_text())


def test_the_shipped_spec_loads_and_reads_as_typed_attributes():
    spec = load()
    assert spec.memory.lazy_writes_per_second.max == raw_spec()["memory"]["lazy_writes_per_second"]["max"]
    assert spec.endurance.coverage_tiers[-1].reach == raw_spec()["endurance"]["coverage_tiers"][-1]["reach"]


def test_raw_round_trips_to_the_file_as_written():
    assert load().raw == raw_spec()


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (lambda r: r["memory"]["lazy_writes_per_second"].update(maxx=20), "lazy_writes_per_second.maxx"),
        (lambda r: r["memory"]["free_memory_bytes"].pop("min"), "memory.free_memory_bytes.min"),
        (lambda r: r["memory"]["buffer_cache_hit_ratio"].update(oltp=95), "buffer_cache_hit_ratio.oltp"),
        (lambda r: r["target"].update(down_for="5 minutes"), "target.down_for"),
        (lambda r: r["endurance"]["coverage_tiers"][1].update(step="5x"), "endurance.coverage_tiers.1.step"),
        (lambda r: r["memory"]["page_life_expectancy"].update(floor_seconds="300"), "floor_seconds"),
        (lambda r: r["endurance"].update(remaining_critical_seconds=0), "remaining_critical_seconds"),
        (lambda r: r.update(rate_windw="5m"), "rate_windw"),
    ],
)
def test_a_bad_key_is_refused_with_its_path_named(change, named):
    raw = copy.deepcopy(raw_spec())
    change(raw)
    with pytest.raises(SpecError) as caught:
        Spec.parse(raw)
    assert named in str(caught.value) and "thresholds.yml" in str(caught.value)


def test_overrides_change_for_and_windows_but_never_the_names():
    spec = load(for_override="10s", window_override="30s")
    assert spec.duration(spec.memory.lazy_writes_per_second.for_) == "10s"
    assert spec.window(spec.rate_window) == "30s"
    assert spec.rate_window == raw_spec()["rate_window"]
    with pytest.raises(SpecError):
        load(for_override="ten seconds")


@pytest.mark.integration
def test_loading_a_bad_spec_stops_with_the_key_named(tmp_path):
    raw = raw_spec()
    raw["memory"]["lazy_writes_per_second"]["max"] = "twenty"
    bad = tmp_path / "thresholds.yml"
    bad.write_text(yaml.safe_dump(raw))
    code = f"from pathlib import Path; from alerts.spec import load; load(Path({str(bad)!r}))"
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "memory.lazy_writes_per_second.max" in result.stderr
