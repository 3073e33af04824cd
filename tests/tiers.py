"""Every test's tier, assigned at collection (conftest.py) so no test file carries marks of its own.

- unit: in-process Python only; starts no process, opens no socket (tests/tier_guard.py checks that).
- integration: real parts in one test: the stand-in over TDS through FreeTDS, HTTP servers on real
  sockets, the exporter or a script as a subprocess, a fake smartctl.
- promtool: runs Prometheus' own tools (promtool, amtool, systemd-analyze) or the Prometheus build.
- e2e: a stack of real programs (Prometheus, Alertmanager, the exporter, stand-ins) over time.
- slow (besides a tier): every e2e and promtool test, property tests asking for more than hypothesis'
  default 100 examples, and SLOW_TESTS; left out of `make test-fast`.

A module's tier is its default; a test is raised above it by what it uses: a stand-in, socket or process
fixture makes it integration, a promtool/Prometheus release parameter or `tools.needs` makes it promtool.
A collector's own module, `test_collector_<name>.py` for a collector in the registry (COLLECTORS), is of
the unit tier by convention, so adding a collector does not touch this file: its tests that scrape the
stand-in raise themselves by their fixtures, and tier_guard fails any other that opens a socket or starts
a process. Every other new test module must be named here: tests/test_tiers.py fails until it is.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import pytest
from mssql_memory_exporter.collectors import COLLECTORS

from tests.tools import Versioned

TIERS = ("unit", "integration", "promtool", "e2e")  # in rising order: a test takes the highest that applies
SLOW = "slow"

MODULE_TIERS: dict[str, str] = {
    # unit: parsers, config, generators, rules and dashboards read as data
    "test_collector_contract": "unit",
    "test_config": "unit",
    "test_custom_collectors": "unit",  # load-time refusals; scrapes answered in process
    "test_shipped_collectors": "unit",  # the shipped collector files on scenarios, in process
    "test_dashboard_verdicts": "unit",
    "test_dashboards": "unit",
    "test_dashboards_no_data": "unit",  # every panel says why it is empty, where 12.4 shows it
    "test_drive_parse": "unit",
    "test_declarations": "unit",  # the docs tables; its probes of each declared collector raise themselves
    "test_standin_counters": "unit",  # the stand-in's counter rows, read in-process
    "test_drive_pools": "unit",
    "test_endurance": "unit",
    "test_endurance_config": "unit",
    "test_exposition": "unit",
    "test_fuzz": "unit",
    "test_host": "unit",
    "test_kubernetes_drive_health": "unit",
    "test_packaging": "unit",
    "test_permissions_doc": "unit",  # docs/permissions.md's tables from the collectors' SQL
    "test_secret_check": "unit",
    "test_soak": "unit",
    "test_spec": "unit",
    "test_sqlcheck": "unit",
    "test_tools": "unit",
    "test_workers": "unit",
    "test_kerberos_deploy": "unit",
    "test_secret_file": "unit",
    # integration: the stand-in over TDS, real sockets and subprocesses
    "test_bench": "integration",
    "test_check_target": "integration",  # --check-target against stand-in scenarios over TDS
    "test_bootstrap": "integration",
    "test_cli": "integration",
    "test_prepared_batch": "integration",  # prepared batches against stand-ins over TDS
    "test_odbc18": "integration",  # Microsoft's ODBC Driver 18 (msodbc extra) against stand-ins
    "test_entra": "integration",  # Entra ID tokens from a loopback endpoint through Driver 18 to stand-ins
    "test_strict": "integration",  # TDS 8.0 (strict) and TLS failures through Driver 18 against stand-ins
    "test_rule_groups": "unit",  # the rule split read as data
    "test_platforms": "integration",  # scrapes of stand-ins playing each platform
    "test_platform_matrix": "unit",  # docs/platforms.md's generated table; its scrapes raise themselves
    "test_kerberos_faults": "integration",  # the ticket keeper against a real MIT KDC
    "test_lifecycle": "integration",  # the CLI in a subprocess under signals and reloads
    "test_process_cli": "integration",  # the CLI in a subprocess: --version, --config.check, healthcheck
    "test_scraper_reload": "integration",  # reloads against stand-ins
    "test_collectors": "integration",
    "test_compose": "integration",  # check-jsonschema, git and sh as subprocesses
    "test_drive_failures": "integration",
    "test_concurrent_probes": "integration",  # these four: faults through the driver (failure_checks.py)
    "test_failing_connections": "integration",
    "test_failing_sections": "integration",  # the record-derived failure matrix
    "test_slow_and_broken_answers": "integration",
    "test_files": "integration",
    "test_freetds_tls": "integration",
    "test_login_backoff": "integration",
    "test_login_passwords": "integration",
    "test_memory_metrics": "integration",
    "test_named_instance": "integration",
    "test_prometheus3_script": "integration",
    "test_realserver": "integration",
    "test_repeat_log": "integration",
    "test_scenario_files": "integration",
    "test_scenarios": "integration",
    "test_standin_schedule": "integration",
    "test_standin_strict": "integration",
    "test_startup": "integration",
    "test_systemd_drive_health": "promtool",
    "test_tds_protocol": "integration",
    "test_tds_tls": "integration",
    "test_tempdb": "integration",
    "test_tiers": "unit",
    "test_web": "integration",
    "test_web_hardening": "integration",
    "test_webconfig": "integration",
    "test_webconfig_http": "integration",
    "test_collector_selection": "integration",
    "test_mixin": "integration",  # make mixin and its checks as subprocesses
    "test_jsonnet_mixin": "integration",  # mixin/mixin.libsonnet through a real jsonnet
    "test_web_bursts": "integration",
    "test_web_protocol": "integration",
    "test_web_framing": "integration",
    "test_web_auth_flood": "integration",
    "test_web_limits": "integration",
    "test_web_stop": "integration",
    "test_log_quoting": "unit",
    "test_web_flags": "integration",
    "test_windows_auth": "integration",  # a KDC, Kerberos logins to the stand-in
    "test_capacity_report": "integration",  # the console script over real HTTP; its Prometheus runs below
    "test_scaling": "integration",  # scripts/thanos.sh against a stand-in go
    # promtool: rule unit tests and config checks by Prometheus' tools
    "test_alerting": "promtool",
    "test_coverage_tiers": "promtool",
    "test_dashboard_failover_marks": "promtool",  # the failover marks through Grafana's annotation filter
    "test_rules_generated": "promtool",
    "test_fleet_rules": "promtool",  # the fleet group under promtool and `thanos tools rules-check`
    "test_rules_labelled": "promtool",
    "test_smartctl_exporter_rules": "promtool",
    # e2e: stacks of real programs over time
    "test_alert_e2e": "e2e",
    "test_alertmanager": "e2e",
    "test_dashboards_e2e": "e2e",
    "test_demo": "e2e",
    "test_drive_e2e": "e2e",
    "test_http_e2e": "e2e",
    "test_thanos_e2e": "e2e",
    "test_thanos_ruler_e2e": "e2e",  # Thanos Ruler evaluating the fleet group over two shards
}

# Single tests whose module is of a lower tier (found by tests/tier_guard.py).
TEST_TIERS: dict[str, str] = {
    "test_endurance_config.py::test_bad_known_written_exits_2_naming_the_field": "integration",
    "test_capacity_report.py::test_backfilled_year_in_prometheus": "e2e",
    "test_capacity_report.py::test_drives_read_without_the_recording_rule_say_so": "e2e",
    "test_capacity_report.py::test_five_years_in_prometheus": "e2e",
    "test_capacity_report.py::test_memory_shown_in_sql_servers_mb_and_unlimited_named": "unit",
    "test_capacity_report.py::test_end_takes_unix_seconds_or_an_iso_date": "unit",
    "test_capacity_report.py::test_partial_response_warning_read_as_which_store_and_why": "unit",
    "test_capacity_report.py::test_title_says_where_the_data_starts": "unit",
    "test_capacity_report.py::test_default_memory_share_is_the_rules_share": "unit",
    "test_capacity_report.py::test_csv_header_starts_with_the_review_columns": "unit",
    "test_capacity_report.py::test_micron_row_in_decimal_units": "unit",
    "test_capacity_report.py::test_periods_cut_at_memory_changes_and_data_edges": "unit",
    "test_fuzz.py::test_fuzzed_expositions_pass_promtool": "promtool",
    "test_packaging.py::test_kubernetes_probes_use_ready_for_readiness_and_healthy_for_liveness": (
        "integration"  # probes a real exporter HTTP server
    ),
    "test_secret_check.py::test_a_leak_in_a_passing_test_is_caught_through_every_channel": "integration",
    "test_secret_file.py::test_a_socket_is_refused": "integration",  # binds a Unix socket to refuse it
    "test_soak.py::test_short_soak_with_faults": "integration",
    "test_spec.py::test_loading_a_bad_spec_stops_with_the_key_named": "integration",
    "test_tiers.py::test_the_guard_fails_a_unit_test_that_opens_a_socket_or_starts_a_process": "integration",
    "test_tools.py::test_a_version_is_the_binary_that_reports_it": "integration",
    "test_tools.py::test_a_wrong_binary_cannot_pass_as_the_version": "integration",
}

# Fixtures that start a stand-in, a server on a socket or a process (conftest.py and the test modules).
INTEGRATION_FIXTURES = frozenset(
    {
        "standin",
        "standin_parses_the_batch",
        "scraper_for",
        "server",
        "tls_server",
        "tls_standin",
        "running",
        "serve",
        "exporter",
        "launch",
        "backend",
        "fake",
        "http_probe",
        "narrowed_batches_parsed",
        "kdc",
        "windows_standin",
        "stack",
    }
)

# Tests that take many seconds each even on a quiet machine, beyond every e2e and promtool test.
# Measured with `--durations` (docs/testing.md); tests/test_tiers.py checks each name still exists.
SLOW_TESTS = frozenset(
    {
        "test_soak.py::test_short_soak_with_faults",
        "test_jsonnet_mixin.py::test_libsonnet_is_current",  # a few hundred renders of the spec
        "test_web_auth_flood.py::test_the_right_password_is_answered_200_while_40_clients_guess",
    }
)


UNCLASSIFIED_DEFAULT = "integration"  # until its module is named in MODULE_TIERS; test_tiers.py fails

COLLECTOR_MODULE_PREFIX = "test_collector_"
COLLECTOR_MODULE_TIER = "unit"  # what a collector's tests do without the stand-in: parse, label, refuse


def collector_modules() -> frozenset[str]:
    """The module each registered collector's facts live in (whether or not it exists yet)."""
    return frozenset(COLLECTOR_MODULE_PREFIX + record.name for record in COLLECTORS)


