"""Command line: flags in Prometheus' dotted style, then config, logging, and the HTTP server."""

from __future__ import annotations

import argparse
import contextlib
import logging
import signal
import sys
import threading
from types import FrameType
from typing import TYPE_CHECKING, Any

from prometheus_client.core import Metric

from mssql_memory_exporter import __version__
from mssql_memory_exporter.app.build_info import revision
from mssql_memory_exporter.app.logsetup import LEVELS, setup_logging
from mssql_memory_exporter.app.reload import ConfigReloader
from mssql_memory_exporter.app.webflags import SystemdSocketError, add_web_flags, listen, web_flag_problems
from mssql_memory_exporter.config import (
    ConfigError,
    ExporterConfig,
    ReloadRefused,
    driver_kind,
    freetds_verifies,
    load_config,
    resolve_driver,
)
from mssql_memory_exporter.connection import freetds
from mssql_memory_exporter.connection.driver_version import unsendable_password_reason
from mssql_memory_exporter.web import ExporterHTTPServer, OwnMetricsFn, ProbeFn
from mssql_memory_exporter.webconfig import WebConfigSource

if TYPE_CHECKING:  # imported when a probe is made: --version and --config.check start without them
    from mssql_memory_exporter.collectors.view import HostView
    from mssql_memory_exporter.scrape.scraper import Scraper

__all__ = ["build_parser", "main"]

log = logging.getLogger(__name__)

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
DEFAULT_LISTEN = ":9399"

# How soon a stop signal that landed on another thread is acted on (Python runs handlers on the main one).
STOP_POLL_SECONDS = 0.2
# On SIGTERM, requests already accepted are answered if they finish within this long; a probe stuck on a
# silent server is abandoned then, so the exporter stops within a second or two whatever the timeouts.
STOP_GRACE_SECONDS = 1.0


def build_parser() -> argparse.ArgumentParser:
    # allow_abbrev=False: '--config' must not silently mean '--config.file'.
    parser = argparse.ArgumentParser(
        prog="mssql-memory-exporter",
        description="Prometheus exporter for SQL Server memory pressure.",
        allow_abbrev=False,
    )
    parser.add_argument(
        "--config.file",
        dest="config_file",
        metavar="PATH",
        default="mssql-exporter.yml",
        help="YAML configuration file (default: %(default)s)",
    )
    parser.add_argument(
        "--web.listen-address",
        dest="listen_address",
        metavar="ADDRESS",
        action="append",
        default=None,  # resolved in main(): --healthcheck must tell "not given" from the default
        help=f"host:port, :port for all interfaces, or [v6addr]:port; repeat it to listen on several "
        f"(default: {DEFAULT_LISTEN})",
    )
    add_web_flags(parser)
    parser.add_argument(
        "--web.config.file",
        dest="web_config_file",
        metavar="PATH",
        default="",
        help="exporter-toolkit web config (web-config.yml) for TLS, client certificates, basic auth and "
        "response headers; re-read while running (default: plain HTTP, no auth)",
    )
    parser.add_argument(
        "--log.level", dest="log_level", default="info", choices=list(LEVELS), help="(default: %(default)s)"
    )
    parser.add_argument(
        "--log.format",
        dest="log_format",
        default="logfmt",
        choices=["logfmt", "json"],
        help="(default: %(default)s)",
    )
    parser.add_argument(
        "--collector.host",
        dest="collector_host",
        action="store_true",
        help="export this machine's disk writes, memory and sqlservr RSS on /metrics (run the exporter on "
        "the SQL Server host)",
    )
    parser.add_argument(
        "--config.check",
        dest="config_check",
        action="store_true",
        help="validate --config.file (and --web.config.file if given) as start-up would, print the "
        "result and exit: 0 valid, 2 not; nothing listens (for CI and systemd's ExecStartPre)",
    )
    parser.add_argument(
        "--check-target",
        dest="check_target",
        metavar="NAME",
        default=None,
        help="log in to target NAME of --config.file, run the batch once and print each collector's "
        "outcome (ok with rows and series, left out, or failed with the reason and the GRANT that fixes a "
        "refused permission); exit 0 only if every collector that is on is ok; nothing listens",
    )
    parser.add_argument(
        "--healthcheck",
        action="store_true",
        help="ask the exporter on --web.listen-address (or, in a container, the one running as PID 1) "
        "whether it serves; exit 0 if so, 1 if not (the image's HEALTHCHECK)",
    )
    parser.add_argument(
        "--version",
        action=_VersionAction,
        help="print the version, source revision, Python, pyodbc and ODBC drivers, and exit",
    )
    return parser


