"""Alertmanager: the shipped routing and templates checked with amtool, routed offline, and delivered
through a real Alertmanager (split from tests/promtool/test_alerting.py, which keeps the rules)."""

from __future__ import annotations

import http.server
import json
import re
import shutil
import socket
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.promtool.test_alerting import (
    ALERTMANAGER,
    AM_CONFIG,
    AMTOOL,
    DEFAULT_RECEIVER,
    RECEIVER_OF_SEVERITY,
    TEMPLATES,
    alert_rules,
    needs_alertmanager,
    needs_amtool,
    output,
    run,
)
from tests.timeouts import PATIENT_SECONDS

# --------------------------------------------------------------------------------------------------
# Alertmanager configuration: static checks


@needs_amtool
def test_alertmanager_config_passes_amtool_from_any_directory(tmp_path: Path) -> None:
    # Run from an unrelated directory: relative template paths resolve against the config file's
    # directory, so the check must not depend on where it runs.
    result = run([AMTOOL, "check-config", str(AM_CONFIG)], timeout=30, cwd=tmp_path)
    assert result.returncode == 0, output(result)
    assert "SUCCESS" in result.stdout, output(result)


def test_template_globs_match_real_files() -> None:
    # Alertmanager accepts a glob that matches nothing, and amtool check-config does too: a wrong path
    # would only show when the first notification that uses the template fails. Resolve it like
    # Alertmanager does (relative to the config file) and demand files.
    config = yaml.safe_load(AM_CONFIG.read_text())
    assert config["templates"], "alertmanager.yml must load the notification template"
    for pattern in config["templates"]:
        base = Path(pattern) if Path(pattern).is_absolute() else AM_CONFIG.parent / pattern
        matches = sorted(base.parent.glob(base.name))
        assert matches, f"templates: {pattern!r} matches no file next to {AM_CONFIG}"
        assert TEMPLATES / "mssql.tmpl" in matches


def test_routing_tree_shape() -> None:
    route = yaml.safe_load(AM_CONFIG.read_text())["route"]
    assert route["receiver"] == DEFAULT_RECEIVER
    assert route["group_by"] == ["alertname", "instance"]
    children = {tuple(r["matchers"]): r for r in route["routes"]}
    critical = children[('severity="critical"',)]
    warning = children[('severity="warning"',)]
    assert children[('severity="info"',)]["receiver"] == "blackhole"
    # Pages are repeated more often than tickets.
    assert duration(critical["repeat_interval"]) < duration(warning["repeat_interval"])
    assert not any(r.get("continue") for r in route["routes"]), "an alert must reach exactly one receiver"


def duration(text: str) -> int:
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    return sum(int(n) * units[u] for n, u in re.findall(r"(\d+)([smhd])", text))


def test_blackhole_has_no_integration() -> None:
    receivers = {r["name"]: r for r in yaml.safe_load(AM_CONFIG.read_text())["receivers"]}
    assert set(receivers["blackhole"]) == {"name"}
    for name in ("pager", "ticket"):
        urls = [c["url"] for c in receivers[name]["webhook_configs"]]
        assert urls == [f"http://alert-receiver:5001/alerts/{name}"]


def uncommented_examples(text: str) -> str:
    """alertmanager.yml with its commented-out `*_configs:` blocks turned on, to validate the examples."""
    lines, out = text.splitlines(), []
    prefix: str | None = None
    for line in lines:
        start = re.match(r"^(\s+)# (\w+_configs:)\s*$", line)
        if start:
            prefix = start.group(1) + "# "
            out.append(start.group(1) + start.group(2))
        elif prefix is not None and line.startswith(prefix):
            out.append(line.replace("# ", "", 1))
        else:
            prefix = None
            out.append(line)
    return "\n".join(out) + "\n"