def module_tier(module: str) -> str | None:
    """A module's default tier: named in MODULE_TIERS, or a registered collector's own; None if neither."""
    if module in MODULE_TIERS:
        return MODULE_TIERS[module]
    if module in collector_modules():
        return COLLECTOR_MODULE_TIER
    return None

# What `assign` gave every collected test, before `-m` deselected any (tests/test_tiers.py reads it).
ASSIGNED: dict[str, Assignment] = {}


@dataclass(frozen=True)
class Assignment:
    module: str
    tiers: tuple[str, ...]
    slow: bool
    fixtures: frozenset[str]
    prometheus_release: bool


def uses_a_prometheus_release(item: pytest.Item) -> bool:
    params = getattr(getattr(item, "callspec", None), "params", {})
    if any(isinstance(v, Versioned) for v in params.values()):
        return True
    return bool(getattr(getattr(item, "function", None), "needs_tools", False))


def function_id(item: pytest.Item) -> str:
    """`test_x.py::test_name`, parameters left out."""
    return f"{item.path.name}::{getattr(item, 'originalname', item.name)}"


def tier_of(item: pytest.Item) -> str:
    tier = TEST_TIERS.get(function_id(item)) or module_tier(item.path.stem) or UNCLASSIFIED_DEFAULT
    if INTEGRATION_FIXTURES & set(getattr(item, "fixturenames", ())):
        tier = _higher(tier, "integration")
    if uses_a_prometheus_release(item):
        tier = _higher(tier, "promtool")
    return tier


