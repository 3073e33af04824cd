#!/usr/bin/env bash
# Builds Prometheus 3.13.3's `promtool` and `prometheus` (the release compose pins) for the tests, which run
# every rule test and the end-to-end alerting test under it as well as under Debian's 2.42.
#
# Debian 12 ships only 2.42, so the binaries are built from the Go module (v0.313.3 is Prometheus 3.13.3;
# `go install ...@v0.313.3` is refused because the module has replace directives, so the build runs in a
# writable copy of the module's directory). They go to a cache outside the clone, because CI clones fresh
# and one build takes 6-12 minutes on 2 cores:
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

export PATH=/usr/local/go/bin:$PATH GOTOOLCHAIN=local GOWORK=off GOFLAGS=-mod=mod
go=${GO:-go}
if ! command -v "$go" >/dev/null; then
    echo "prometheus3: Go is not installed (looked in /usr/local/go/bin and PATH); it builds Prometheus $version" >&2
    exit 1
fi
# The module's go.mod asks for Go 1.25; Debian 12's golang is 1.19. Say so before a long download.
go_version=$("$go" env GOVERSION)
if ! printf '%s\n' go1.25 "$go_version" | sort -C -V; then
    echo "prometheus3: $go_version is too old to build Prometheus $version (needs go1.25 or later)" >&2
    exit 1
fi

work=$(mktemp -d "$cache/build.XXXXXX")  # next to bin/, so the final mv is a rename on one filesystem
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT

# `go mod download` must run outside any module, or it would resolve against that module's go.mod.
src=$(cd "$work" && "$go" mod download -json "$module@$module_version" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
if [ -z "$src" ] || [ ! -d "$src" ]; then
    echo "prometheus3: go mod download $module@$module_version gave no module directory" >&2
    exit 1
fi
# The module cache is read-only, and the build writes go.sum entries (-mod=mod): build in a copy.
cp -r "$src" "$work/src"
chmod -R u+w "$work/src"

# The version stamped as the release builds do, so `--version` says 3.13.3 whatever Go derives from the
# module's own version (v0.313.3).
ldflags="-X github.com/prometheus/common/version.Version=$version"
for tool in $todo; do
    echo "prometheus3: building $tool $version into $bin (6-12 minutes on 2 cores; once per machine)" >&2
    (cd "$work/src" && "$go" build -ldflags "$ldflags" -o "$work/$tool" "./cmd/$tool")
    if ! answers "$tool" "$work/$tool"; then
        echo "prometheus3: the $tool just built does not answer version $version:" >&2
        "$work/$tool" --version >&2 || true
        exit 1
    fi
    mv -f "$work/$tool" "$bin/$tool"
done