@needs_amtool
def test_commented_pagerduty_and_email_examples_are_valid(tmp_path: Path) -> None:
    # Commented examples rot unnoticed: switch them on in a copy and let amtool parse them.
    text = uncommented_examples(AM_CONFIG.read_text())
    assert "pagerduty_configs:\n" in text and "email_configs:\n" in text
    config = yaml.safe_load(text)
    receivers = {r["name"]: r for r in config["receivers"]}
    pagerduty = receivers["pager"]["pagerduty_configs"][0]
    assert "routing_key_file" in pagerduty and "routing_key" not in pagerduty, "keys live in files"
    assert "auth_password_file" in receivers["ticket"]["email_configs"][0]
    copy = tmp_path / "alertmanager.yml"
    copy.write_text(text)
    shutil.copytree(TEMPLATES, tmp_path / "templates")
    result = run([AMTOOL, "check-config", str(copy)], timeout=30)
    assert result.returncode == 0, output(result)


# Template rendering: amtool renders our definitions against notification data (template.Data).


def notification_data(alerts: list[dict[str, Any]], receiver: str = "pager") -> dict[str, Any]:
    common = {k: v for k, v in alerts[0]["labels"].items() if all(a["labels"].get(k) == v for a in alerts)}
    return {
        "receiver": receiver,
        "status": "firing",
        "alerts": alerts,
        "groupLabels": {k: common[k] for k in ("alertname", "instance") if k in common},
        "commonLabels": common,
        "commonAnnotations": {},
        "externalURL": "http://alertmanager.example:9093",
    }


def sample_alert(labels: dict[str, str], summary: str = "S", description: str = "D") -> dict[str, Any]:
    return {
        "status": "firing",
        "labels": labels,
        "annotations": {
            "summary": summary,
            "description": description,
            "runbook_url": f"https://example.org/docs/runbooks/{labels['alertname']}.md",
        },
        "startsAt": "2024-05-06T07:08:09Z",
        "endsAt": "0001-01-01T00:00:00Z",
    }


def render(template: str, data: dict[str, Any], tmp_path: Path) -> str:
    data_file = tmp_path / f"data-{time.monotonic_ns()}.json"
    data_file.write_text(json.dumps(data))
    result = run(
        [
            AMTOOL,
            "template",
            "render",
            f"--template.glob={TEMPLATES}/*.tmpl",
            f"--template.text={{{{ template {json.dumps(template)} . }}}}",
            f"--template.data={data_file}",
        ],
        timeout=30,
    )
    assert result.returncode == 0, output(result)
    return result.stdout


@needs_amtool
def test_template_title_names_alert_instance_and_node_or_pool(tmp_path: Path) -> None:
    node = {
        "alertname": "MSSQLMemoryPressure",
        "instance": "db1:1433",
        "job": "mssql",
        "severity": "critical",
    }
    title = render("mssql.title", notification_data([sample_alert({**node, "node": "0"})]), tmp_path)
    assert title.strip() == "[FIRING:1] CRITICAL MSSQLMemoryPressure on db1:1433 node 0"

    pool = {
        "alertname": "MSSQLSSDEnduranceBudgetHigh",
        "instance": "db1:1433",
        "job": "mssql",
        "severity": "warning",
        "pool": "tempdb",
        "source": "sqlserver",
    }
    title = render("mssql.title", notification_data([sample_alert(pool)], "ticket"), tmp_path)
    assert (
        title.strip()
        == "[FIRING:1] WARNING MSSQLSSDEnduranceBudgetHigh on db1:1433 pool tempdb (sqlserver source)"
    )

    # Two nodes in one notification: no node in the title, the count says how many.
    two = [sample_alert({**node, "node": "0"}), sample_alert({**node, "node": "1"})]
    assert render("mssql.title", notification_data(two), tmp_path).strip() == (
        "[FIRING:2] CRITICAL MSSQLMemoryPressure on db1:1433"
    )