# Property tests that ask hypothesis for more examples than its default of 100 run for seconds each.
PROPERTY_EXAMPLES_SLOW_ABOVE = 100


def is_slow(item: pytest.Item, tier: str) -> bool:
    if tier in ("e2e", "promtool"):
        return True
    if item.path.name in SLOW_TESTS or function_id(item) in SLOW_TESTS:
        return True
    return property_examples(item) > PROPERTY_EXAMPLES_SLOW_ABOVE


def property_examples(item: pytest.Item) -> int:
    """How many examples a hypothesis test asks for (0 for other tests)."""
    function = getattr(item, "function", None)
    if not getattr(function, "is_hypothesis_test", False):
        return 0
    settings = getattr(function, "_hypothesis_internal_use_settings", None)
    return settings.max_examples if settings is not None else PROPERTY_EXAMPLES_SLOW_ABOVE


def _higher(a: str, b: str) -> str:
    return max(a, b, key=TIERS.index)


def assign(items: Iterable[pytest.Item]) -> None:
    """Mark every item with its tier, and slow where it is."""
    ASSIGNED.clear()
    for item in items:
        tier = tier_of(item)
        item.add_marker(tier)
        slow = is_slow(item, tier)
        if slow:
            item.add_marker(SLOW)
        ASSIGNED[item.nodeid] = Assignment(
            module=item.path.stem,
            tiers=tuple(m.name for m in item.iter_markers() if m.name in TIERS),
            slow=slow,
            fixtures=frozenset(getattr(item, "fixturenames", ())),
            prometheus_release=uses_a_prometheus_release(item),
        )