class _VersionAction(argparse.Action):
    """--version with the revision and the drivers, computed only when asked for."""

    def __init__(self, option_strings: list[str], dest: str, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser: argparse.ArgumentParser, *_args: object) -> None:
        from mssql_memory_exporter.app.build_info import build_info

        print(build_info().text())
        parser.exit()


def _warn_about_drivers(config: ExporterConfig) -> None:
    """A missing ODBC driver would otherwise surface only as mssql_up 0; say so once at start."""
    try:
        # Imported late: pyodbc needs libodbc, and --version or a config error should not.
        import pyodbc
    except ImportError as exc:
        log.warning("pyodbc is not importable; no target can be scraped", extra={"err": str(exc)})
        return
    from ..connection.msodbc import with_packaged

    available = with_packaged(pyodbc.drivers())
    for target in config.targets.values():
        try:
            driver = resolve_driver(target.driver, available, encryption=target.encryption)
        except ConfigError as exc:
            log.warning("no usable ODBC driver", extra={"target": target.name, "err": str(exc)})
            continue
        if driver_kind(driver) == "freetds" and freetds_verifies(target):
            # FreeTDS and the Microsoft drivers configure certificate checks so differently that the
            # one FreeTDS gets (a freetds.conf section, see freetds.py) is worth one line at start-up.
            log.info(
                "FreeTDS checks the server certificate",
                extra={
                    "target": target.name,
                    "encryption": target.encryption,
                    "ca_file": target.ca_file or "system trust store",
                },
            )


def _unsendable_passwords(config: ExporterConfig) -> list[str]:
    """Targets whose password the resolved driver cannot send (FreeTDS before 1.4 and '}'): every scrape
    would be one more failed login, which a lockout policy counts, so start-up refuses them."""
    try:
        import pyodbc
    except ImportError:
        return []
    from ..connection.msodbc import with_packaged

    available = with_packaged(pyodbc.drivers())
    problems = []
    for target in config.targets.values():
        try:
            driver = resolve_driver(target.driver, available, encryption=target.encryption)
            if driver_kind(driver) != "freetds":
                continue
            password = config.credentials_for(target).password.get_secret_value()
        except ConfigError:
            continue  # no driver or no readable password: warned about, and each scrape says so
        reason = unsendable_password_reason(driver, password)
        if reason is not None:
            problems.append(f"targets.{target.name} (auth_modules.{target.auth_module}): {reason}")
    return problems


def _kerberos_unavailable(config: ExporterConfig) -> list[str]:
    """A keytab or ccache needs python-gssapi (the `kerberos` extra): without it no login could work."""
    settings = config.kerberos()
    if settings is None or (settings.keytab is None and settings.ccache is None):
        return []
    try:
        import gssapi  # noqa: F401
    except ImportError:
        return [
            "auth_modules: kerberos with a keytab or ccache needs the python-gssapi package; install the "
            "exporter with its `kerberos` extra (pip install 'mssql-memory-exporter[kerberos]', which "
            "builds against libkrb5-dev)"
        ]
    return []


def _start_up_refusals(config: ExporterConfig) -> list[str]:
    """What start-up (and a reload) refuses beyond the file's own validation."""
    return _unsendable_passwords(config) + _kerberos_unavailable(config)