@needs_amtool
def test_template_body_lists_every_alert_with_its_fields(tmp_path: Path) -> None:
    labels = {
        "alertname": "MSSQLMemoryPressure",
        "instance": "db1:1433",
        "job": "mssql",
        "severity": "critical",
    }
    alerts = [
        sample_alert({**labels, "node": "0"}, "Pressure on node 0", "PLE 3m 20s under 5m 0s"),
        sample_alert({**labels, "node": "1"}, "Pressure on node 1", "PLE 1m under 5m 0s"),
    ]
    body = render("mssql.text", notification_data(alerts), tmp_path)
    blocks = [b for b in body.strip().split("\n\n") if b.strip()]
    assert len(blocks) == 2, body
    for block, node in zip(blocks, ("0", "1"), strict=True):
        assert block.splitlines() == [
            f"FIRING: MSSQLMemoryPressure on db1:1433 node {node}",
            f"Summary: Pressure on node {node}",
            f"Description: {alerts[int(node)]['annotations']['description']}",
            "Severity: critical",
            "Runbook: https://example.org/docs/runbooks/MSSQLMemoryPressure.md",
            "Since: 2024-05-06 07:08:09 UTC",
        ]


# --------------------------------------------------------------------------------------------------
# Routing (offline)


@needs_amtool
@pytest.mark.parametrize(
    ("labels", "receiver"),
    [
        ({"severity": "critical"}, "pager"),
        ({"severity": "warning"}, "ticket"),
        # Info is matched explicitly and dropped: it must not fall through to the default receiver.
        ({"severity": "info"}, "blackhole"),
        # Unknown or missing severity: the default, `ticket` (see DEFAULT_RECEIVER).
        ({"severity": "page"}, DEFAULT_RECEIVER),
        ({}, DEFAULT_RECEIVER),
    ],
    ids=["critical", "warning", "info", "unknown-severity", "no-severity"],
)
def test_route_by_severity(labels: dict[str, str], receiver: str) -> None:
    assert_route({"alertname": "MSSQLSomething", "instance": "db1:1433", "job": "mssql", **labels}, receiver)


def assert_route(labels: dict[str, str], receiver: str) -> None:
    args = [f"{k}={v}" for k, v in labels.items()]
    result = run(
        [
            AMTOOL,
            "config",
            "routes",
            "test",
            f"--config.file={AM_CONFIG}",
            f"--verify.receivers={receiver}",
            *args,
        ],
        timeout=30,
    )
    assert result.returncode == 0, f"{labels} should go to {receiver}: {output(result)}"


@needs_amtool
def test_every_generated_alert_reaches_the_receiver_of_its_severity() -> None:
    for rule in alert_rules():
        severity = rule["labels"]["severity"]
        labels = {"alertname": rule["alert"], "instance": "db1:1433", "job": "mssql", **rule["labels"]}
        assert_route(labels, RECEIVER_OF_SEVERITY[severity])


# --------------------------------------------------------------------------------------------------
# Inhibition and delivery, with a real Alertmanager


@dataclass
class Webhook:
    """What Alertmanager posted to the receiver in this process, by URL path."""

    received: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def alerts(self, path: str) -> list[dict[str, Any]]:
        with self.lock:
            return [a for p, body in self.received if p == path for a in body["alerts"]]

    def messages(self, path: str) -> list[dict[str, Any]]:
        with self.lock:
            return [body for p, body in self.received if p == path]


def start_webhook() -> tuple[http.server.ThreadingHTTPServer, Webhook]:
    hook = Webhook()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with hook.lock:
                hook.received.append((self.path, body))
            self.send_response(200)
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep pytest's output for failures

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, hook


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def derived_config(webhook_url: str) -> dict[str, Any]:
    """alerts/alertmanager.yml with only what a test must change: webhook URLs, timers, template path.

    Routes, receivers' names and every inhibition rule stay exactly as shipped."""
    config = yaml.safe_load(AM_CONFIG.read_text())
    config["templates"] = [str(TEMPLATES / "*.tmpl")]
    for receiver in config["receivers"]:
        for hook in receiver.get("webhook_configs", []):
            hook["url"] = f"{webhook_url}/{receiver['name']}"

    def fast(route: dict[str, Any]) -> None:
        route["group_wait"] = "1s"
        route["group_interval"] = "1s"
        for child in route.get("routes", []):
            fast(child)

    fast(config["route"])
    return config


