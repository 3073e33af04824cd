#!/usr/bin/env bash
# Makes a fresh Debian 12 machine ready for one purpose, installing only what that purpose needs:
#
#   bootstrap.sh runtime   the exporter: FreeTDS ODBC driver, unixODBC, python3-venv, the venv (`make run
#                          CONFIG=...`, `make generate`)
#   bootstrap.sh standin   + the stand-in's Python packages (sqlfluff, python-gssapi built with gcc and
#                          libkrb5-dev, ...): the demo, `make bench`, `make soak`
#   bootstrap.sh test      + Prometheus, promtool, Alertmanager, amtool, systemd-analyze, an MIT KDC, Prometheus
#                          3.13.3 (scripts/prometheus3.sh) and Thanos 0.42.4 (scripts/thanos.sh): `make test`,
#                          `make lint`
#   bootstrap.sh --list MODE   print the Debian packages MODE needs, install nothing
#
# Idempotent and quiet when nothing is to do, so every make target can call it.
set -euo pipefail
cd "$(dirname "$0")/.."

list_only=0
if [ "${1:-}" = "--list" ]; then
    list_only=1
    shift
fi
mode=${1:-test}

# tdsodbc: FreeTDS ODBC driver; unixodbc: the driver manager pyodbc links to; python3-venv: the venv.
# libkrb5-3, libgssapi-krb5-2, libstdc++6, libltdl7: what Microsoft's ODBC Driver 18 links to (ldd of
# the `msodbc` extra's libmsodbcsql-18.6.so; its libodbcinst comes in the wheel).
runtime_packages=(tdsodbc unixodbc python3-venv libkrb5-3 libgssapi-krb5-2 libstdc++6 libltdl7)
# prometheus: promtool and the Prometheus the alerting tests run; prometheus-alertmanager: amtool and
# Alertmanager; systemd: systemd-analyze, which checks the shipped unit file (minimal images lack it);
# smartmontools: the real smartctl the drive-health tests run (its --scan and a read of a missing device).
# krb5-kdc, krb5-admin-server (kadmin.local), krb5-user (kinit, klist): the real MIT KDC the Windows-login
# tests run; faketime: libfaketime, which skews one process's clock for the clock-skew test; jsonnet: the
# C++ jsonnet that renders mixin/mixin.libsonnet as a jsonnet-bundler site would (tests/test_jsonnet_mixin.py).
test_packages=(prometheus prometheus-alertmanager systemd smartmontools
    krb5-kdc krb5-admin-server krb5-user faketime jsonnet)
# The test extras hold python-gssapi (the stand-in's Kerberos acceptor), which has no Linux wheel and
# builds against MIT Kerberos's headers.
build_packages=(libkrb5-dev gcc)
# The `msodbc` extra: Microsoft's ODBC Driver 18 from PyPI (mssql-python-odbc), under Microsoft's own
# licence (docs/drivers.md). MSODBC=skip leaves it out (FreeTDS only); the tests need it (both drivers),
# and the `entra` extra (azure-identity: Entra ID logins, and the stand-in's JWT checks through PyJWT).
msodbc=",msodbc"
[ "${MSODBC:-install}" = skip ] && [ "$mode" = runtime ] && msodbc=""
case "$mode" in
    runtime) packages=("${runtime_packages[@]}"); extras="[${msodbc#,}]" ;;
    standin) packages=("${runtime_packages[@]}" "${build_packages[@]}"); extras="[test${msodbc},entra]" ;;
    test) packages=("${runtime_packages[@]}" "${build_packages[@]}" "${test_packages[@]}"); extras="[test,msodbc,entra]" ;;
    *) echo "bootstrap.sh: unknown mode '$mode' (runtime, standin or test)" >&2; exit 2 ;;
esac
[ "$extras" = "[]" ] && extras=""
if [ "$list_only" -eq 1 ]; then
    echo "${packages[*]}"
    exit 0
fi

need=()
for pkg in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed" || need+=("$pkg")
done
if [ "${#need[@]}" -gt 0 ]; then
    echo "bootstrap: installing Debian packages: ${need[*]}" >&2
    sudo_cmd=""
    [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
    $sudo_cmd apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${need[@]}" >&2
    # Debian enables and starts the Prometheus and Alertmanager services on install. The tests run their
    # own instances; a system-wide Prometheus left running on :9090 is not what a developer asked for.
    # smartmontools brings smartd, a disk monitor the tests do not want polling this machine's drives;
    # the Kerberos tests start their own KDC, in a throwaway realm, not the system's.
    if [ -d /run/systemd/system ]; then
        for unit in prometheus prometheus-alertmanager smartmontools krb5-kdc krb5-admin-server; do
            if printf '%s\n' "${need[@]}" | grep -qx "$unit"; then
                $sudo_cmd systemctl disable --now "$unit" >/dev/null 2>&1 || true
            fi
        done
    fi
fi

# The FreeTDS package registers its driver in odbcinst.ini; make sure it is there under the name we use.
if ! odbcinst -q -d -n FreeTDS >/dev/null 2>&1; then
    lib=$(dpkg -L tdsodbc | grep -m1 'libtdsodbc.so$')
    printf '[FreeTDS]\nDescription=FreeTDS ODBC driver\nDriver=%s\n' "$lib" > /tmp/freetds-odbcinst.ini
    odbcinst -i -d -f /tmp/freetds-odbcinst.ini >&2
fi

# One stamp per set of Python extras and per dependency digest; the test extras include the runtime.
PY=${PYTHON:-python3}
digest=$(cat pyproject.toml requirements/constraints.txt | sha256sum | cut -c1-16)
full=.venv/.installed-test-$digest
stamp=$full
case "$extras" in *test*) ;; *) stamp=.venv/.installed-runtime${extras:+-msodbc}-$digest ;; esac
if [ ! -f "$stamp" ] && [ ! -f "$full" ]; then
    [ -x .venv/bin/python ] || "$PY" -m venv .venv
    .venv/bin/pip install -q --upgrade pip >&2
    .venv/bin/pip install -q -c requirements/constraints.txt -e ".${extras}" >&2
    find .venv -maxdepth 1 -name '.installed-*' ! -name "*-$digest" -delete
    touch "$stamp"
fi

if [ "$mode" = test ]; then
    # Prometheus 3.13.3 for the rule tests and Thanos 0.42.4 for the long-term-store tests, each built once
    # per machine into ~/.cache from its Go module. Side by side: their build tags differ (netgo reaches
    # every package above `net`), so they share no compiled package, and one's downloads and single-core
    # links overlap the other's compile. Both run to the end; either failing fails the bootstrap.
    bash scripts/thanos.sh &
    thanos=$!
    prometheus_status=0
    bash scripts/prometheus3.sh || prometheus_status=$?
    thanos_status=0
    wait "$thanos" || thanos_status=$?
    [ "$prometheus_status" -eq 0 ] && [ "$thanos_status" -eq 0 ]
fi