def _make_probe(config: ExporterConfig, host: HostView | None) -> tuple[ProbeFn, Scraper]:
    # Imported here so the CLI, the config and the web layer stay usable on their own (tests, --version).
    from mssql_memory_exporter.scrape.scraper import Scraper

    scraper = Scraper(config, host=host)
    return scraper.probe, scraper


def _make_host(config: ExporterConfig, export: bool) -> tuple[HostView | None, OwnMetricsFn | None]:
    """The host collector, when asked for or when a target runs on this host (its mounts and disks
    resolve that target's volumes and SSD pools), and the drive-health reader when drives are configured
    (started here: it reads in a thread of its own, never inside a scrape)."""
    monitor = _start_drive_health(config)
    if not export and monitor is None and not any(t.colocated for t in config.targets.values()):
        return None, None
    from mssql_memory_exporter.host.collector import HostCollector
    from mssql_memory_exporter.host.metrics import host_families

    host = HostCollector(drives=monitor)
    groups: list[OwnMetricsFn] = []
    if export:
        groups.append(lambda: host_families(host))
    if monitor is not None:
        from mssql_memory_exporter.host.drive_metrics import drive_families

        pools = {drive: pool for drive, (_target, pool) in config.drive_pools().items()}
        groups.append(lambda: drive_families(monitor, pools))
    if not groups:
        return host, None
    return host, lambda: [family for group in groups for family in group()]


def _start_drive_health(config: ExporterConfig) -> Any:
    if config.drive_health is None:
        return None
    from mssql_memory_exporter.host.drive_health import DriveMonitor

    monitor = DriveMonitor(config.drive_health)
    monitor.start()
    log.info(
        "drive health: reading drives",
        extra={"drives": len(config.drive_health.drives), "interval": config.drive_health.interval_seconds},
    )
    return monitor


def _own_metrics(host_metrics: OwnMetricsFn | None, reloader: ConfigReloader) -> OwnMetricsFn:
    from mssql_memory_exporter.app.build_info import build_info_families
    from mssql_memory_exporter.app.self_metrics import worker_families
    from mssql_memory_exporter.connection.session import WORKERS

    def families() -> list[Metric]:
        return [
            *build_info_families(),
            *reloader.families(),
            *worker_families(WORKERS),
            *(host_metrics() if host_metrics is not None else []),
        ]

    return families


class StartupInterrupted(BaseException):
    """SIGTERM or SIGINT before the exporter listens. A BaseException, like KeyboardInterrupt, so no
    `except Exception` on the way up swallows it."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signal_name = signal.Signals(signum).name


def _abort_start_on_signals() -> dict[signal.Signals, Any]:
    """Until _stop_on_signals() takes over, SIGTERM and SIGINT abandon start-up at once (a large config
    can take a while to read) and main() cleans up; without a handler SIGTERM would kill the process and
    leave the private FreeTDS directory behind. Returns the handlers it replaced."""

    def abort(signum: int, _frame: FrameType | None) -> None:
        # Later signals are ignored: what is left is removing one directory, and a second exception
        # raised in the middle of that cleanup would leave the directory half-removed.
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, signal.SIG_IGN)
        raise StartupInterrupted(signum)

    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    for sig in previous:
        signal.signal(sig, abort)
    return previous


class StopRequest(threading.Event):
    """Set by SIGTERM or SIGINT once serving; `signal_name` is the first signal's name."""

    signal_name = ""


def _stop_on_signals() -> StopRequest:
    """Installed before "listening" is logged: whoever waits for that line may signal at once, and a
    SIGTERM before the handler exists would kill the process instead of stopping it cleanly."""
    stop = StopRequest()
    received: list[int] = []

    def request_stop(signum: int, _frame: FrameType | None) -> None:
        # A second signal (systemd's SIGTERM after Ctrl-C, an impatient operator) while stopping is
        # already under way changes nothing: one "stopping" line, and shutdown carries on. The check is a
        # list append, not the Event: a handler runs between any two bytecodes of the main thread, also
        # inside the first handler's stop.set(), whose lock is not re-entrant; a second set() there would
        # deadlock. "stopping" is logged by the main loop, once no reload can apply anything any more.
        if received:
            return
        received.append(signum)
        stop.signal_name = signal.Signals(signum).name
        stop.set()

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    return stop


