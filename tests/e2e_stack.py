"""A small end-to-end monitoring stack for tests: exporter, Prometheus, Alertmanager, webhook receiver.

Every piece is the real program (Debian's `prometheus` and `prometheus-alertmanager`, or the Prometheus
3.13.3 that scripts/prometheus3.sh builds, the exporter as users run it) on a free 127.0.0.1 port with
its own temporary directory. Every wait is bounded, and a failure message carries the tail of every
process log, because "timed out" alone says nothing about which piece of a five-process pipeline broke.

    with Stack(tmp_path) as stack:
        receiver = stack.start_receiver()
        am = stack.start_alertmanager(alertmanager_config_for_test(path, receiver.url))
        exporter = stack.start_exporter(exporter_config)
        prom = stack.start_prometheus(prometheus_config(...), rule_files)
        stack.wait_for(lambda: prom.query("up") or None, 20, "a first scrape")

When scripts/test.sh runs the suite, each process's log is copied into the run's evidence directory as
the process stops, so the secret check (tests/secret_check.py) reads it.

The dashboards tests reuse it to run every panel query against a real Prometheus (`Prometheus.query`,
`Prometheus.query_range`).
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import IO, Any, TypeVar

import yaml

from tests.secret_check import EVIDENCE_ENV, PROCESS_LOGS
from tests.timeouts import PATIENT_SECONDS

ROOT = Path(__file__).resolve().parent.parent
PROMETHEUS = "prometheus"
ALERTMANAGER = "prometheus-alertmanager"  # Debian's name for the alertmanager binary
LOG_TAIL_LINES = 40
STOP_TIMEOUT_SECONDS = 10.0

T = TypeVar("T")


def free_port() -> int:
    """A port nobody listens on right now (the OS picks it; a race with other programs is unlikely)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def missing_binaries() -> list[str]:
    """The stack's external programs that are not installed, for a skip reason."""
    return [name for name in (PROMETHEUS, ALERTMANAGER) if shutil.which(name) is None]


def http_get(url: str, timeout: float = PATIENT_SECONDS) -> tuple[int, str]:
    """Status and body; connection errors raise OSError, HTTP errors come back as their status."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode(errors="replace")


def http_post_json(url: str, payload: object, timeout: float = PATIENT_SECONDS) -> tuple[int, str]:
    request = urllib.request.Request(
        url, data=json.dumps(payload).encode(), headers={"Content-Type": "application/json"}, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode(errors="replace")


# --- processes ---------------------------------------------------------------------------------------


@dataclass
class Process:
    """One program of the stack, its output going to a log file in the stack's directory."""

    name: str
    popen: subprocess.Popen[bytes]
    log: Path
    _log_file: IO[bytes]
    # Lines left out of failure output: e.g. Alertmanager's debug log flushes every group each second,
    # which would push the lines that matter (received, inhibited, notify failed) out of the tail.
    noise: re.Pattern[str] | None = None

    def running(self) -> bool:
        return self.popen.poll() is None

    def tail(self, lines: int = LOG_TAIL_LINES) -> str:
        try:
            text = self.log.read_text(errors="replace")
        except OSError as err:
            return f"(log unreadable: {err})"
        kept = [line for line in text.splitlines() if self.noise is None or not self.noise.search(line)]
        return "\n".join(kept[-lines:])

    def stop(self) -> None:
        if self.running():
            self.popen.terminate()
            try:
                self.popen.wait(STOP_TIMEOUT_SECONDS)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(STOP_TIMEOUT_SECONDS)
        self._log_file.close()


def keep_log(log: Path, name: str) -> Path | None:
    """Copy a finished process's log where the run's secret check reads it (tests/secret_check.py),
    when scripts/test.sh asked for that; the stack's own directory is a temporary one nobody checks."""
    directory = os.environ.get(EVIDENCE_ENV)
    if not directory or not log.exists():
        return None
    target_dir = Path(directory) / PROCESS_LOGS
    target_dir.mkdir(parents=True, exist_ok=True)
    fd, target = tempfile.mkstemp(prefix=f"{name}-", suffix=".log", dir=target_dir)
    os.close(fd)
    shutil.copyfile(log, target)
    return Path(target)


# --- webhook receiver --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Notification:
    """One alert out of one webhook POST, with what the test needs to check routing and content."""

    path: str  # the URL path it was posted to: tells which configured receiver sent it
    receiver: str  # Alertmanager's receiver name, from the payload
    status: str  # firing | resolved
    labels: dict[str, str]
    annotations: dict[str, str]
    received_at: float  # time.monotonic() on arrival

    def __str__(self) -> str:
        labels = ",".join(f"{k}={v}" for k, v in sorted(self.labels.items()))
        return f"{self.status} {{{labels}}} -> {self.receiver} ({self.path})"


