"""scripts/prometheus3.sh: builds Prometheus 3.13.3's promtool and prometheus into the cache once, and is
quiet and quick every time after.

A real build takes 6-12 minutes of both cores, so the build path runs here against a stand-in `go` (GO=...)
that writes a small program answering `--version` as the real one does, after checking it was called the
way the real build needs (in a copy of the module, never in the read-only module cache). The
"already built" path runs against the real cache, where the bootstrap has put the real binaries.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import tools
from tests.timeouts import PATIENT_SECONDS

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / tools.PROMETHEUS3_SCRIPT

FAKE_GO = r"""#!/usr/bin/env bash
# Stands in for `go env GOVERSION`, `go mod download -json` and `go build [-ldflags F] -o OUT ./cmd/TOOL`.
set -eu
echo "$1 ${*: -1}" >> "$FAKE_GO_LOG"
case "$1" in
env)
    echo "${FAKE_GOVERSION:-go1.26.8}"
    ;;
mod)
    printf '{\n\t"Path": "github.com/prometheus/prometheus",\n\t"Version": "%s",\n\t"Dir": "%s"\n}\n' \
        "${*: -1}" "$FAKE_MODULE"
    ;;
build)
    out=$(printf '%s\n' "$@" | sed -n '/^-o$/{n;p}') tool=${*: -1}
    tool=${tool#./cmd/}
    case "$*" in
    *"-X github.com/prometheus/common/version.Version=3.13.3"*) ;;
    *) echo "fake go: the version is not stamped" >&2; exit 1 ;;
    esac
    # The real build writes go.sum (-mod=mod): it must run in a copy, not in the module cache (pwd -P
    # sees through a symlink; a permission check would not stop root).
    if [ "$(pwd -P)" = "$(cd "$FAKE_MODULE" && pwd -P)" ] || [ ! -f go.mod ]; then
        echo "fake go: built in $PWD, not in a copy of the module" >&2
        exit 1
    fi
    sleep "${FAKE_GO_SLEEP:-0}"
    printf '#!/bin/sh\necho "%s, version %s (branch: fake)"\n' "$tool" "${FAKE_GO_VERSION:-3.13.3}" > "$out"
    chmod +x "$out"
    ;;