def _reload_on_sighup() -> list[int]:
    """SIGHUP asks for a reload (it used to kill the process, exit 129, leaving the private FreeTDS
    directory behind). Installed first thing, so a SIGHUP during start-up is kept and acted on once
    serving. The handler only records it: reloading inside a signal handler would take locks the
    interrupted code may hold. Returns the list the main loop drains."""
    requests: list[int] = []

    def request_reload(signum: int, _frame: FrameType | None) -> None:
        requests.append(signum)

    if hasattr(signal, "SIGHUP"):  # not on Windows
        signal.signal(signal.SIGHUP, request_reload)
    return requests


def _serve_until(
    server: ExporterHTTPServer, stop: StopRequest, reloads: list[int], reloader: ConfigReloader
) -> None:
    # serve_forever runs in a thread because shutdown() blocks until the loop exits: calling it from a
    # signal handler on the serving thread would wait on itself.
    thread = threading.Thread(target=server.serve_forever, name="http", daemon=True)
    thread.start()
    reloading: threading.Thread | None = None
    # Wait in short slices: the kernel may deliver SIGTERM to any thread, and Python runs its handler
    # only when the main thread returns to the interpreter. An untimed wait() then never returns (seen as
    # a stop that hung 1 run in 8 of the two-signal test, with neither signal handled).
    while not stop.wait(timeout=STOP_POLL_SECONDS):
        if reloads and (reloading is None or not reloading.is_alive()):
            # Several SIGHUPs before this slice ends, or during a reload, are one reload of the file as
            # it is. The reload runs in a thread of its own, so this loop stays free to stop at once.
            reloads.clear()
            reloading = threading.Thread(target=_reload_quietly, args=(reloader,), name="reload", daemon=True)
            reloading.start()
    # After stop() no reload applies anything: a reload still reading the file is abandoned (not waited
    # for), one applying its config finishes first, so "stopping" is the last word on the config.
    reloader.stop()
    log.info("stopping", extra={"signal": stop.signal_name})
    server.shutdown()
    server.drain(STOP_GRACE_SECONDS)  # requests already accepted are answered, within the grace
    server.server_close()
    thread.join()


def _reload_quietly(reloader: ConfigReloader) -> None:
    with contextlib.suppress(ReloadRefused):  # logged by the reloader; the old config serves on
        reloader.reload("SIGHUP")


def raise_open_files_limit(targets: int) -> None:
    """Each target holds a persistent ODBC connection (two descriptors with FreeTDS); systemd's default
    soft limit of 1,024 runs out near 500 targets, and the driver then reports every further target as
    "unavailable". Raise the soft limit to the hard one, as Go programs do; warn when even that is short."""
    try:
        import resource
    except ImportError:  # Windows has no such limit
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    needed = 2 * targets + 64
    if soft != resource.RLIM_INFINITY and soft < needed:
        log.warning(
            "open files limit is low for this many targets; raise it (systemd: LimitNOFILE)",
            extra={"limit": soft, "needed": needed, "targets": targets},
        )


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.healthcheck:
        from mssql_memory_exporter.app import healthcheck

        return healthcheck.main(args.listen_address[0] if args.listen_address else None)
    args.listen_address = args.listen_address or [DEFAULT_LISTEN]
    setup_logging(args.log_level, args.log_format)
    if args.config_check:
        return _check_config(args)
    if args.check_target is not None:
        return _check_target(args)
    previous = _abort_start_on_signals()
    if hasattr(signal, "SIGHUP"):
        previous[signal.SIGHUP] = signal.getsignal(signal.SIGHUP)
    args.reloads = _reload_on_sighup()
    try:
        return _run(args)
    except StartupInterrupted as exc:
        log.info("stopping", extra={"signal": exc.signal_name, "during": "start-up"})
        log.info("stopped")
        return EXIT_OK
    finally:
        # Every way out: a normal stop, a signal before or after "listening", a config or listen error,
        # an exception. atexit would miss a SIGTERM that kills the process before a handler exists.
        freetds.remove_directory()
        for signum, handler in previous.items():
            if handler is not None:  # None: set outside Python, cannot be put back
                signal.signal(signum, handler)


