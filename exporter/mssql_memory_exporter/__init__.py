"""Prometheus exporter for SQL Server memory pressure."""

__version__ = "0.1.0"
