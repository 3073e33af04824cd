"""Generators of the docs' tables from the declarations: run by `make generate`, checked by the tests,
never installed with the exporter (the wheel holds only what a running exporter needs)."""
