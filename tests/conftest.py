"""Fixtures: stand-in SQL Servers playing scenarios, and exporter configs pointing at them."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import settings
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "exporter"))

from mssql_memory_exporter.app.logsetup import LogfmtFormatter  # noqa: E402
from mssql_memory_exporter.config import ExporterConfig, parse_config  # noqa: E402
from mssql_memory_exporter.scrape.scraper import Scraper  # noqa: E402

from tests import tier_guard, tiers  # noqa: E402
from tests.background import BACKGROUND, JobOf  # noqa: E402
from tests.secret_check import CAPTURED_LOG, EVIDENCE_ENV  # noqa: E402
from tests.standin.handler import ScenarioHandler  # noqa: E402
from tests.standin.parse_ahead import batch_variants  # noqa: E402
from tests.standin.scenario import Clock, Instance, Scenario  # noqa: E402
from tests.standin.server import StandInServer  # noqa: E402
from tests.standin.sqlcheck import batch_info, parse_cache_info  # noqa: E402
from tests.timeouts import PATIENT_SECONDS  # noqa: E402

# Deliberately distinctive, so a test can grep every output of the run for it.
TEST_PASSWORD = "Stand1n-S3cret-q7Zx"
PASSWORD_ENV = "MSSQL_STANDIN_TEST_PASSWORD"

# Libraries that narrate at DEBUG and never see a secret: the stand-in's SQL parser alone would write
# megabytes per test and slow every scrape down.
# pyspnego (the stand-in's NTLM acceptor) logs every NTLM message, answers derived from the password
# included.
QUIET_LOGGERS = ("sqlfluff", "asyncio", "urllib3", "filelock", "hypothesis", "docker", "parso", "spnego")


# --- hooks for the secret check (tests/secret_check.py) ----------------------------------------------


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> object:
    """Every test runs with logging at DEBUG, so the exporter's debug lines reach the captured output
    the secret check reads; a test that sets levels itself (setup_logging, caplog.at_level) still wins
    for its own duration. Levels are restored afterwards."""
    root = logging.getLogger()
    saved = [(root, root.level)] + [(logging.getLogger(n), logging.getLogger(n).level) for n in QUIET_LOGGERS]
    # A test that calls setup_logging leaves a handler on the stderr pytest captured for that test;
    # threads of later tests logging at DEBUG would then write to a closed file.
    handlers = list(root.handlers)
    root.setLevel(logging.DEBUG)
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    try:
        return (yield)
    finally:
        for logger, level in saved:
            logger.setLevel(level)
        for handler in [h for h in root.handlers if h not in handlers]:
            root.removeHandler(handler)


def _append_evidence(header: str, sections: list[tuple[str, str]], longrepr: str) -> None:
    directory = os.environ.get(EVIDENCE_ENV)
    if not directory:
        return  # a hand-run of a few tests keeps nothing; scripts/test.sh sets the directory
    parts = [f"===== {header}"]
    parts += [f"----- {title}\n{content}" for title, content in sections]
    if longrepr:
        parts.append(f"----- report\n{longrepr}")
    Path(directory).mkdir(parents=True, exist_ok=True)
    with (Path(directory) / CAPTURED_LOG).open("a", encoding="utf-8", errors="backslashreplace") as out:
        out.write("\n".join(parts) + "\n")


class _EvidenceFormatter(LogfmtFormatter):
    """The exporter's own line format plus the logger's name. pytest's default format prints only the
    message, so a secret in an `extra=` field (err=, target=) or a traceback would never be captured."""

    def format(self, record: logging.LogRecord) -> str:
        return f"{record.name}: {super().format(record)}"


def pytest_configure(config: pytest.Config) -> None:
    if not config.pluginmanager.is_registered(tier_guard):
        config.pluginmanager.register(tier_guard, "tier_guard")  # the unit tier's promise, checked


def pytest_sessionstart(session: pytest.Session) -> None:
    logging_plugin = session.config.pluginmanager.get_plugin("logging-plugin")
    if logging_plugin is not None:
        logging_plugin.report_handler.setFormatter(_EvidenceFormatter())
    # The file exists from the start, so the check can tell "nothing captured" from "hooks not run".
    _append_evidence(f"session in {session.config.rootpath}", [], "")


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by the tiers marked here
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test gets its tier (tests/tiers.py). Tests whose subprocesses run ahead (tests/background.py)
    go last, so their runs overlap the rest."""
    tiers.assign(items)
    items.sort(key=lambda item: _background_job_of(item) is not None)  # stable: the order is kept


