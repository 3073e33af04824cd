"""Lint helpers shared by the test modules: walking dashboards and rule files."""