def _validated(args: argparse.Namespace) -> tuple[ExporterConfig, WebConfigSource | None] | None:
    """The config and web config as start-up checks them; None after printing every problem found."""
    problems: list[str] = []
    config = None
    try:
        config = load_config(args.config_file)
    except ConfigError as exc:
        problems += exc.lines
    problems += web_flag_problems(args)
    web = None
    if args.web_config_file:
        # Loaded (certificates and keys included) before listening: a bad file stops start-up, it never
        # leaves the exporter serving without the TLS or auth the operator asked for.
        try:
            web = WebConfigSource(args.web_config_file)
        except ConfigError as exc:
            problems += exc.lines
    if config is not None:
        problems += _start_up_refusals(config)
    if problems or config is None:
        for line in problems:
            print(f"error: {line}", file=sys.stderr)
        return None
    return config, web


def _check_config(args: argparse.Namespace) -> int:
    """--config.check: what start-up would refuse, without listening, connecting or writing anything."""
    checked = _validated(args)
    if checked is None:
        return EXIT_USAGE
    config, web = checked
    for warning in config.secret_warnings():
        print(f"warning: {warning}", file=sys.stderr)
    files = args.config_file + (f" and {args.web_config_file}" if web is not None else "")
    print(f"{files}: valid ({len(config.targets)} targets)")
    return EXIT_OK


def _check_target(args: argparse.Namespace) -> int:
    """--check-target: one batch against one target, each collector's outcome printed (check_target.py)."""
    from mssql_memory_exporter.app import check_target

    checked = _validated(args)
    if checked is None:
        return EXIT_USAGE
    try:
        return check_target.check(checked[0], args.check_target)
    finally:
        freetds.remove_directory()  # the scraper may have written a private freetds.conf


def _run(args: argparse.Namespace) -> int:
    checked = _validated(args)
    if checked is None:
        return EXIT_USAGE
    config, web = checked
    raise_open_files_limit(len(config.targets))
    log.info(
        "starting", extra={"version": __version__, "targets": len(config.targets), "revision": revision()}
    )
    for warning in config.secret_warnings():
        log.warning("secret file kept loosely", extra={"problem": warning})
    _warn_about_drivers(config)
    host, own_metrics = _make_host(config, args.collector_host)
    probe, scraper = _make_probe(config, host)
    server: ExporterHTTPServer | None = None

    def apply(new: ExporterConfig) -> str:
        summary = scraper.reload(new)
        if server is not None:
            server.config = new  # one attribute: each request reads the config it is routed with once
        _warn_about_drivers(new)
        return summary.text()

    reloader = ConfigReloader(args.config_file, config, apply, _start_up_refusals)
    try:
        server = listen(args, config, probe, _own_metrics(own_metrics, reloader), web)
    except (OSError, SystemdSocketError) as exc:
        log.error("cannot listen", extra={"address": ",".join(args.listen_address), "err": str(exc)})
        return EXIT_FAILURE
    server.reload = reloader.reload
    stop = _stop_on_signals()
    log.info(
        "listening",
        extra={
            "address": server.address_text,
            "tls": server.tls,
            "basic_auth": bool(web is not None and web.state.users),
        },
    )
    try:
        _serve_until(server, stop, args.reloads, reloader)
    finally:
        for part in (scraper, host):
            close = getattr(part, "close", None)
            if callable(close):
                close()
    log.info("stopped")
    return EXIT_OK