@dataclass
class RunningAlertmanager:
    url: str
    webhook: Webhook

    def api(self, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.url + path, data=data, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=5) as response:
            text = response.read()
        return json.loads(text) if text else None


@pytest.fixture(scope="module")
def alertmanager(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningAlertmanager]:
    if not Path(ALERTMANAGER).exists():
        pytest.skip("Debian's prometheus-alertmanager package is not installed")
    workdir = tmp_path_factory.mktemp("alertmanager")
    server, hook = start_webhook()
    config = workdir / "alertmanager.yml"
    config.write_text(yaml.safe_dump(derived_config(f"http://127.0.0.1:{server.server_address[1]}")))
    port = free_port()
    log = (workdir / "alertmanager.log").open("w")
    process = subprocess.Popen(
        [
            ALERTMANAGER,
            f"--config.file={config}",
            f"--storage.path={workdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--cluster.listen-address=",  # no gossip: one isolated instance
            "--log.level=warn",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + PATIENT_SECONDS
        while True:
            if process.poll() is not None:
                pytest.fail(f"alertmanager exited: {(workdir / 'alertmanager.log').read_text()}")
            try:
                with urllib.request.urlopen(url + "/-/ready", timeout=1) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"alertmanager not ready: {(workdir / 'alertmanager.log').read_text()}")
            time.sleep(0.1)
        yield RunningAlertmanager(url, hook)
    finally:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)
        log.close()
        server.shutdown()
        server.server_close()


def posted(labels: dict[str, str]) -> dict[str, Any]:
    now = datetime.now(UTC)
    name = labels["alertname"]
    return {
        "labels": {"job": "mssql", **labels},
        "annotations": {
            "summary": f"{name} summary on {labels['instance']}",
            "description": f"{name} description, value 42",
            "runbook_url": f"https://example.org/docs/runbooks/{name}.md",
        },
        "startsAt": (now - timedelta(minutes=1)).isoformat(),
        "endsAt": (now + timedelta(hours=1)).isoformat(),
    }


