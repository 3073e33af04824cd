# The front door. Every target installs what it needs on a fresh Debian 12 machine (scripts/bootstrap.sh).
.PHONY: run test lint bench generate soak bootstrap clean

VENV := .venv
PY := $(VENV)/bin/python

bootstrap:
	@bash scripts/bootstrap.sh

## run: the exporter; CONFIG=path/to/config.yml for real servers, otherwise a demo against the stand-in
run:
	@bash scripts/run.sh

## test: everything CI runs (lint, unit, integration over TDS, promtool)
# REQUIRE_TEST_TOOLS=1: a missing promtool, amtool, Prometheus, Alertmanager or systemd-analyze fails its
# tests instead of skipping them (tests/tools.py); bootstrap installs them.
test: bootstrap lint
	@bash scripts/prometheus3.sh   # Prometheus 3.13.3 for the rule tests, built once into ~/.cache
	REQUIRE_TEST_TOOLS=1 bash scripts/test.sh

lint: bootstrap
	$(VENV)/bin/ruff check exporter tests bench alerts dashboards deploy compose

## bench: benchmarks that print tables (not timed tests)
bench: bootstrap
	PYTHONPATH=. $(PY) bench/bench_scrape.py

## generate: rules, dashboards and the Kubernetes PrometheusRule from the one thresholds spec
generate: bootstrap
	$(PY) -m alerts.generate
	$(PY) -m dashboards.generate
	$(PY) -m deploy.prometheusrule

## soak: 20,000 scrapes of the real exporter across stand-ins with injected faults; prints RSS, fds, connections
soak: bootstrap
	PYTHONPATH=. $(PY) -m tests.soak --scrapes 20000

clean:
	rm -rf $(VENV) build .pytest_cache .ruff_cache
