#!/usr/bin/env bash
# Builds Prometheus 3.13.3's `promtool` and `prometheus` (the release compose pins) for the tests, which run
# every rule test and the end-to-end alerting test under it as well as under Debian's 2.42.
#
# Debian 12 ships only 2.42, so the binaries are built from the Go module (v0.313.3 is Prometheus 3.13.3;
# `go install ...@v0.313.3` is refused because the module has replace directives, so the build runs in a
# writable copy of the module's directory). They go to a cache outside the clone, because CI clones fresh
# and one build takes minutes on 2 cores (only the two tools the tests run, without the service discoveries
# they never use: see `tags` below):
#     ${XDG_CACHE_HOME:-$HOME/.cache}/mssql-memory-exporter/prometheus-3.13.3/bin/{promtool,prometheus}
# (PROMETHEUS3_CACHE overrides the directory above bin/). A binary is rebuilt only when it is missing or
# does not answer `--version` with 3.13.3. Quiet when there is nothing to do; a lock keeps two runs (two
# worktrees bootstrapping at once) from building twice; each binary is moved into place in one rename,
# so a reader never sees half a file. Needs Go >= 1.25 at /usr/local/go/bin or on PATH (GO overrides).
set -euo pipefail

version=3.13.3
module=github.com/prometheus/prometheus
module_version=v0.313.3
tools=(promtool prometheus)
cache=${PROMETHEUS3_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mssql-memory-exporter/prometheus-$version}
bin=$cache/bin

# `promtool, version 3.13.3 (branch: ...)`: the first line names the program and its release.
answers() { # program path
    local first
    first=$("$2" --version 2>/dev/null | head -n 1) || return 1
    [[ $first == "$1, version $version "* ]]
}

stale() {
    local tool
    for tool in "${tools[@]}"; do
        answers "$tool" "$bin/$tool" || echo "$tool"
    done
}

[ -z "$(stale)" ] && exit 0

mkdir -p "$bin"
exec 9>"$cache/.lock"
if ! flock -n 9; then
    echo "prometheus3: another run is building Prometheus $version; waiting for it" >&2
    flock 9
fi
todo=$(stale)  # what is still missing once the other run is done
[ -z "$todo" ] && exit 0

# Go found and recent enough, the module copied into "$work/src" (scripts/go-module.sh).
# shellcheck source=scripts/go-module.sh
source "$(dirname "${BASH_SOURCE[0]}")/go-module.sh"
# The module's go.mod asks for Go 1.25.
go_module_source prometheus3 "Prometheus $version" go1.25 "$module" "$module_version" "$cache"

# The version stamped as the release builds do, so `--version` says 3.13.3 whatever Go derives from the
# module's own version (v0.313.3).
ldflags="$GO_LINK_FLAGS -X github.com/prometheus/common/version.Version=$version"
# remove_all_sd: Prometheus' own build tag that leaves out every service discovery but file and HTTP
# (plugins/minimum.go). The tests and the shipped configs use static and file_sd_configs only; the
# Kubernetes, AWS, Azure, GCE... clients were most of the packages compiled, twice (both tools import them).
tags=remove_all_sd
for tool in $todo; do
    echo "prometheus3: building $tool $version into $bin (3-6 minutes on 2 cores; once per machine)" >&2
    (cd "$work/src" && "$go" build -tags "$tags" -ldflags "$ldflags" -o "$work/$tool" "./cmd/$tool")
    if ! answers "$tool" "$work/$tool"; then
        echo "prometheus3: the $tool just built does not answer version $version:" >&2
        "$work/$tool" --version >&2 || true
        exit 1
    fi
    mv -f "$work/$tool" "$bin/$tool"
done