# Sources of inhibition, posted first so that the inhibitor knows them before any group flushes.
SOURCES = {
    "down-a": {"alertname": "MSSQLTargetDown", "instance": "db-a:1433", "severity": "critical"},
    "pressure-b0": {
        "alertname": "MSSQLMemoryPressure",
        "instance": "db-b:1433",
        "node": "0",
        "severity": "critical",
    },
    "remaining-crit-c1": {
        "alertname": "MSSQLSSDEnduranceRemainingLow",
        "instance": "db-c:1433",
        "pool": "p1",
        "source": "sqlserver",
        "severity": "critical",
    },
    "exhaustion-c1": {
        "alertname": "MSSQLSSDEnduranceExhaustionProjected",
        "instance": "db-c:1433",
        "pool": "p1",
        "source": "sqlserver",
        "severity": "warning",
    },
}
# Targets, with the key of the source expected to inhibit them (None: must get through).
TARGETS: dict[str, tuple[dict[str, str], str | None]] = {
    # (a) TargetDown silences everything of its instance, not another instance's alerts.
    "pressure-a0": (
        {"alertname": "MSSQLMemoryPressure", "instance": "db-a:1433", "node": "0", "severity": "critical"},
        "down-a",
    ),
    "ple-a0": (
        {
            "alertname": "MSSQLPageLifeExpectancyLow",
            "instance": "db-a:1433",
            "node": "0",
            "severity": "warning",
        },
        "down-a",
    ),
    # (d) MemoryPressure on node 0 silences that node's PLE warning and the instance's churn warnings...
    "ple-b0": (
        {
            "alertname": "MSSQLPageLifeExpectancyLow",
            "instance": "db-b:1433",
            "node": "0",
            "severity": "warning",
        },
        "pressure-b0",
    ),
    "stalls-b": (
        {"alertname": "MSSQLFreeListStalls", "instance": "db-b:1433", "severity": "warning"},
        "pressure-b0",
    ),
    "lazy-b": (
        {"alertname": "MSSQLLazyWritesHigh", "instance": "db-b:1433", "severity": "warning"},
        "pressure-b0",
    ),
    # ... but not another node's PLE warning, nor anything unrelated.
    "ple-b1": (
        {
            "alertname": "MSSQLPageLifeExpectancyLow",
            "instance": "db-b:1433",
            "node": "1",
            "severity": "warning",
        },
        None,
    ),
    "grants-b": (
        {"alertname": "MSSQLMemoryGrantsPending", "instance": "db-b:1433", "severity": "warning"},
        None,
    ),
    # (b) The critical RemainingLow silences the warning of the same pool and source only.
    "remaining-warn-c1": (
        {
            "alertname": "MSSQLSSDEnduranceRemainingLow",
            "instance": "db-c:1433",
            "pool": "p1",
            "source": "sqlserver",
            "severity": "warning",
        },
        "remaining-crit-c1",
    ),
    "remaining-warn-c2": (
        {
            "alertname": "MSSQLSSDEnduranceRemainingLow",
            "instance": "db-c:1433",
            "pool": "p2",
            "source": "sqlserver",
            "severity": "warning",
        },
        None,
    ),
    # (c) ExhaustionProjected silences BudgetHigh of the same pool and source, not of the host source.
    "budget-c1": (
        {
            "alertname": "MSSQLSSDEnduranceBudgetHigh",
            "instance": "db-c:1433",
            "pool": "p1",
            "source": "sqlserver",
            "severity": "warning",
        },
        "exhaustion-c1",
    ),
    "budget-c1-host": (
        {
            "alertname": "MSSQLSSDEnduranceBudgetHigh",
            "instance": "db-c:1433",
            "pool": "p1",
            "source": "host",
            "severity": "warning",
        },
        None,
    ),
    # Info goes to the blackhole: never inhibited, never delivered.
    "hit-ratio-b": (
        {"alertname": "MSSQLBufferCacheHitRatioLow", "instance": "db-b:1433", "severity": "info"},
        None,
    ),
}


def key_of(labels: dict[str, str]) -> str:
    everything = {**SOURCES, **{k: v for k, (v, _) in TARGETS.items()}}
    matches = [k for k, v in everything.items() if {"job": "mssql", **v} == labels]
    assert len(matches) == 1, labels
    return matches[0]


def wait_for(predicate: Callable[[], bool], timeout: float, what: str, required: bool = True) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            if required:
                pytest.fail(f"timed out waiting for {what}")
            return
        time.sleep(0.1)


@pytest.fixture(scope="module")
def delivered(alertmanager: RunningAlertmanager) -> RunningAlertmanager:
    """Post every source, wait until Alertmanager lists them, post every target, wait for delivery."""
    alertmanager.api("/api/v2/alerts", [posted(v) for v in SOURCES.values()])
    wait_for(lambda: len(alertmanager.api("/api/v2/alerts")) == len(SOURCES), 10, "the source alerts")
    alertmanager.api("/api/v2/alerts", [posted(v) for v, _ in TARGETS.values()])
    wait_for(
        lambda: len(alertmanager.api("/api/v2/alerts")) == len(SOURCES) + len(TARGETS),
        10,
        "the target alerts",
    )

    def delivered_keys() -> set[str]:
        return {key_of(a["labels"]) for p in ("/pager", "/ticket") for a in alertmanager.webhook.alerts(p)}

    expected = set(SOURCES) | {
        k for k, (labels, by) in TARGETS.items() if by is None and labels["severity"] != "info"
    }
    # Not required: if some never arrive (wrongly inhibited), the tests below say which, precisely.
    wait_for(lambda: expected <= delivered_keys(), 10, "delivery", required=False)
    # Every group has the same 1s group_wait: once the expected notifications are in, an inhibited alert
    # that slipped through would have arrived too. Leave two more group intervals for stragglers.
    time.sleep(2.5)
    return alertmanager


