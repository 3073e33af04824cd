# syntax=docker/dockerfile:1
# The exporter's container image. Build from the repository root (the context needs pyproject.toml, setup.py,
# README.md, requirements/ and exporter/; .dockerignore sends nothing else):
#
#   docker build -t mssql-memory-exporter .
#
# Drivers: Microsoft ODBC Driver 18 from Microsoft's Debian 12 repository (the production driver; `driver:
# auto` picks it), and Debian's FreeTDS (tdsodbc) as the fallback the tests use. Build with
# `--build-arg MSODBCSQL18=skip` for a FreeTDS-only image (no Microsoft EULA, or a platform Microsoft
# does not package the driver for). tests/test_compose.py lints this file (hadolint is not packaged for
# Debian 12).

# ---- build: the package and its pinned dependencies in a virtualenv, exactly as `make test` installs
# them (pip -c requirements/constraints.txt), without the test extras.
FROM python:3.11.15-slim-bookworm AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1
WORKDIR /src
# The git commit built, for mssql_exporter_build_info and --version (the context has no .git):
#   docker build --build-arg REVISION="$(git rev-parse HEAD)" -t mssql-memory-exporter .
ARG REVISION=unknown
COPY pyproject.toml setup.py README.md ./
COPY requirements/constraints.txt requirements/constraints.txt
COPY exporter/ exporter/
# The `kerberos` extra (python-gssapi, for Kerberos logins from a keytab) has no Linux wheel: it builds
# here against MIT Kerberos's headers; the runtime stage has the library itself (tdsodbc depends on it).
RUN set -eux; \
    printf '%s\n' "$REVISION" > exporter/mssql_memory_exporter/REVISION; \
    apt-get update; \
    apt-get install -y --no-install-recommends gcc libkrb5-dev; \
    rm -rf /var/lib/apt/lists/*; \
    python -m venv /opt/mssql-memory-exporter; \
    /opt/mssql-memory-exporter/bin/pip install -c requirements/constraints.txt ".[kerberos]"

# ---- runtime
FROM python:3.11.15-slim-bookworm

# install: Microsoft ODBC Driver 18 and FreeTDS; skip: FreeTDS only.
ARG MSODBCSQL18=install
# Primary key of https://packages.microsoft.com/keys/microsoft.asc, which signs the Debian 12 repository
# (Microsoft's repositories created after April 2025, Debian 13's among them, use microsoft-2025.asc).
ARG MICROSOFT_REPO_KEY_FINGERPRINT=BC528686B50D79E339D3721CEB3E94ADBE1229CF

# unixODBC (pyodbc links to it) and FreeTDS, registered as `FreeTDS` as scripts/bootstrap.sh does; then
# Microsoft's repository with its key checked by fingerprint and pinned with signed-by (not trusted for
# any other repository), ODBC Driver 18, and the tools needed only for that removed again. Last, the
# unprivileged user the exporter runs as.

RUN set -eux; \
    apt-get update; \
    apt-get install -y --no-install-recommends unixodbc tdsodbc; \
    case "$MSODBCSQL18" in \
      install) \
        apt-get install -y --no-install-recommends ca-certificates curl gnupg; \
        curl -fsSL https://packages.microsoft.com/keys/microsoft.asc -o /tmp/microsoft.asc; \
        fingerprint=$(gpg --show-keys --with-colons /tmp/microsoft.asc | awk -F: '$1 == "fpr" { print $10; exit }'); \
        test "$fingerprint" = "$MICROSOFT_REPO_KEY_FINGERPRINT"; \
        gpg --dearmor -o /usr/share/keyrings/microsoft-prod.gpg /tmp/microsoft.asc; \
        echo "deb [arch=$(dpkg --print-architecture) signed-by=/usr/share/keyrings/microsoft-prod.gpg] https://packages.microsoft.com/debian/12/prod bookworm main" \
          > /etc/apt/sources.list.d/microsoft-prod.list; \
        apt-get update; \
        ACCEPT_EULA=Y apt-get install -y --no-install-recommends msodbcsql18; \
        apt-get purge -y --auto-remove curl gnupg; \
        rm -f /tmp/microsoft.asc ;; \
      skip) ;; \
      *) echo "MSODBCSQL18 must be install or skip" >&2; exit 1 ;; \
    esac; \
    if ! grep -q '^\[FreeTDS\]' /etc/odbcinst.ini 2>/dev/null; then \
        printf '[FreeTDS]\nDescription=FreeTDS ODBC driver\nDriver=%s\n' \
          "$(dpkg -L tdsodbc | grep -m1 'libtdsodbc\.so$')" >> /etc/odbcinst.ini; \
    fi; \
    rm -rf /var/lib/apt/lists/*; \
    groupadd --system --gid 65532 exporter; \
    useradd --system --uid 65532 --gid exporter --home-dir /nonexistent --no-create-home \
      --shell /usr/sbin/nologin exporter

COPY --from=build /opt/mssql-memory-exporter /opt/mssql-memory-exporter
ENV PATH=/opt/mssql-memory-exporter/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# Smoke test: the package imports (pyodbc against this stage's unixODBC) and unixODBC knows the drivers
# by the names the exporter looks for.
RUN set -eu; \
    mssql-memory-exporter --version; \
    python -c "import gssapi"; \
    drivers=$(python -c "import pyodbc; print('|'.join(pyodbc.drivers()))"); \
    echo "ODBC drivers: $drivers"; \
    case "$drivers" in *FreeTDS*) ;; *) echo "FreeTDS is not registered" >&2; exit 1 ;; esac; \
    if [ "$MSODBCSQL18" = install ]; then \
      case "$drivers" in *"ODBC Driver 18 for SQL Server"*) ;; *) echo "ODBC Driver 18 is missing" >&2; exit 1 ;; esac; \
    fi

LABEL org.opencontainers.image.title="mssql-memory-exporter" \
      org.opencontainers.image.description="Prometheus exporter for SQL Server memory pressure and SSD endurance" \
      org.opencontainers.image.licenses="Apache-2.0"

USER 65532:65532
EXPOSE 9399
# --healthcheck finds the listen address in the running exporter's own flags (PID 1), so a changed
# --web.listen-address needs no change here; any answer below 500 counts (401 with basic auth, and the
# 400 a TLS port gives plain HTTP, both prove a live listener).
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
  CMD ["mssql-memory-exporter", "--healthcheck"]
ENTRYPOINT ["mssql-memory-exporter"]
CMD ["--config.file=/etc/mssql-exporter/mssql-exporter.yml", "--web.listen-address=:9399"]