class WebhookReceiver:
    """Alertmanager's webhook target: collects every POSTed alert; thread-safe reads for the test."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._notifications: list[Notification] = []
        self.bad_posts: list[str] = []  # bodies that were not Alertmanager's webhook JSON
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                receiver._record(self.path, self.rfile.read(length))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass  # the test asserts on what was collected; access lines would only add noise

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="webhook", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def _record(self, path: str, body: bytes) -> None:
        now = time.monotonic()
        try:
            payload = json.loads(body)
            got = [
                Notification(
                    path=path,
                    receiver=str(payload.get("receiver", "")),
                    status=str(alert.get("status", "")),
                    labels=dict(alert.get("labels", {})),
                    annotations=dict(alert.get("annotations", {})),
                    received_at=now,
                )
                for alert in payload.get("alerts", [])
            ]
        except (ValueError, AttributeError, TypeError):
            with self._lock:
                self.bad_posts.append(body[:500].decode(errors="replace"))
            return
        with self._lock:
            self._notifications.extend(got)

    def notifications(self) -> list[Notification]:
        with self._lock:
            return list(self._notifications)

    def find(self, status: str | None = None, **labels: str) -> list[Notification]:
        """Alerts received so far whose labels include `labels` (and with that status, if given)."""
        return [
            n
            for n in self.notifications()
            if (status is None or n.status == status) and all(n.labels.get(k) == v for k, v in labels.items())
        ]

    def summary(self) -> str:
        lines = [str(n) for n in self.notifications()] or ["(nothing received)"]
        lines += [f"unparsable POST: {body}" for body in self.bad_posts]
        return "\n".join(lines)

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(STOP_TIMEOUT_SECONDS)


# --- Prometheus and Alertmanager clients -------------------------------------------------------------


@dataclass
class Prometheus:
    url: str

    def _api(self, path: str, params: dict[str, str]) -> Any:
        status, body = http_get(f"{self.url}{path}?{urllib.parse.urlencode(params)}")
        data = json.loads(body)
        if status != 200 or data.get("status") != "success":
            raise AssertionError(f"Prometheus {path} {params}: HTTP {status}: {body[:1000]}")
        return data["data"]

    def query(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        """Instant query; the vector's samples as Prometheus returns them ({metric, value})."""
        params = {"query": expr}
        if at is not None:
            params["time"] = f"{at:.3f}"
        data = self._api("/api/v1/query", params)
        result = data["result"]
        return result if data["resultType"] == "vector" else [{"metric": {}, "value": result}]

    def query_range(self, expr: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
        params = {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}"}
        return self._api("/api/v1/query_range", params)["result"]

    def version(self) -> str:
        """The release of the running server, as it reports it (e.g. "2.42.0+ds", "3.13.3")."""
        return str(self._api("/api/v1/status/buildinfo", {})["version"])

    def alerts(self) -> list[dict[str, Any]]:
        """Pending and firing alerts as the rule manager sees them now."""
        return self._api("/api/v1/alerts", {})["alerts"]

    def rule_health(self) -> list[str]:
        """Rules whose last evaluation failed, as 'name: error', so a broken expression is visible."""
        bad = []
        for group in self._api("/api/v1/rules", {})["groups"]:
            for rule in group["rules"]:
                if rule.get("health") not in ("ok", "unknown"):
                    bad.append(f"{rule.get('name')}: {rule.get('lastError')}")
        return bad


@dataclass
class Alertmanager:
    url: str

    def alerts(self, *matchers: str) -> list[dict[str, Any]]:
        """Alerts Alertmanager holds (active, silenced and inhibited), filtered by label matchers."""
        query = urllib.parse.urlencode([("filter", m) for m in matchers])
        status, body = http_get(f"{self.url}/api/v2/alerts?{query}")
        if status != 200:
            raise AssertionError(f"Alertmanager /api/v2/alerts: HTTP {status}: {body[:1000]}")
        return json.loads(body)

    def post_alert(self, labels: dict[str, str], annotations: dict[str, str] | None = None) -> None:
        """Send an alert the way Prometheus does (firing, no end time)."""
        status, body = http_post_json(
            f"{self.url}/api/v2/alerts", [{"labels": labels, "annotations": annotations or {}}]
        )
        if status != 200:
            raise AssertionError(f"Alertmanager rejected an alert: HTTP {status}: {body[:1000]}")


# --- configuration helpers ---------------------------------------------------------------------------


def probe_scrape_config(
    job: str, exporter_address: str, targets: list[str], interval: str = "1s"
) -> dict[str, Any]:
    """The production multi-target scrape job (docs/configuration.md): target names become
    ?target=NAME and the instance label, and the scrape goes to the exporter's /probe."""
    return {
        "job_name": job,
        "scrape_interval": interval,
        "scrape_timeout": interval,  # Prometheus refuses a timeout longer than the interval
        "metrics_path": "/probe",
        "static_configs": [{"targets": list(targets)}],
        "relabel_configs": [
            {"source_labels": ["__address__"], "target_label": "__param_target"},
            {"source_labels": ["__param_target"], "target_label": "instance"},
            {"target_label": "__address__", "replacement": exporter_address},
        ],
    }


def prometheus_config(
    scrape_configs: list[dict[str, Any]],
    rule_files: list[Path],
    alertmanager_address: str | None = None,
    interval: str = "1s",
) -> dict[str, Any]:
    config: dict[str, Any] = {
        "global": {"scrape_interval": interval, "evaluation_interval": interval},
        "rule_files": [str(p) for p in rule_files],
        "scrape_configs": scrape_configs,
    }
    if alertmanager_address is not None:
        config["alerting"] = {
            "alertmanagers": [{"api_version": "v2", "static_configs": [{"targets": [alertmanager_address]}]}]
        }
    return config


def alertmanager_config_for_test(
    shipped: Path, receiver_url: str, group_wait: str = "1s", group_interval: str = "1s"
) -> dict[str, Any]:
    """The shipped Alertmanager config with every webhook pointed at the test's receiver and the
    grouping delays shortened; routes, receivers and inhibition stay as shipped, so they are what
    the test exercises. The original URL's path is kept, so the receiver can tell which configured
    webhook a notification came through."""
    config = copy.deepcopy(yaml.safe_load(shipped.read_text()))
    # Template paths are relative to the config file's directory; the copy lives elsewhere.
    config["templates"] = [str(shipped.parent / t) for t in config.get("templates") or []]
    base = urllib.parse.urlsplit(receiver_url)
    for receiver in config.get("receivers") or []:
        for webhook in receiver.get("webhook_configs") or []:
            original = urllib.parse.urlsplit(str(webhook.get("url", "/")))
            webhook.pop("url_file", None)
            webhook["url"] = urllib.parse.urlunsplit(
                (base.scheme, base.netloc, original.path or "/", original.query, "")
            )

    def shorten(route: dict[str, Any]) -> None:
        # A child route inherits the timings unless it sets its own; replace the ones it sets.
        for key, value in (("group_wait", group_wait), ("group_interval", group_interval)):
            if key in route or route is config["route"]:
                route[key] = value
        for child in route.get("routes") or []:
            shorten(child)

    shorten(config["route"])
    return config


# --- the stack ---------------------------------------------------------------------------------------


@dataclass
class Stack:
    """Starts the pieces on free ports under `workdir`; `stop()` (or leaving the `with`) ends them all."""

    workdir: Path
    processes: list[Process] = field(default_factory=list)
    receivers: list[WebhookReceiver] = field(default_factory=list)
    # Extra things to report on failure, e.g. lambda: receiver.summary(); name -> callable.
    reports: dict[str, Callable[[], str]] = field(default_factory=dict)

    def __enter__(self) -> Stack:
        self.workdir.mkdir(parents=True, exist_ok=True)
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        # Prometheus first, so it does not log the exporter's and Alertmanager's disappearance at length.
        for process in reversed(self.processes):
            process.stop()
            keep_log(process.log, process.name)
        for receiver in self.receivers:
            receiver.stop()
        self.processes.clear()
        self.receivers.clear()

    # diagnostics --------------------------------------------------------------------------------------
    def logs(self) -> str:
        parts = []
        for process in self.processes:
            state = "running" if process.running() else f"exited {process.popen.returncode}"
            parts.append(
                f"----- {process.name} ({state}), last lines of {process.log} -----\n{process.tail()}"
            )
        for name, report in self.reports.items():
            try:
                text = report()
            except Exception as err:  # a broken report must not hide the failure being reported
                text = f"(report failed: {err!r})"
            parts.append(f"----- {name} -----\n{text}")
        return "\n".join(parts)

    def fail(self, message: str) -> AssertionError:
        return AssertionError(f"{message}\n{self.logs()}")

    def wait_for(self, probe: Callable[[], T | None], timeout: float, what: str, interval: float = 0.25) -> T:
        """Poll `probe` until it returns something other than None/False, at most `timeout` seconds.
        A process of the stack dying ends the wait at once: nothing would change any more."""
        deadline = time.monotonic() + timeout
        last_error: Exception | None = None
        while True:
            try:
                result = probe()
                if result is not None and result is not False:
                    return result
            except (OSError, ValueError, AssertionError) as err:  # not up yet, or not answering well
                last_error = err
            dead = [p.name for p in self.processes if not p.running()]
            if dead:
                raise self.fail(f"waiting for {what}: {', '.join(dead)} exited")
            if time.monotonic() > deadline:
                suffix = f" (last error: {last_error})" if last_error else ""
                raise self.fail(f"no {what} within {timeout:g} s{suffix}")
            time.sleep(interval)

    # starting pieces ----------------------------------------------------------------------------------
    def start_process(
        self,
        name: str,
        argv: list[str],
        ready_url: str,
        timeout: float = PATIENT_SECONDS,
        env: dict[str, str] | None = None,
        noise: str | None = None,
    ) -> Process:
        """Start a program and wait until `ready_url` answers 200."""
        log = self.workdir / f"{name}.log"
        log_file = log.open("wb")
        popen = subprocess.Popen(
            argv, stdout=log_file, stderr=subprocess.STDOUT, env=env, cwd=self.workdir, start_new_session=True
        )
        process = Process(name, popen, log, log_file, re.compile(noise) if noise else None)
        self.processes.append(process)
        self.wait_for(
            lambda: http_get(ready_url, timeout=1)[0] == 200, timeout, f"{name} ready at {ready_url}"
        )
        return process

    def write(self, name: str, content: dict[str, Any] | str) -> Path:
        path = self.workdir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content if isinstance(content, str) else yaml.safe_dump(content, sort_keys=False))
        return path

    def start_receiver(self) -> WebhookReceiver:
        receiver = WebhookReceiver()
        self.receivers.append(receiver)
        self.reports[f"webhook receiver {receiver.url}"] = receiver.summary
        return receiver

    def process(self, name: str) -> Process:
        return next(p for p in self.processes if p.name == name)

    def start_exporter(
        self,
        config: dict[str, Any],
        env: dict[str, str] | None = None,
        name: str = "exporter",
        args: tuple[str, ...] = (),
    ) -> str:
        """`python -m mssql_memory_exporter` with this config; returns its base URL."""
        path = self.write(f"{name}.yml", config)
        port = free_port()
        full_env = {**os.environ, **(env or {}), "PYTHONPATH": str(ROOT / "exporter")}
        argv = [
            sys.executable,
            "-m",
            "mssql_memory_exporter",
            "--config.file",
            str(path),
            "--web.listen-address",
            f"127.0.0.1:{port}",
            *args,
        ]
        base = f"http://127.0.0.1:{port}"
        self.start_process(name, argv, f"{base}/-/healthy", env=full_env)
        return base

    def start_alertmanager(self, config: dict[str, Any], name: str = "alertmanager") -> Alertmanager:
        path = self.write(f"{name}.yml", config)
        storage = self.workdir / f"{name}-data"
        storage.mkdir(exist_ok=True)
        port = free_port()
        argv = [
            ALERTMANAGER,
            f"--config.file={path}",
            f"--storage.path={storage}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--cluster.listen-address=",  # no gossip: a single instance, no port to collide on
            "--log.level=debug",  # notification attempts and inhibitions show in the failure output
        ]
        base = f"http://127.0.0.1:{port}"
        self.start_process(name, argv, f"{base}/-/ready", noise=r"msg=flushing ")
        return Alertmanager(base)

    def start_prometheus(
        self, config: dict[str, Any], name: str = "prometheus", binary: str = PROMETHEUS
    ) -> Prometheus:
        """`binary`: Debian's 2.42 by default; tests that run under each release pass the `path` of one
        of `tools.prometheus_versions()`."""
        path = self.write(f"{name}.yml", config)
        storage = self.workdir / f"{name}-data"
        storage.mkdir(exist_ok=True)
        port = free_port()
        argv = [
            binary,
            f"--config.file={path}",
            f"--storage.tsdb.path={storage}",
            f"--web.listen-address=127.0.0.1:{port}",
        ]
        base = f"http://127.0.0.1:{port}"
        self.start_process(name, argv, f"{base}/-/ready")
        return Prometheus(base)


@dataclass
class Timeline:
    """Named moments of a test run, relative to its start, for the failure message and the report."""

    start: float = field(default_factory=time.monotonic)
    marks: list[tuple[str, float]] = field(default_factory=list)

    def mark(self, what: str, at: float | None = None) -> float:
        now = time.monotonic() if at is None else at
        self.marks.append((what, now - self.start))
        return now - self.start

    def __str__(self) -> str:
        return "\n".join(f"{t:6.1f} s  {what}" for what, t in self.marks)
