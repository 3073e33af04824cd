"""`python -m mssql_memory_exporter`: the same entry point as the console script."""

from mssql_memory_exporter.app.cli import main

raise SystemExit(main())
