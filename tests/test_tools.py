"""tests/tools.py: a check that needs an external program skips on a developer's machine without it, and
fails where the tools are required (CI, `make test`)."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from tests import tools

ROOT = Path(__file__).resolve().parent.parent
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
