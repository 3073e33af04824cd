"""tests/tools.py: a check that needs an external program skips on a developer's machine without it, and
fails where the tools are required (CI, `make test`)."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from tests import tools

ROOT = Path(__file__).resolve().parents[2]
ABSENT = {"surely-not-an-installed-program-3f9a": "some-package"}
PRESENT = {"sh": "dash"}


def test_an_installed_program_passes_everywhere() -> None:
    for environ in ({}, {"CI": "true"}, {tools.REQUIRED_ENV: "1"}):
        tools.check(PRESENT, environ=environ)


def test_a_missing_program_skips_a_developers_run_naming_the_package() -> None:
    with pytest.raises(pytest.skip.Exception, match="some-package"):
        tools.check(PRESENT, ABSENT, environ={})
    with pytest.raises(pytest.skip.Exception):
        tools.check(ABSENT, environ={"CI": "", tools.REQUIRED_ENV: "0"})


@pytest.mark.parametrize("environ", [{"CI": "true"}, {"CI": "1"}, {tools.REQUIRED_ENV: "1"}])
def test_a_missing_program_fails_under_ci_and_make_test(environ: dict[str, str]) -> None:
    with pytest.raises(pytest.fail.Exception, match=r"surely-not-an-installed-program-3f9a.*some-package"):
        tools.check(ABSENT, environ=environ)


def test_the_decorator_keeps_the_tests_signature_and_runs_the_check(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(tools.REQUIRED_ENV, "1")
    calls = []

    @tools.needs(ABSENT)
    def needs_absent(tmp_path: Path) -> None:
        calls.append(tmp_path)

    assert list(inspect.signature(needs_absent).parameters) == ["tmp_path"]  # what pytest reads
    with pytest.raises(pytest.fail.Exception):
        needs_absent(Path("."))
    assert not calls

    @tools.needs(PRESENT)
    def needs_present(tmp_path: Path) -> None:
        calls.append(tmp_path)

    needs_present(Path("."))
    assert calls == [Path(".")]


def test_make_test_requires_the_tools() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    recipe = re.search(r"^test:.*\n((?:\t.*\n)+)", makefile, re.M)
    assert recipe, "no test target in the Makefile"
    assert re.search(rf"\b{tools.REQUIRED_ENV}=1 bash scripts/test\.sh", recipe.group(1))
    # .ci/run is `make test`, and CI services set CI as well.
    assert "make test" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


# --- Prometheus versions -----------------------------------------------------------------------------


def fake_promtool(tmp_path: Path, answer: str) -> tools.Versioned:
    """A program at the 3.13.3 promtool's place that answers `--version` with `answer`."""
    path = tmp_path / "promtool"
    path.write_text(f'#!/bin/sh\necho "{answer}"\n')
    path.chmod(0o755)
    return tools.Versioned("promtool", "3.13.3", str(path), f"`bash {tools.PROMETHEUS3_SCRIPT}` builds it")


@pytest.mark.integration
def test_a_version_is_the_binary_that_reports_it(tmp_path: Path) -> None:
    binary = fake_promtool(tmp_path, "promtool, version 3.13.3 (branch: , revision: unknown)")
    tools.check_binary(binary, environ={"CI": "true"})


@pytest.mark.parametrize(
    "answer",
    [
        "promtool, version 2.42.0+ds (branch: debian/sid)",  # Debian's, copied where 3.13.3 belongs
        "promtool, version 3.13.30 (branch: main)",
        "prometheus, version 3.13.3 (branch: main)",  # the server where the tool belongs
        "garbage",
    ],
)
@pytest.mark.integration
def test_a_wrong_binary_cannot_pass_as_the_version(tmp_path: Path, answer: str) -> None:
    binary = fake_promtool(tmp_path, answer)
    with pytest.raises(pytest.fail.Exception, match=r"promtool 3\.13\.3 .* reports version .*prometheus3"):
        tools.check_binary(binary, environ={tools.REQUIRED_ENV: "1"})
    with pytest.raises(pytest.skip.Exception, match=r"prometheus3\.sh"):
        tools.check_binary(binary, environ={})


def test_a_missing_prometheus3_fails_under_make_test_naming_the_script(tmp_path: Path) -> None:
    bin_dir = tools.prometheus3_bin({"XDG_CACHE_HOME": str(tmp_path)})
    assert bin_dir == tmp_path / "mssql-memory-exporter" / "prometheus-3.13.3" / "bin"
    assert tools.prometheus3_bin({"PROMETHEUS3_CACHE": str(tmp_path / "p3")}) == tmp_path / "p3" / "bin"
    [hint] = {b.install_hint for b in tools.prometheus_versions() if b.version == "3.13.3"}
    missing = tools.Versioned("prometheus", "3.13.3", str(bin_dir / "prometheus"), hint)
    with pytest.raises(pytest.fail.Exception, match=r"not installed; `bash scripts/prometheus3\.sh` builds"):
        tools.check_binary(missing, environ={"CI": "1"})
    with pytest.raises(pytest.skip.Exception, match=r"prometheus 3\.13\.3 .* not installed"):
        tools.check_binary(missing, environ={})


def test_versions_match_by_whole_components() -> None:
    assert tools.matches("2.42", "2.42.0+ds") and tools.matches("3.13.3", "3.13.3")
    assert not tools.matches("2.42", "2.420.0") and not tools.matches("3.13.3", "3.13.30")
    assert not tools.matches("3.13.3", None)


def test_the_rules_are_tested_under_debians_version_and_the_one_compose_pins() -> None:
    for versions in (tools.promtool_versions(), tools.prometheus_versions()):
        assert [b.version for b in versions] == ["2.42", tools.PROMETHEUS3_VERSION]
    compose = (ROOT / "compose" / "compose.yaml").read_text(encoding="utf-8")
    assert re.search(rf"image: \S*prometheus:v{re.escape(tools.PROMETHEUS3_VERSION)}\b", compose)
    script = (ROOT / tools.PROMETHEUS3_SCRIPT).read_text(encoding="utf-8")
    assert f"version={tools.PROMETHEUS3_VERSION}\n" in script