def pytest_collection_finish(session: pytest.Session) -> None:
    if session.config.option.collectonly:
        return  # nothing runs: no promtool run ahead either
    jobs = {}
    for item in session.items:
        job_of = _background_job_of(item)
        if job_of is not None:
            key, job = job_of(**item.callspec.params)  # type: ignore[attr-defined]
            jobs[key] = job
    BACKGROUND.start(jobs)


def pytest_sessionfinish(session: pytest.Session) -> None:
    BACKGROUND.stop()


def _background_job_of(item: pytest.Item) -> JobOf | None:
    if not hasattr(item, "callspec"):
        return None
    return getattr(getattr(item, "function", None), "background_job", None)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Keep what pytest captured for every phase of every test, passed or not: pytest shows it only
    for failures, and a secret printed by a passing test is still a secret in a CI log."""
    # A report carries the sections of the phases before it too; keep each phase's own once.
    own = [(title, text) for title, text in report.sections if title.endswith(f" {report.when}")]
    _append_evidence(f"{report.nodeid} {report.when} {report.outcome}", own, report.longreprtext)


def pytest_collectreport(report: pytest.CollectReport) -> None:
    # Output while importing a test module (module-level code, plugins) lands here.
    if report.sections or report.longrepr:
        _append_evidence(f"collect {report.nodeid} {report.outcome}", report.sections, report.longreprtext)


@dataclass
class StandIn:
    server: StandInServer
    handler: ScenarioHandler
    instance: Instance
    clock: Clock

    @property
    def port(self) -> int:
        return self.server.port

    def target_yaml(self, name: str = "standin", **overrides: object) -> dict[str, object]:
        short = overrides.get("login_timeout_seconds"), overrides.get("query_timeout_seconds")
        if _shorter_than_patient(*short):
            _TIMED.append(f"target {name}: {overrides}")
        target: dict[str, object] = {
            "host": "127.0.0.1",
            "port": self.port,
            "driver": "freetds",
            "encryption": "off",
            # Patient (tests/timeouts.py): a scrape of the stand-in, or its first parse of a batch variant
            # no fixture parsed ahead (the Windows volume lookups), may take seconds on a loaded machine.
            # Tests of a timeout set short ones explicitly.
            "login_timeout_seconds": PATIENT_SECONDS,
            "query_timeout_seconds": PATIENT_SECONDS,
            "auth_module": "standin",
        }
        target.update(overrides)
        return target

    def config(self, **overrides: object) -> ExporterConfig:
        return make_config({"standin": self.target_yaml(**overrides)})


def make_config(targets: dict[str, dict[str, object]], default_target: str | None = None) -> ExporterConfig:
    os.environ[PASSWORD_ENV] = TEST_PASSWORD
    data: dict[str, object] = {
        "auth_modules": {"standin": {"username": "exporter", "password_env": PASSWORD_ENV}},
        "targets": targets,
    }
    if default_target:
        data["default_target"] = default_target
    return parse_config(data, source="test-config")


# What the running test did that makes it a test of a timeout (a short login/query timeout or scrape
# deadline); the standin fixture reads and clears it.
_TIMED: list[str] = []


def _shorter_than_patient(*seconds: object) -> bool:
    return any(isinstance(s, int | float) and s < PATIENT_SECONDS for s in seconds)


@pytest.fixture(scope="session")
def standin_parses_the_batch() -> None:
    """Parse the exporter's batch variants once per run, before the first stand-in starts.

    The stand-in checks each new batch text with sqlfluff, some 2 s for ours and over 5 s on a loaded
    machine. That cost is the stand-in's, not the exporter's, but it would land inside the first scrape
    of whichever test came first, against that test's query timeout. A test of a timeout that makes the
    stand-in parse a text not parsed here fails (the standin fixture checks): add its variant here
    (tests/standin/parse_ahead.py, which the demo's stand-in uses too)."""
    for sql in batch_variants(make_scraper_for_parsing()):
        batch_info(sql)


def make_scraper_for_parsing() -> Scraper:
    target = {"host": "127.0.0.1", "port": 1, "driver": "freetds", "auth_module": "standin"}
    return Scraper(make_config({"standin": target}))


@pytest.fixture
def standin(standin_parses_the_batch: None) -> Iterator[callable]:
    """Start stand-ins: `standin("memory-pressure")`; all are stopped after the test."""
    started: list[StandIn] = []

    def start(scenario: str = "healthy-oltp", manual_clock: bool = True) -> StandIn:
        clock = Clock(manual=manual_clock)
        instance = Instance(Scenario.load(scenario), clock)
        handler = ScenarioHandler(instance, user="exporter", password=TEST_PASSWORD)
        server = StandInServer(handler)
        server.start()
        s = StandIn(server, handler, instance, clock)
        started.append(s)
        return s

    _TIMED.clear()
    parses_before = parse_cache_info().misses
    yield start
    for s in started:
        s.server.stop()
    parsed = parse_cache_info().misses - parses_before
    timed, _TIMED[:] = list(_TIMED), []
    if timed and parsed:
        pytest.fail(
            f"this test of a timeout ({timed[0]}) made the stand-in parse {parsed} new SQL text(s) with "
            "sqlfluff, seconds on a loaded machine that counted against the timeout under test: parse the "
            "batch variant ahead in conftest.standin_parses_the_batch",
            pytrace=False,
        )


# The drivers the integration tier logs in through (issue 35): FreeTDS, and Microsoft's ODBC Driver 18 as
# the `msodbc` extra installs it. Tests of what both must do take the `driver` fixture; its ids (freetds,
# odbc18) are what `pytest -k odbc18` selects.
DRIVERS = ("freetds", "odbc18")


@pytest.fixture(params=DRIVERS)
def driver(request: pytest.FixtureRequest) -> str:
    if request.param == "odbc18":
        require_odbc18()
    return request.param


def require_odbc18() -> str:
    """The Driver 18 the exporter would use; fails (not skips) without one: the tier runs through both."""
    from mssql_memory_exporter.config import DriverError, resolve_driver
    from mssql_memory_exporter.connection.msodbc import available_drivers

    try:
        return resolve_driver("odbc18", available_drivers())
    except DriverError as exc:
        pytest.fail(f"{exc}; scripts/bootstrap.sh test installs it (the msodbc extra)", pytrace=False)


@pytest.fixture
def scraper_for() -> Iterator[callable]:
    scrapers: list[Scraper] = []

    def make(config: ExporterConfig) -> Scraper:
        scraper = Scraper(config)
        scrapers.append(scraper)
        return scraper

    yield make
    for scraper in scrapers:
        scraper.close()


def exposition(families: list) -> str:
    registry = CollectorRegistry()

    class _Fixed:
        def collect(self) -> list:
            return families

    registry.register(_Fixed())
    return generate_latest(registry).decode()


Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def samples_of(text: str) -> Samples:
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def value(samples: Samples, name: str, **labels: str) -> float:
    key = (name, tuple(sorted(labels.items())))
    if key not in samples:
        raise AssertionError(f"{name}{labels} not exported; have: {sorted({k[0] for k in samples})}")
    return samples[key]


def scrape(
    scraper: Scraper, config: ExporterConfig, target: str = "standin", timeout: float = PATIENT_SECONDS
) -> Samples:
    if _shorter_than_patient(timeout):
        _TIMED.append(f"scrape deadline {timeout:g} s")
    return samples_of(exposition(scraper.probe(config.targets[target], timeout)))


# Property tests check what comes out, not how fast: on a loaded 2-core CI machine hypothesis' default
# 200 ms deadline per example fails them at random (seen with the pool-config property test).
settings.register_profile("project", deadline=None)
settings.load_profile("project")
