#!/usr/bin/env bash
# Health check of the SQL Server container: healthy once sa can log in and run a query.
set -euo pipefail
# shellcheck source=sqlcmd.sh
. /opt/bundle/mssql/sqlcmd.sh
SA_PASSWORD=$(read_secret mssql_sa_password)
MSSQL_HOST=localhost
sa_sqlcmd -l 5 -h -1 -Q "SET NOCOUNT ON; SELECT 1;" >/dev/null
