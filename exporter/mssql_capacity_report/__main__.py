import sys

from mssql_capacity_report.cli import main

sys.exit(main())
