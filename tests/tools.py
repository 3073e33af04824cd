"""The external programs some tests run (promtool, amtool, Prometheus, Alertmanager, systemd-analyze).

On a developer's machine without them, the checks that need them are skipped, naming the package to
install. Under CI (the CI variable set, as CI services do) or `make test` (which sets
REQUIRE_TEST_TOOLS=1), a missing program fails those checks instead: `make bootstrap` installs them, so
their absence is a broken setup, and a silent skip would let a broken rule file or config pass green.
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
JSONNET = {"jsonnet": "jsonnet"}  # the C++ jsonnet (mixin/mixin.libsonnet)


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

        wrapper.needs_tools = True  # type: ignore[attr-defined]  # its tier (tests/tiers.py)
        return wrapper  # type: ignore[return-value]

    return decorate


# --- Prometheus versions -----------------------------------------------------------------------------
# Users run the Prometheus that compose pins (3.13.3); Debian 12 ships 2.42. Rule results differ between
# them (3.x range windows are left-open: a 5m window over 5-minute samples holds one sample, not two), so
# the rule tests and the end-to-end alerting test run under both. scripts/prometheus3.sh builds 3.13.3 into
# this cache once per machine (the test bootstrap calls it).
PROMETHEUS3_VERSION = "3.13.3"
PROMETHEUS3_SCRIPT = "scripts/prometheus3.sh"


def prometheus3_bin(environ: Mapping[str, str] = os.environ) -> Path:
    """Where scripts/prometheus3.sh puts the binaries: the same rule as the script's."""
    if environ.get("PROMETHEUS3_CACHE"):
        return Path(environ["PROMETHEUS3_CACHE"]) / "bin"
    cache = Path(environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "mssql-memory-exporter" / f"prometheus-{PROMETHEUS3_VERSION}" / "bin"


PROMETHEUS3_BIN = prometheus3_bin()


@dataclass(frozen=True)
class Versioned:
    """A Prometheus program of a known version: `path` is a name on PATH or an absolute path."""

    program: str
    version: str
    path: str
    install_hint: str

    def __str__(self) -> str:  # pytest ids
        return f"{self.program}-{self.version}"


def _versions(program: str) -> list[Versioned]:
    return [
        Versioned(program, "2.42", program, "Debian: prometheus; `make bootstrap` installs"),
        Versioned(
            program,
            PROMETHEUS3_VERSION,
            str(PROMETHEUS3_BIN / program),
            f"`bash {PROMETHEUS3_SCRIPT}` builds it (the test bootstrap runs it)",
        ),
    ]


def promtool_versions() -> list[Versioned]:
    return _versions("promtool")


def prometheus_versions() -> list[Versioned]:
    return _versions("prometheus")


def newest_prometheus() -> list[Versioned]:
    """The newest release only, for a long stack test whose subject is not Prometheus itself (Thanos
    Ruler's evaluation, a failover's alerts): the per-release behaviour is covered by shorter tests, and
    each release costs the suite another 35-50 s."""
    return prometheus_versions()[-1:]


@functools.cache
def _reported_version(path: str, program: str) -> str | None:
    """The version `path --version` reports, when its first line names `program` ("promtool, version
    3.13.3 (branch: ...)"): the server left where the tool belongs does not pass for the tool."""
    try:
        result = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.match(r"(\S+), version (\S+)", result.stdout + result.stderr)
    if result.returncode != 0 or match is None or match.group(1) != program:
        return None
    return match.group(2)


def matches(version: str, reported: str | None) -> bool:
    """Whether a program that reports `reported` is `version`: 2.42.0+ds is "2.42", 3.13.3 is "3.13.3";
    2.420 and 3.13.30 are neither."""
    return reported is not None and re.match(rf"{re.escape(version)}(?!\d)", reported) is not None


def check_binary(binary: Versioned, environ: Mapping[str, str] = os.environ) -> None:
    """Return when `binary` is installed and reports its version (so another build left at the cache path
    cannot pass for 3.13.3); otherwise skip the test, or fail it where the tools are required."""
    resolved = shutil.which(binary.path)
    reported = _reported_version(resolved, binary.program) if resolved else None
    if matches(binary.version, reported):
        return
    problem = "not installed" if resolved is None else f"reports version {reported or '(none)'}"
    message = f"{binary.program} {binary.version} ({binary.path}) {problem}; {binary.install_hint}"
    if tools_required(environ):
        pytest.fail(f"{message}; required under CI and `make test`", pytrace=False)
    pytest.skip(message)


# --- Thanos ------------------------------------------------------------------------------------------
# The long-term-store tests run Thanos (sidecar, store, query, compact, tools) built from its Go module by
# scripts/thanos.sh into this cache once per machine (the test bootstrap calls it).
THANOS_VERSION = "0.42.4"
THANOS_SCRIPT = "scripts/thanos.sh"


def thanos_bin(environ: Mapping[str, str] = os.environ) -> Path:
    """Where scripts/thanos.sh puts the binary: the same rule as the script's."""
    if environ.get("THANOS_CACHE"):
        return Path(environ["THANOS_CACHE"]) / "bin" / "thanos"
    cache = Path(environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "mssql-memory-exporter" / f"thanos-{THANOS_VERSION}" / "bin" / "thanos"


THANOS = Versioned(
    "thanos",
    THANOS_VERSION,
    str(thanos_bin()),
    f"`bash {THANOS_SCRIPT}` builds it (the test bootstrap runs it)",
)
THANOS_TAGS = "netgo,slicelabels"  # scripts/thanos.sh's build tags, recorded in bin/thanos.tags


def check_thanos(environ: Mapping[str, str] = os.environ) -> None:
    """check_binary for Thanos, and that it was built with the release's tags: without `slicelabels` its
    store gateway dies on the first block sync, which would fail the test for the wrong reason."""
    check_binary(THANOS, environ)
    tags_file = Path(THANOS.path).with_name("thanos.tags")
    tags = tags_file.read_text().strip() if tags_file.exists() else "(none recorded)"
    if tags != THANOS_TAGS:
        message = f"thanos at {THANOS.path} was built with tags {tags}, not {THANOS_TAGS}; "
        message += THANOS.install_hint
        if tools_required(environ):
            pytest.fail(f"{message}; required under CI and `make test`", pytrace=False)
        pytest.skip(message)
