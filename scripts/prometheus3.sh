#!/usr/bin/env bash
# Builds Prometheus 3.13.3 (promtool and the server) for the rule tests, once per machine, into a cache
# outside the clone: compose pins 3.13.3, Debian 12 ships 2.42, and rule results differ between them
# (3.x range windows are left-open). CI clones fresh, so the clone is the wrong place for it.
#
# The Go module is github.com/prometheus/prometheus v0.313.3 (Prometheus 3.x tags its library as
# v0.3XX.Y). `go install ...@v0.313.3` is refused because its go.mod has replace directives, so the module
# is copied and built in place. The version is stamped in with the same -X flag the release builds use,
# so `--version` tells a real 3.13.3 from anything else left at the path.
# Quiet and instant when both binaries are there and answer 3.13.3.
set -euo pipefail
VERSION=3.13.3
MODULE=github.com/prometheus/prometheus@v0.313.3
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/mssql-memory-exporter/prometheus-$VERSION
BIN=$CACHE/bin
export PATH=/usr/local/go/bin:$PATH GOTOOLCHAIN=local GOWORK=off GOFLAGS=-mod=mod

answers() { # binary -> 0 when it prints our version
    [ -x "$1" ] && "$1" --version 2>&1 | head -1 | grep -q "version $VERSION "
}
if answers "$BIN/promtool" && answers "$BIN/prometheus"; then
    exit 0
fi
command -v go >/dev/null || { echo "prometheus3.sh: Go is needed to build Prometheus $VERSION (not found)" >&2; exit 1; }
mkdir -p "$CACHE"
exec 9>"$CACHE/.lock"
flock 9   # a second run waits, then finds the binaries built
if answers "$BIN/promtool" && answers "$BIN/prometheus"; then
    exit 0
fi
echo "prometheus3.sh: building Prometheus $VERSION into $BIN (a few minutes, once per machine)" >&2
src=$(go mod download -json "$MODULE" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -d "$src" ] || { echo "prometheus3.sh: go mod download $MODULE gave no directory" >&2; exit 1; }
work=$(mktemp -d "$CACHE/build.XXXXXX")
trap 'rm -rf "$work"' EXIT
cp -r "$src/." "$work/src"
chmod -R u+w "$work/src"
flags="-X github.com/prometheus/common/version.Version=$VERSION"
for cmd in promtool prometheus; do
    (cd "$work/src" && go build -ldflags "$flags" -o "$work/$cmd" "./cmd/$cmd") >&2
    answers "$work/$cmd" || { echo "prometheus3.sh: the $cmd built does not report $VERSION" >&2; exit 1; }
done
mkdir -p "$BIN"
for cmd in promtool prometheus; do
    mv -f "$work/$cmd" "$BIN/$cmd"   # same filesystem: an atomic rename, never a half-written binary
done
echo "prometheus3.sh: built $BIN/promtool and $BIN/prometheus" >&2
