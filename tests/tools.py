"""The external programs some tests run (promtool, amtool, Prometheus, Alertmanager, systemd-analyze).

On a developer's machine without them, the checks that need them are skipped, naming the package to
install. Under CI (the CI variable set, as CI services do) or `make test` (which sets
REQUIRE_TEST_TOOLS=1), a missing program fails those checks instead: `make bootstrap` installs them, so
their absence is a broken setup, and a silent skip would let a broken rule file or config pass green.
"""

from __future__ import annotations

import functools
import os
import shutil
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import pytest

REQUIRED_ENV = "REQUIRE_TEST_TOOLS"

F = TypeVar("F", bound=Callable[..., Any])

# program (a name on PATH or an absolute path) -> the Debian package that ships it
PROMTOOL = {"promtool": "prometheus"}
AMTOOL = {"amtool": "prometheus-alertmanager"}
PROMETHEUS = {"prometheus": "prometheus"}
ALERTMANAGER = {"prometheus-alertmanager": "prometheus-alertmanager"}
SYSTEMD_ANALYZE = {"systemd-analyze": "systemd"}


def tools_required(environ: Mapping[str, str] = os.environ) -> bool:
    return bool(environ.get("CI")) or environ.get(REQUIRED_ENV) == "1"


def missing(programs: Mapping[str, str]) -> list[str]:
    return [program for program in programs if shutil.which(program) is None]


def check(*groups: Mapping[str, str], environ: Mapping[str, str] = os.environ) -> None:
    """Return when every program is installed; otherwise skip the test, or fail it where the tools are
    required."""
    programs = {program: package for group in groups for program, package in group.items()}
    absent = missing(programs)
    if not absent:
        return
    packages = sorted({programs[program] for program in absent})
    message = f"{', '.join(absent)} not installed (Debian: {' '.join(packages)}; `make bootstrap` installs)"
    if tools_required(environ):
        pytest.fail(f"{message}; required under CI and `make test`", pytrace=False)
    pytest.skip(message)


def needs(*groups: Mapping[str, str]) -> Callable[[F], F]:
    """Decorator: `check` the programs before the test runs. The wrapper keeps the test's signature, so
    fixtures and parametrize marks work as before."""

    def decorate(test: F) -> F:
        @functools.wraps(test)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            check(*groups)
            return test(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return decorate