esac
"""


def executable(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[dict[str, str]]:
    """The environment for one run against the stand-in go, with its own cache directory."""
    module = tmp_path / "mod" / "prometheus@v0.313.3"
    (module / "cmd").mkdir(parents=True)
    (module / "go.mod").write_text("module github.com/prometheus/prometheus\n")
    for path in (module / "go.mod", module / "cmd", module):  # read-only, as Go's module cache is
        path.chmod(path.stat().st_mode & ~0o222)
    env = {
        **os.environ,
        "GO": str(executable(tmp_path / "go", FAKE_GO)),
        "FAKE_MODULE": str(module),
        "FAKE_GO_LOG": str(tmp_path / "go.log"),
        "XDG_CACHE_HOME": str(tmp_path / "xdg"),
    }
    env.pop("PROMETHEUS3_CACHE", None)
    yield env
    for path in (module, module / "cmd", module / "go.mod"):
        path.chmod(path.stat().st_mode | 0o200)  # so pytest can remove tmp_path


def run(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60, check=False
    )


def go_calls(env: dict[str, str]) -> list[str]:
    log = Path(env["FAKE_GO_LOG"])
    return log.read_text().splitlines() if log.exists() else []


def builds(env: dict[str, str]) -> list[str]:
    return sorted(call.split()[1] for call in go_calls(env) if call.startswith("build"))


def bin_dir(env: dict[str, str]) -> Path:
    return tools.prometheus3_bin(env)


def test_builds_both_programs_into_the_cache_the_tests_read(fake: dict[str, str]) -> None:
    result = run(fake)
    assert result.returncode == 0, result.stderr
    assert builds(fake) == ["./cmd/prometheus", "./cmd/promtool"]
    assert "building promtool 3.13.3" in result.stderr
    # Where tests/tools.py looks: ${XDG_CACHE_HOME}/mssql-memory-exporter/prometheus-3.13.3/bin.
    assert bin_dir(fake) == Path(fake["XDG_CACHE_HOME"]) / "mssql-memory-exporter/prometheus-3.13.3/bin"
    for name in ("promtool", "prometheus"):
        assert tools._reported_version(str(bin_dir(fake) / name), name) == "3.13.3"
    # The temporary copy is gone; only bin/ and the lock stay.
    assert sorted(p.name for p in bin_dir(fake).parent.iterdir()) == [".lock", "bin"]


def test_quiet_and_without_go_when_both_are_built(fake: dict[str, str]) -> None:
    assert run(fake).returncode == 0
    calls = go_calls(fake)
    again = run(fake)
    assert (again.returncode, again.stdout, again.stderr) == (0, "", "")
    assert go_calls(fake) == calls


def test_rebuilds_only_the_program_that_answers_another_version(fake: dict[str, str]) -> None:
    assert run(fake).returncode == 0
    # e.g. Debian's promtool copied there by hand: it runs, but it is not 3.13.3.
    debian = '#!/bin/sh\necho "promtool, version 2.42.0+ds (branch: debian/sid)"\n'
    executable(bin_dir(fake) / "promtool", debian)
    Path(fake["FAKE_GO_LOG"]).unlink()
    result = run(fake)
    assert result.returncode == 0, result.stderr
    assert builds(fake) == ["./cmd/promtool"]
    assert tools._reported_version(str(bin_dir(fake) / "promtool"), "promtool") == "3.13.3"


def test_a_build_of_another_version_fails_and_is_not_installed(fake: dict[str, str]) -> None:
    result = run({**fake, "FAKE_GO_VERSION": "3.13.2"})
    assert result.returncode != 0
    assert "does not answer version 3.13.3" in result.stderr
    assert not (bin_dir(fake) / "promtool").exists()


def test_a_go_too_old_for_the_module_is_named_before_any_download(fake: dict[str, str]) -> None:
    result = run({**fake, "FAKE_GOVERSION": "go1.19.8"})  # Debian 12's golang
    assert result.returncode != 0
    assert "go1.19.8 is too old to build Prometheus 3.13.3 (needs go1.25 or later)" in result.stderr
    assert [call.split()[0] for call in go_calls(fake)] == ["env"]


def test_two_runs_at_once_build_once(fake: dict[str, str]) -> None:
    env = {**fake, "FAKE_GO_SLEEP": "1"}
    first = subprocess.Popen(["bash", str(SCRIPT)], env=env, stderr=subprocess.PIPE, text=True)
    time.sleep(0.3)  # the first holds the lock
    second = subprocess.Popen(["bash", str(SCRIPT)], env=env, stderr=subprocess.PIPE, text=True)
    _, first_err = first.communicate(timeout=60)
    _, second_err = second.communicate(timeout=60)
    assert (first.returncode, second.returncode) == (0, 0), first_err + second_err
    assert builds(fake) == ["./cmd/prometheus", "./cmd/promtool"]
    assert "waiting" in second_err and "building promtool" not in second_err


def test_the_real_cache_is_reused_quietly() -> None:
    """What every `make test` after the first pays: a --version of each binary, no output."""
    for binary in (*tools.promtool_versions(), *tools.prometheus_versions()):
        if binary.version == tools.PROMETHEUS3_VERSION:
            tools.check_binary(binary)
    started = time.monotonic()
    result = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=60, check=False)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    # A rebuild takes minutes; a reuse seconds, even on a loaded machine.
    assert time.monotonic() - started < PATIENT_SECONDS


REAL_GO_FOR_ALL_BUT_BUILD = r"""#!/usr/bin/env bash
# The real go for `env` and `mod download` (what the script parses), the stand-in for the long build.
if [ "$1" = build ]; then exec "$FAKE_GO" "$@"; fi
exec "$REAL_GO" "$@"
"""


def test_the_script_reads_the_real_gos_module_directory(fake: dict[str, str], tmp_path: Path) -> None:
    real_go = next((str(p) for p in (Path("/usr/local/go/bin/go"),) if p.exists()), None) or shutil.which(
        "go"
    )
    if real_go is None:
        pytest.skip("no Go here: scripts/prometheus3.sh cannot build Prometheus 3.13.3 either")
    env = {
        **fake,
        "GO": str(executable(tmp_path / "go-wrapper", REAL_GO_FOR_ALL_BUT_BUILD)),
        "FAKE_GO": fake["GO"],
        "REAL_GO": real_go,
        "GOPROXY": "off",  # no download from a test: the module is in Go's cache once the bootstrap built
    }
    result = run(env)
    if "module lookup disabled" in result.stderr:
        pytest.skip("github.com/prometheus/prometheus@v0.313.3 is not in Go's module cache")
    assert result.returncode == 0, result.stderr
    assert builds(fake) == ["./cmd/prometheus", "./cmd/promtool"]


# --- scripts/go-module.sh, the part both build scripts share -------------------------------------------


def test_without_go_the_script_says_what_go_would_build(fake: dict[str, str]) -> None:
    result = run({**fake, "GO": str(Path(fake["FAKE_GO_LOG"]).parent / "no-such-go")})
    assert result.returncode == 1
    assert "prometheus3: Go is not installed" in result.stderr
    assert "it builds Prometheus 3.13.3" in result.stderr
    assert not bin_dir(fake).joinpath("promtool").exists()


def test_a_failed_build_leaves_no_build_directory_behind(fake: dict[str, str]) -> None:
    """The shared EXIT trap removes the writable copy whichever way the script ends."""
    assert run({**fake, "FAKE_GO_VERSION": "3.13.2"}).returncode != 0
    assert sorted(p.name for p in bin_dir(fake).parent.iterdir()) == [".lock", "bin"]


def test_both_build_scripts_use_the_shared_part_and_repeat_none_of_it() -> None:
    shared = ROOT / "scripts" / "go-module.sh"
    assert "go mod download" in shared.read_text()
    for script in (SCRIPT, ROOT / tools.THANOS_SCRIPT):
        text = script.read_text()
        assert 'source "$(dirname "${BASH_SOURCE[0]}")/go-module.sh"' in text, script.name
        for repeated in ("go mod download -json", "GOTOOLCHAIN=local", "trap ", "chmod -R u+w"):
            assert repeated not in text, f"{script.name} repeats {repeated!r} of go-module.sh"


def test_the_shared_part_copies_the_module_writable_and_removes_it_on_exit(
    fake: dict[str, str], tmp_path: Path
) -> None:
    """go-module.sh on its own, sourced by a small script: `work/src` is a writable copy of the read-only
    module, and the EXIT trap removes `work` when the sourcing script ends."""
    cache = tmp_path / "cache"
    cache.mkdir()
    caller = tmp_path / "caller.sh"
    caller.write_text(
        "set -euo pipefail\n"
        f"source {ROOT / 'scripts' / 'go-module.sh'}\n"
        f"go_module_source demo 'Demo 1.0' go1.25 example.com/demo v1.0.0 {cache}\n"
        'echo "$work"\n'
        'touch "$work/src/go.sum"  # what -mod=mod does to the copy\n'
        'cmp "$FAKE_MODULE/go.mod" "$work/src/go.mod"\n'
    )
    result = subprocess.run(["bash", str(caller)], env=fake, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    work = Path(result.stdout.strip())
    assert work.parent == cache and not work.exists()
    assert go_calls(fake) == ["env GOVERSION", "mod example.com/demo@v1.0.0"]
    old = subprocess.run(
        ["bash", str(caller)], env={**fake, "FAKE_GOVERSION": "go1.24.9"}, capture_output=True, text=True,
        timeout=60,
    )
    assert old.returncode == 1
    assert old.stderr.strip() == "demo: go1.24.9 is too old to build Demo 1.0 (needs go1.25 or later)"
    assert list(cache.iterdir()) == []
