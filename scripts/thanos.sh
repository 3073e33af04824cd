#!/usr/bin/env bash
# Builds Thanos 0.42.4 (`thanos`: sidecar, query, store, compact, tools) for the long-term-store tests,
# which run the capacity report and the fleet dashboard's queries through Thanos Query over blocks the
# compactor has downsampled.
#
# Debian ships no Thanos, so the binary is built from the Go module (v0.42.4 builds with Go 1.26.8;
# v0.42.5 asks for 1.26.10). The module has replace directives, so `go install ...@v0.42.4` is refused and
# the build runs in a writable copy of the module's directory (scripts/go-module.sh, shared with
# scripts/prometheus3.sh). It goes to a cache outside the clone, because CI clones fresh and one build
# takes 10-20 minutes on 2 cores:
#     ${XDG_CACHE_HOME:-$HOME/.cache}/mssql-memory-exporter/thanos-0.42.4/bin/thanos
# (THANOS_CACHE overrides the directory above bin/). Built with the release's build tags (.promu.yml:
# netgo, slicelabels): without `slicelabels` the store gateway casts Prometheus' string-encoded labels to
# its own slice type and dies with a segmentation fault on its first block sync. bin/thanos.tags records
# the tags; the binary is rebuilt when it is missing, does not answer `--version` with 0.42.4, or was
# built with other tags. Quiet when there is nothing to do; a lock keeps two runs from building
# twice; the binary is moved into place in one rename, so a reader never sees half a file. Needs Go >= 1.26
# at /usr/local/go/bin or on PATH (GO overrides).
set -euo pipefail

version=0.42.4
module=github.com/thanos-io/thanos
module_version=v$version
minimum_go=go1.26
tags=netgo,slicelabels
cache=${THANOS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mssql-memory-exporter/thanos-$version}
bin=$cache/bin

# `thanos, version 0.42.4 (branch: ...)`: the first line names the program and its release.
answers() { # path
    local first
    first=$("$1" --version 2>&1 | head -n 1) || return 1
    [[ $first == "thanos, version $version "* ]]
}

built() {
    answers "$bin/thanos" && [ "$(cat "$bin/thanos.tags" 2>/dev/null)" = "$tags" ]
}

built && exit 0

mkdir -p "$bin"
exec 9>"$cache/.lock"
if ! flock -n 9; then
    echo "thanos: another run is building Thanos $version; waiting for it" >&2
    flock 9
fi
built && exit 0  # the other run built it

# Go found and recent enough, the module copied into "$work/src" (scripts/go-module.sh).
# shellcheck source=scripts/go-module.sh
source "$(dirname "${BASH_SOURCE[0]}")/go-module.sh"
go_module_source thanos "Thanos $version" "$minimum_go" "$module" "$module_version" "$cache"

# The version stamped as the release builds do, so `--version` says 0.42.4.
ldflags="$GO_LINK_FLAGS -X github.com/prometheus/common/version.Version=$version"
echo "thanos: building thanos $version into $bin (10-20 minutes on 2 cores; once per machine)" >&2
(cd "$work/src" && "$go" build -tags "$tags" -ldflags "$ldflags" -o "$work/thanos" ./cmd/thanos)
if ! answers "$work/thanos"; then
    echo "thanos: the thanos just built does not answer version $version:" >&2
    "$work/thanos" --version >&2 || true
    exit 1
fi
echo "$tags" > "$work/thanos.tags"
rm -f "$bin/thanos.tags"  # a binary without its tags file counts as stale until both are in place
mv -f "$work/thanos" "$bin/thanos"
mv -f "$work/thanos.tags" "$bin/thanos.tags"
