"""Grafana dashboards generated from alerts/thresholds.yml: `python -m dashboards.generate`."""
