# The front door. Every target installs what it needs on a fresh Debian 12 machine (scripts/bootstrap.sh).
.PHONY: run test test-fast lint bench generate mixin soak bootstrap clean dashboards-look

VENV := .venv
PY := $(VENV)/bin/python

## bootstrap: everything any target needs (each target installs only its own part: scripts/bootstrap.sh)
bootstrap:
	@bash scripts/bootstrap.sh test

## run: the exporter; CONFIG=path/to/config.yml for real servers, otherwise a demo against the stand-in
run:
	@bash scripts/run.sh

## test: everything CI runs (lint, unit, integration over TDS, promtool)
# REQUIRE_TEST_TOOLS=1: a missing promtool, amtool, Prometheus, Alertmanager or systemd-analyze fails its
# tests instead of skipping them (tests/tools.py); bootstrap installs them.
test: lint
	REQUIRE_TEST_TOOLS=1 bash scripts/test.sh

## test-fast: the developer's loop, under a minute: lint and the unit tier (tests that start no process and
## open no socket; tests/tiers.py), without the property tests that ask for hundreds of examples. Needs no
## Prometheus: it installs only the stand-in's Python packages. `make test` runs everything.
test-fast:
	@bash scripts/bootstrap.sh standin
	$(VENV)/bin/ruff check exporter tests bench alerts dashboards deploy compose generators
	$(PY) -m pytest -q -m "unit and not slow" --durations=10

## lint: ruff on everything, mypy on the package and the generators (its settings: pyproject.toml)
lint:
	@bash scripts/bootstrap.sh test
	$(VENV)/bin/ruff check exporter tests bench alerts dashboards deploy compose generators
	$(VENV)/bin/mypy

## bench: benchmarks that print tables (not timed tests)
bench:
	@bash scripts/bootstrap.sh standin
	PYTHONPATH=. $(PY) bench/bench_scrape.py
	# (i) the capacity report over a year of 500 targets through Thanos Query (skipped without Thanos:
	# bash scripts/thanos.sh, which the test bootstrap runs)
	PYTHONPATH=. $(PY) -m bench.capacity_report --targets 500
	# (j) 2,000 targets over 1, 2 and 4 exporter processes as hashmod shards (about 15 minutes: the
	# stand-ins cannot answer 2,000 targets every 15 s on 2 cores, so they are probed every 90 s and the
	# cores per 1,000 targets at 15 s are computed from the CPU per probe; docs/performance.md)
	PYTHONPATH=. $(PY) -m bench.scale_out --targets 2000 --interval 90

## generate: rules, dashboards and the Kubernetes PrometheusRule from the one thresholds spec, the docs
## tables from the collectors' declarations, and the golden expositions from the stand-in's scenarios
## (which is why it needs the stand-in's packages). Each prints the files it rewrote: review `git diff`
## before committing, the goldens above all (a changed golden is a change of what Prometheus receives).
generate:
	@bash scripts/bootstrap.sh standin
	$(PY) -m alerts.generate
	$(PY) -m dashboards.generate
	$(PY) -m deploy.prometheusrule
	$(PY) -m generators.reference
	$(PY) -m generators.platform_table
	$(PY) -m generators.where_rules_run
	$(PY) -m generators.goldens
	$(PY) -m generators.jsonnet_mixin

## mixin: a site's copy of the rules, dashboards and PrometheusRules in OUT, from the spec with the site's
## partial OVERRIDES file merged over it (docs/mixin.md); a bad key exits 2 naming it, leaving OUT as it was
mixin:
	@test -n "$(OUT)" || { echo "make mixin: OUT=directory is required (OVERRIDES=site.yml optional)" >&2; exit 2; }
	@bash scripts/bootstrap.sh runtime
	$(PY) -m deploy.mixin --out "$(OUT)" $(if $(OVERRIDES),--overrides "$(OVERRIDES)")

## soak: 20,000 scrapes of the real exporter across stand-ins with injected faults and reloads; prints RSS, fds, connections
soak:
	@bash scripts/bootstrap.sh standin
	PYTHONPATH=. $(PY) -m tests.soak --scrapes 20000

## dashboards-look: render every dashboard in a real Grafana 12.4 against a live demo stack (a developer
## check, not CI: needs a Grafana 12.4 installation at GRAFANA_HOME); PNGs and a summary in build/dashboards-look
dashboards-look:
	bash scripts/dashboards-look.sh

clean:
	rm -rf $(VENV) build .pytest_cache .ruff_cache .mypy_cache
