# syntax=docker/dockerfile:1
# The exporter's container image. Build from the repository root (the context needs pyproject.toml, setup.py,
# README.md, requirements/ and exporter/; .dockerignore sends nothing else):
#
#   docker build -t mssql-memory-exporter .
#
# Drivers: Microsoft ODBC Driver 18 as Microsoft publishes it on PyPI (the `msodbc` extra,
# mssql-python-odbc: the production driver; `driver: auto` picks it), and Debian's FreeTDS (tdsodbc) as
# the fallback and for NTLM. The Microsoft driver is Microsoft's, under its own licence (the image's
# labels say so; docs/drivers.md). Build with `--build-arg MSODBCSQL18=skip` for a FreeTDS-only image.
# tests/test_compose.py lints this file (hadolint is not packaged for Debian 12).

# ---- build: the package and its pinned dependencies in a virtualenv, exactly as `make test` installs
# them (pip -c requirements/constraints.txt), without the test extras.
FROM python:3.11.15-slim-bookworm AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1
WORKDIR /src
# The git commit built, for mssql_exporter_build_info and --version (the context has no .git):
#   docker build --build-arg REVISION="$(git rev-parse HEAD)" -t mssql-memory-exporter .
ARG REVISION=unknown
# install: the msodbc extra (Microsoft ODBC Driver 18 from PyPI); skip: FreeTDS only.
ARG MSODBCSQL18=install
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
    case "$MSODBCSQL18" in \
      install) extras="kerberos,msodbc,entra" ;; \
      skip) extras="kerberos" ;; \
      *) echo "MSODBCSQL18 must be install or skip" >&2; exit 1 ;; \
    esac; \
    /opt/mssql-memory-exporter/bin/pip install -c requirements/constraints.txt ".[$extras]"

# ---- runtime
FROM python:3.11.15-slim-bookworm

ARG MSODBCSQL18=install

# unixODBC (pyodbc links to it) and FreeTDS, registered as `FreeTDS` as scripts/bootstrap.sh does; the
# libraries ODBC Driver 18 links to (MIT Kerberos, GSSAPI, libstdc++, libltdl: its libodbcinst comes in
# the wheel). The driver itself is not registered with unixODBC: the exporter names it by its path. Last,
# the unprivileged user the exporter runs as.

RUN set -eux; \
    apt-get update; \
    apt-get install -y --no-install-recommends unixodbc tdsodbc libkrb5-3 libgssapi-krb5-2 libstdc++6 libltdl7; \
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
      mssql-memory-exporter --version | grep -q "ODBC Driver 18 for SQL Server 18" \
        || { echo "ODBC Driver 18 (msodbc extra) is missing" >&2; exit 1; }; \
      ! ldd "$(python -c 'from mssql_memory_exporter.connection.msodbc import packaged_driver as p; print(p().path)')" \
        | grep "not found"; \
    fi

LABEL org.opencontainers.image.title="mssql-memory-exporter" \
      org.opencontainers.image.description="Prometheus exporter for SQL Server memory pressure and SSD endurance" \
      org.opencontainers.image.licenses="Apache-2.0 AND LicenseRef-Microsoft-ODBC-Driver-18-EULA" \
      io.github.mssql-memory-exporter.third-party-licence="Microsoft ODBC Driver 18 for SQL Server (PyPI mssql-python-odbc) is Microsoft's, under the Microsoft ODBC Driver 18 licence terms shipped in its package (site-packages/mssql_python_odbc); build with MSODBCSQL18=skip to leave it out"

USER 65532:65532
EXPOSE 9399
# --healthcheck finds the listen address in the running exporter's own flags (PID 1), so a changed
# --web.listen-address needs no change here; any answer below 500 counts (401 with basic auth, and the
# 400 a TLS port gives plain HTTP, both prove a live listener).
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
  CMD ["mssql-memory-exporter", "--healthcheck"]
ENTRYPOINT ["mssql-memory-exporter"]
CMD ["--config.file=/etc/mssql-exporter/mssql-exporter.yml", "--web.listen-address=:9399"]
