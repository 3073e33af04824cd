"""The collector contract: one record per module, a typed view of the target, no config import.

These hold the structure issue 15 asked for; a collector that reaches into the config again, or a module
that is written but never listed, fails here rather than in a review.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path
from typing import Protocol

import pytest
from mssql_memory_exporter import collectors
from mssql_memory_exporter.collectors import COLLECTORS, view
from mssql_memory_exporter.collectors.base import CollectorRecord
from mssql_memory_exporter.config import KnownWritten, SsdDrives, SsdPool, TargetConfig
from mssql_memory_exporter.host.collector import HostCollector

PACKAGE = Path(collectors.__file__).parent
MODULES = sorted(p for p in PACKAGE.glob("*.py") if p.name != "__init__.py")


def _imports(path: Path) -> set[str]:
    """Every module a file imports, resolved to an absolute dotted name."""
    found: set[str] = set()
    package = ["mssql_memory_exporter", "collectors"]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            parts = [*base, *(node.module.split(".") if node.module else [])]
            found.add(".".join(parts))
            found.update(".".join([*parts, alias.name]) for alias in node.names)
    return found


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_no_collector_imports_the_config(path: Path):
    config = {i for i in _imports(path) if i.startswith("mssql_memory_exporter.config")}
    assert not config, f"{path.name} imports {sorted(config)}: read the target through collectors.view"


def test_the_import_check_can_see_a_relative_config_import(tmp_path: Path):
    probe = tmp_path / "probe.py"
    probe.write_text("from ..config import SsdPool\nfrom .. import config\n")
    assert {"mssql_memory_exporter.config.SsdPool", "mssql_memory_exporter.config"} <= _imports(probe)


def _package_graph() -> dict[str, set[str]]:
    """Each module of the installed package, to the modules of the package it imports."""
    root = PACKAGE.parent
    names: dict[Path, str] = {}
    for path in root.rglob("*.py"):
        parts = path.relative_to(root.parent).with_suffix("").parts
        names[path] = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
    known = set(names.values())
    graph: dict[str, set[str]] = {}
    for path, name in names.items():
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        found = graph[name] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = package[: len(package) - node.level + 1] if node.level else []
                module = ".".join([*base, *(node.module.split(".") if node.module else [])])
                for alias in node.names:
                    # `from . import perf` imports the submodule, not the package it sits in
                    found.add(f"{module}.{alias.name}" if f"{module}.{alias.name}" in known else module)
            elif isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
        found &= known - {name}
    return graph


def _a_circle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle (its modules, the first repeated at the end), or None."""
    done: set[str] = set()

    def visit(node: str, path: list[str]) -> list[str] | None:
        if node in path:
            return [*path[path.index(node) :], node]
        if node in done:
            return None
        for nxt in sorted(graph.get(node, ())):
            circle = visit(nxt, [*path, node])
            if circle:
                return circle
        done.add(node)
        return None

    for start in sorted(graph):
        circle = visit(start, [])
        if circle:
            return circle
    return None


def test_the_package_has_no_import_circle_not_even_for_types():
    """Data goes down the stages: a module never needs, even for a type hint under TYPE_CHECKING, one that
    imports it back (collectors/base and perf met through a perf-only field; web/connections, handler and
    server through the server's members)."""
    circle = _a_circle(_package_graph())
    assert circle is None, " -> ".join(circle or [])


def test_the_circle_check_finds_a_type_only_circle():
    assert _a_circle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert _a_circle({"a": {"b"}, "b": set()}) is None


def test_metrics_import_nothing_of_the_stages_that_use_them():
    """The family builder, the declarations and the exposition are the bottom stage: collectors, host and
    app build on them, so they import nothing of the package but each other."""
    graph = _package_graph()
    outside = {
        module: sorted(i for i in imports if not i.startswith("mssql_memory_exporter.metrics"))
        for module, imports in graph.items()
        if module.startswith("mssql_memory_exporter.metrics")
    }
    assert not {module: imports for module, imports in outside.items() if imports}


def test_every_module_with_a_record_is_listed_once():
    records = {}
    for info in pkgutil.iter_modules([str(PACKAGE)]):
        module = importlib.import_module(f"mssql_memory_exporter.collectors.{info.name}")
        record = getattr(module, "COLLECTOR", None)
        if record is not None:
            assert isinstance(record, CollectorRecord), info.name
            records[info.name] = record
    assert list(COLLECTORS) == [r for r in COLLECTORS if r in records.values()]
    assert sorted(r.name for r in COLLECTORS) == sorted(r.name for r in records.values())
    assert len({r.name for r in COLLECTORS}) == len(COLLECTORS)


def _members(protocol: type[Protocol]) -> set[str]:  # type: ignore[valid-type]
    return {name for name in vars(protocol) if not name.startswith("_")}


@pytest.mark.parametrize(
    ("protocol", "model"),
    [
        (view.TargetView, TargetConfig),
        (view.PoolView, SsdPool),
        (view.DrivesView, SsdDrives),
        (view.KnownWrittenView, KnownWritten),
    ],
    ids=lambda x: x.__name__,
)
def test_config_models_offer_every_field_the_views_read(protocol: type, model: type):
    # What mypy checks statically, checked here too since CI runs no type checker: a renamed config field
    # would otherwise surface as an AttributeError inside a scrape.
    missing = _members(protocol) - set(model.model_fields)  # type: ignore[attr-defined]
    assert not missing, f"{model.__name__} lacks {sorted(missing)} that {protocol.__name__} promises"


def test_the_host_collector_offers_what_the_host_view_reads():
    missing = {name for name in _members(view.HostView) if not callable(getattr(HostCollector, name, None))}
    assert not missing


def test_the_default_view_has_every_field():
    assert _members(view.TargetView) <= set(vars(view.NO_TARGET)) | set(view.TargetFacts.__dataclass_fields__)


def test_the_package_imports_nothing_private_of_prometheus_client():
    """A private function may change or vanish in any release (the dependency allows every 0.x)."""
    private = [
        f"{path.relative_to(PACKAGE.parent)}: {node.module}.{alias.name}"
        for path in sorted(PACKAGE.parent.rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("prometheus_client")
        for alias in node.names
        if alias.name.startswith("_") or any(part.startswith("_") for part in (node.module or "").split("."))
    ]
    assert not private
