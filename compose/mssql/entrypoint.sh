#!/usr/bin/env bash
# Entry point of the SQL Server container. sqlservr takes the sa password only from the environment
# variable MSSQL_SA_PASSWORD; this wrapper sets it from the Compose secret inside the container's own
# process, so it is neither in the container's configuration (`docker inspect`) nor on a command line
# (`ps`). SQL Server uses it only when it creates master, on the first start with an empty volume.
set -euo pipefail
# shellcheck source=sqlcmd.sh
. /opt/bundle/mssql/sqlcmd.sh
MSSQL_SA_PASSWORD=$(read_secret mssql_sa_password)
export MSSQL_SA_PASSWORD
# The image's own entry point checks the ownership of /var/opt/mssql before starting sqlservr.
if [ -x /opt/mssql/bin/permissions_check.sh ]; then
    exec /opt/mssql/bin/permissions_check.sh /opt/mssql/bin/sqlservr
fi
exec /opt/mssql/bin/sqlservr
