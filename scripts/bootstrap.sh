#!/usr/bin/env bash
# Makes a fresh Debian 12 machine ready: system packages (only those missing) and the project venv.
# Idempotent and quiet when nothing is to do, so every make target can call it.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
# tdsodbc: FreeTDS ODBC driver (tests and fallback); unixodbc: driver manager pyodbc links to;
# prometheus: promtool for `promtool check metrics` and `promtool test rules`; prometheus-alertmanager:
# amtool and the Alertmanager that tests/test_alerting.py runs; python3-venv: the venv below; systemd:
# systemd-analyze, which checks the shipped unit file (minimal images leave it out).
for pkg in tdsodbc unixodbc python3-venv prometheus prometheus-alertmanager systemd; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed" || need+=("$pkg")
done
if [ "${#need[@]}" -gt 0 ]; then
    echo "bootstrap: installing Debian packages: ${need[*]}" >&2
    sudo_cmd=""
    [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
    $sudo_cmd apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${need[@]}" >&2
fi

# The FreeTDS package registers its driver in odbcinst.ini; make sure it is there under the name we use.
if ! odbcinst -q -d -n FreeTDS >/dev/null 2>&1; then
    lib=$(dpkg -L tdsodbc | grep -m1 'libtdsodbc.so$')
    printf '[FreeTDS]\nDescription=FreeTDS ODBC driver\nDriver=%s\n' "$lib" > /tmp/freetds-odbcinst.ini
    odbcinst -i -d -f /tmp/freetds-odbcinst.ini >&2
fi

PY=${PYTHON:-python3}
stamp=.venv/.installed-$(cat pyproject.toml requirements/constraints.txt | sha256sum | cut -c1-16)
if [ ! -f "$stamp" ]; then
    [ -x .venv/bin/python ] || "$PY" -m venv .venv
    .venv/bin/pip install -q --upgrade pip >&2
    .venv/bin/pip install -q -c requirements/constraints.txt -e ".[test]" >&2
    rm -f .venv/.installed-*
    touch "$stamp"
fi