@needs_alertmanager
def test_inhibited_by_exactly_the_expected_source(delivered: RunningAlertmanager) -> None:
    listed = delivered.api("/api/v2/alerts")
    fingerprint_of = {key_of(a["labels"]): a["fingerprint"] for a in listed}
    status = {key_of(a["labels"]): a["status"] for a in listed}
    for key in SOURCES:
        assert status[key]["inhibitedBy"] == [], f"{key} must not be inhibited: {status[key]}"
    for key, (_, by) in TARGETS.items():
        expected = [] if by is None else [fingerprint_of[by]]
        assert status[key]["inhibitedBy"] == expected, f"{key}: expected inhibited by {by}, got {status[key]}"
        assert status[key]["state"] == ("suppressed" if by else "active"), key


@needs_alertmanager
def test_receivers_get_what_is_not_inhibited(delivered: RunningAlertmanager) -> None:
    hook = delivered.webhook
    pager = {key_of(a["labels"]) for a in hook.alerts("/pager")}
    ticket = {key_of(a["labels"]) for a in hook.alerts("/ticket")}
    assert pager == {"down-a", "pressure-b0", "remaining-crit-c1"}
    assert ticket == {"exhaustion-c1", "ple-b1", "grants-b", "remaining-warn-c2", "budget-c1-host"}
    paths = {p for p, _ in hook.received}
    assert paths <= {"/pager", "/ticket"}, f"only the two webhooks exist, got {paths}"


@needs_alertmanager
def test_notifications_are_grouped_by_alertname_and_instance(delivered: RunningAlertmanager) -> None:
    for path in ("/pager", "/ticket"):
        for message in delivered.webhook.messages(path):
            assert set(message["groupLabels"]) == {"alertname", "instance"}, message["groupLabels"]
    # One BudgetHigh group for db-c: the inhibited sqlserver alert is left out, the host one is in.
    budget = [
        m
        for m in delivered.webhook.messages("/ticket")
        if m["groupLabels"]["alertname"] == "MSSQLSSDEnduranceBudgetHigh"
    ]
    assert budget and all([a["labels"]["source"] for a in m["alerts"]] == ["host"] for m in budget)


@needs_alertmanager
@needs_amtool
def test_page_carries_the_fields_and_renders_with_the_template(
    delivered: RunningAlertmanager, tmp_path: Path
) -> None:
    messages = [
        m
        for m in delivered.webhook.messages("/pager")
        if m["groupLabels"]["alertname"] == "MSSQLMemoryPressure"
    ]
    assert len(messages) >= 1
    message = messages[0]
    assert message["groupLabels"] == {"alertname": "MSSQLMemoryPressure", "instance": "db-b:1433"}
    (alert,) = message["alerts"]
    assert alert["labels"]["node"] == "0" and alert["labels"]["severity"] == "critical"
    assert alert["annotations"] == posted(SOURCES["pressure-b0"])["annotations"]
    # The webhook body is Alertmanager's template data: render our template on what was really sent.
    title = render("mssql.title", message, tmp_path).strip()
    assert title == "[FIRING:1] CRITICAL MSSQLMemoryPressure on db-b:1433 node 0"
    body = render("mssql.text", message, tmp_path)
    assert "Summary: MSSQLMemoryPressure summary on db-b:1433" in body
    assert "Description: MSSQLMemoryPressure description, value 42" in body
    assert "Severity: critical" in body
    assert "Runbook: https://example.org/docs/runbooks/MSSQLMemoryPressure.md" in body
