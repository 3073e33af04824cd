# Sourced by the scripts that build a Go program from its module for the tests (scripts/prometheus3.sh,
# scripts/thanos.sh); not run on its own. It holds what they share: find Go and check its release before a
# long download, then fetch the module and copy it into a writable build directory that is removed
# however the script ends.
#
# Both modules have replace directives, so `go install module@version` is refused and the build must run
# inside the module's own directory; Go's module cache is read-only and the build writes go.sum entries
# (-mod=mod), hence the copy.
#
#     go_module_source PREFIX WHAT MINIMUM_GO MODULE VERSION CACHE
#
# PREFIX starts every message ("thanos: ..."), WHAT names the program in them ("Thanos 0.42.4"). On return
# GO_LINK_FLAGS holds the linker flags every build adds, `go` names the Go command (GO overrides;
# /usr/local/go/bin comes first on PATH), `work` is a new directory under CACHE (so a final `mv` into
# CACHE/bin is a rename on one filesystem; an EXIT trap removes it) and `work/src` a writable copy of the module. Any failure exits the calling script with status 1,
# saying why, before anything is downloaded when Go is missing or too old.

go_module_source() {
    local prefix=$1 what=$2 minimum_go=$3 module=$4 module_version=$5 cache=$6
    # -trimpath: no build paths in the binaries (the build directory is a temporary copy). The caller
    # adds `-s -w` to its ldflags (GO_LINK_FLAGS): no symbol table or DWARF, which only a debugger reads
    # and which the linker would otherwise write and compress into each 110-130 MB binary.
    export PATH=/usr/local/go/bin:$PATH GOTOOLCHAIN=local GOWORK=off GOFLAGS="-mod=mod -trimpath"
    GO_LINK_FLAGS="-s -w"
    go=${GO:-go}
    if ! command -v "$go" >/dev/null; then
        echo "$prefix: Go is not installed (looked in /usr/local/go/bin and PATH); it builds $what" >&2
        exit 1
    fi
    # Debian 12's golang is 1.19: say so before a long download that would fail on the module's go.mod.
    local go_version
    go_version=$("$go" env GOVERSION)
    if ! printf '%s\n' "$minimum_go" "$go_version" | sort -C -V; then
        echo "$prefix: $go_version is too old to build $what (needs $minimum_go or later)" >&2
        exit 1
    fi

    work=$(mktemp -d "$cache/build.XXXXXX")
    # shellcheck disable=SC2064  # expanded now: `work` is the caller's global and must not be re-read later
    trap "chmod -R u+w '$work' 2>/dev/null; rm -rf '$work'" EXIT

    # `go mod download` must run outside any module, or it would resolve against that module's go.mod.
    local src
    src=$(cd "$work" && "$go" mod download -json "$module@$module_version" |
        sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
    if [ -z "$src" ] || [ ! -d "$src" ]; then
        echo "$prefix: go mod download $module@$module_version gave no module directory" >&2
        exit 1
    fi
    cp -r "$src" "$work/src"
    chmod -R u+w "$work/src"
}
