"""Scenario files: `extends:`, `delete:` and the key checks (tests/standin/scenario_files.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from mssql_memory_exporter.collectors import buffer_manager, buffer_node, memory_manager, sql_statistics

from tests.standin.scenario import Scenario
from tests.standin.scenario_files import SCENARIO_DIR, ScenarioError, read_scenario

BASE = yaml.safe_load((SCENARIO_DIR / "base.yml").read_text())


def write(tmp_path: Path, name: str, doc: dict) -> Path:
    path = tmp_path / f"{name}.yml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def child(tmp_path: Path, **doc: object) -> dict:
    # A child of the shipped base, written next to a copy of it so `extends: base` finds it by path.
    (tmp_path / "base.yml").write_text((SCENARIO_DIR / "base.yml").read_text())
    return read_scenario(write(tmp_path, "child", {"extends": str(tmp_path / "base.yml"), **doc}))


def test_a_changed_counter_keeps_its_siblings(tmp_path: Path):
    got = child(tmp_path, counters={"Buffer Manager": {"Lazy writes/sec": {"rate": 45}}})
    manager = got["counters"]["Buffer Manager"]
    assert manager["Lazy writes/sec"] == {"rate": 45}
    assert {k: v for k, v in manager.items() if k != "Lazy writes/sec"} == {
        k: v for k, v in BASE["counters"]["Buffer Manager"].items() if k != "Lazy writes/sec"
    }
    assert got["counters"]["Memory Manager"] == BASE["counters"]["Memory Manager"]


def test_a_counter_spec_is_replaced_whole(tmp_path: Path):
    # {gauge: 5} over the base's {rate: 1.5} must not become {rate: 1.5, gauge: 5}.
    got = child(tmp_path, counters={"Buffer Manager": {"Lazy writes/sec": {"gauge": 5}}})
    assert got["counters"]["Buffer Manager"]["Lazy writes/sec"] == {"gauge": 5}


def test_server_properties_merge_and_lists_replace(tmp_path: Path):
    got = child(tmp_path, server={"properties": {"ProductVersion": "15.0.4375.4"}}, restarts=[30])
    assert got["server"]["properties"]["ProductVersion"] == "15.0.4375.4"
    assert got["server"]["properties"]["Edition"] == BASE["server"]["properties"]["Edition"]
    assert got["server"]["uptime_seconds"] == BASE["server"]["uptime_seconds"]
    assert got["restarts"] == [30]


def test_delete_removes_an_inherited_key(tmp_path: Path):
    got = child(tmp_path, delete=["counters.Buffer Manager.Target pages", "counters.SQL Statistics"])
    assert "Target pages" not in got["counters"]["Buffer Manager"]
    assert "SQL Statistics" not in got["counters"]
    assert "Page reads/sec" in got["counters"]["Buffer Manager"]


def test_deleting_what_the_parent_lacks_names_the_file_and_path(tmp_path: Path):
    with pytest.raises(ScenarioError, match=r"child\.yml: delete 'counters\.Buffer Manager\.Target page'"):
        child(tmp_path, delete=["counters.Buffer Manager.Target page"])


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"numa_node": 2}, r"child\.yml: unknown key 'numa_node'"),
        ({"server": {"uptime": 5}}, r"child\.yml: unknown key 'server\.uptime'"),
        ({"delete": "counters"}, r"child\.yml: delete must be a list"),
    ],
)
def test_unknown_or_malformed_keys_fail_loudly(tmp_path: Path, doc: dict, message: str):
    with pytest.raises(ScenarioError, match=message):
        child(tmp_path, **doc)


def test_delete_without_extends_is_refused(tmp_path: Path):
    with pytest.raises(ScenarioError, match="delete without extends"):
        read_scenario(write(tmp_path, "alone", {"delete": ["counters"]}))


def test_a_cycle_is_refused(tmp_path: Path):
    write(tmp_path, "a", {"extends": str(tmp_path / "b.yml")})
    write(tmp_path, "b", {"extends": str(tmp_path / "a.yml")})
    with pytest.raises(ScenarioError, match="extends itself"):
        read_scenario(tmp_path / "a.yml")


def test_name_and_description_are_not_inherited(tmp_path: Path):
    got = child(tmp_path)
    assert got["name"] == "child" and "description" not in got


SHIPPED = sorted(p.stem for p in SCENARIO_DIR.glob("*.yml") if p.stem != "base")


def base_of(name: str) -> str:
    """The scenario a shipped one extends at the root: base, directly or through another shipped one (a
    bad-input variant of a pair, such as ag-replica-left of ag-pair-a, states only what it changes)."""
    parent = yaml.safe_load((SCENARIO_DIR / f"{name}.yml").read_text()).get("extends")
    return parent if parent == "base" or parent not in SHIPPED else base_of(parent)


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_scenario_extends_the_base(name: str):
    assert base_of(name) == "base"
    Scenario.load(name)  # and loads


@pytest.mark.parametrize("module", [buffer_manager, buffer_node, memory_manager, sql_statistics])
def test_the_base_reports_every_counter_the_collectors_read(module):
    # A new counter goes into the base once, and every scenario has it, unless it deletes it.
    counters = BASE["counters"][module.OBJECT.name]
    # Optional ones (the Buffer Pool Extension counters: Windows only) may be absent, as on Linux.
    missing = [s.counter for s in module.METRICS if s.required and s.counter not in counters]
    assert not missing, f"base.yml lacks {module.OBJECT.name}: {missing}"


def test_steps_naming_a_moment_the_file_lacks_are_refused(tmp_path: Path):
    """`steps: [[failover, 2]]` needs `moments: {failover: ...}`: a misspelt moment would otherwise never
    happen, and the failover it stands for would silently not be played."""
    (tmp_path / "base.yml").write_text((SCENARIO_DIR / "base.yml").read_text())
    role = {"role": {"gauge": 1, "steps": [["falover", 2]]}}
    doc = {"extends": str(tmp_path / "base.yml"), "moments": {"failover": 300}}
    path = write(tmp_path, "child", {**doc, "views": {"dm_hadr_availability_replica_states": [role]}})
    with pytest.raises(ValueError, match=r"child.yml: steps name moment\(s\) falover .*has: failover"):
        Scenario.load(path)
