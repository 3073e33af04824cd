"""Prometheus exporter for SQL Server memory pressure."""

# The one place the version is written: pyproject.toml reads it (dynamic), and the image tags in
# deploy/kubernetes and the docs follow it (tests/test_packaging.py checks them).
__version__ = "0.2.0"
