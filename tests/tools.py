"""The external programs some tests run (promtool, amtool, Prometheus, Alertmanager, systemd-analyze).

On a developer's machine without them, the checks that need them are skipped, naming the package to
install. Under CI (the CI variable set, as CI services do) or `make test` (which sets
REQUIRE_TEST_TOOLS=1), a missing program fails those checks instead: `make bootstrap` installs them, so
their absence is a broken setup, and a silent skip would let a broken rule file or config pass green.

Two Prometheus releases: Debian 12's 2.42 (the `prometheus` package) and 3.13.3, the release compose pins,
which Debian does not ship; scripts/prometheus3.sh builds it into a cache outside the clone. Tests that
run rules take a release from `RELEASES` (parametrize over `RELEASE_IDS`) and ask `promtool(release)` or
`prometheus(release)` for the program, which checks it is installed AND answers `--version` with that
release, so a wrong binary cannot pass as the release a test is named after.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
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


# --- Prometheus releases ------------------------------------------------------------------------------

PROMETHEUS3_VERSION = "3.13.3"
PROMETHEUS3_SCRIPT = "scripts/prometheus3.sh"
VERSION_LINE = re.compile(r"^(?P<program>\S+), version (?P<version>\S+)")


def prometheus3_bin(environ: Mapping[str, str] = os.environ) -> Path:
    """Where scripts/prometheus3.sh puts the 3.13.3 binaries (same rule as the script)."""
    if environ.get("PROMETHEUS3_CACHE"):
        return Path(environ["PROMETHEUS3_CACHE"]) / "bin"
    cache = Path(environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "mssql-memory-exporter" / f"prometheus-{PROMETHEUS3_VERSION}" / "bin"


@dataclass(frozen=True)
class Release:
    """One Prometheus release the rules are tested under, and how to get its programs."""

    version: str  # what `--version` must start with: "2.42" matches Debian's "2.42.0+ds"
    promtool: str  # a name on PATH or an absolute path
    prometheus: str
    remedy: str  # what installs it, for the skip or failure message

    def __str__(self) -> str:
        return self.version


DEBIAN = Release("2.42", "promtool", "prometheus", "Debian: prometheus; `make bootstrap` installs")
PROMETHEUS3 = Release(
    PROMETHEUS3_VERSION,
    str(prometheus3_bin() / "promtool"),
    str(prometheus3_bin() / "prometheus"),
    f"`bash {PROMETHEUS3_SCRIPT}` builds it (the test bootstrap runs it)",
)
RELEASES = (DEBIAN, PROMETHEUS3)
RELEASE_IDS = [r.version for r in RELEASES]  # for @pytest.mark.parametrize("version", RELEASE_IDS)


def release(version: str) -> Release:
    return next(r for r in RELEASES if r.version == version)


@functools.cache
def answered_version(program: str, path: str) -> str | None:
    """The release `path --version` reports for `program`, or None when it does not run or names another
    program (cached: the answer does not change within a run)."""
    try:
        result = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = VERSION_LINE.match(result.stdout + result.stderr)
    if result.returncode != 0 or match is None or match.group("program") != program:
        return None
    return match.group("version")


def matches(version: str, answered: str | None) -> bool:
    """Whether a release answered `answered`: 2.42.0+ds is "2.42", 3.13.3 is "3.13.3"; 2.420 and 3.13.30
    are neither."""
    return answered is not None and re.match(rf"{re.escape(version)}(?![\d])", answered) is not None


def program(release: Release, name: str, environ: Mapping[str, str] = os.environ) -> str:
    """The path of `name` ("promtool" or "prometheus") of that release; skips, or fails where the tools
    are required, when it is missing or answers another version."""
    path = getattr(release, name)
    located = shutil.which(path)
    answered = answered_version(name, located) if located else None
    if matches(release.version, answered):
        return str(located)
    found = "not installed" if located is None else f"answers version {answered or '(nothing)'}"
    message = f"{name} {release.version} ({path}) {found}; {release.remedy}"
    if tools_required(environ):
        pytest.fail(f"{message}; required under CI and `make test`", pytrace=False)
    pytest.skip(message)


def promtool(version: str, environ: Mapping[str, str] = os.environ) -> str:
    return program(release(version), "promtool", environ)


def prometheus(version: str, environ: Mapping[str, str] = os.environ) -> str:
    return program(release(version), "prometheus", environ)
