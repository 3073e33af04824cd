"""mssql-capacity-report: SSD endurance per period of one memory size, read from Prometheus or Thanos Query.

One job per module: promql (HTTP client with timeouts, partial responses), periods (splitting at memory
changes), arithmetic (the endurance formula, decimal units), collect (the queries and rows), formats (CSV,
markdown), html (the page with its inline SVG), cli (arguments and exit status).
"""
