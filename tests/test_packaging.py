"""The container image, the Kubernetes and systemd deployments, and the front door (README, quickstart),
checked against each other and against the bundle: split from test_compose.py along its seams (the
compose bundle's own services stay there; the shared helpers are imported from it)."""

from __future__ import annotations

import fnmatch
import json
import re
import tomllib
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from mssql_memory_exporter.config import parse_config

from alerts.spec import load as load_spec
from tests import tools
from tests.test_compose import (
    COMPOSE_DIR,
    DOCKERFILE,
    DOCKERIGNORE,
    KUBERNETES,
    QUICKSTART,
    ROOT,
    RULES_DIR,
    SECRET_VARIABLES,
    SERVICES,
    SYSTEMD_CONFIG,
    SYSTEMD_UNIT,
    dashboard_files,
    job_matches_selector,
    load_yaml,
    published_ports,
    run,
    service_secrets,
)

# -------------------------------------------------------------------------------------------- the image


def dockerfile_instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comment lines dropped."""
    instructions: list[tuple[str, str]] = []
    current = ""
    for line in text.splitlines():
        stripped = line.strip()
        if not current and (not stripped or stripped.startswith("#")):
            continue
        if current and stripped.startswith("#"):
            continue
        current += (" " if current else "") + stripped.rstrip("\\").strip()
        if not stripped.endswith("\\"):
            keyword, _, rest = current.partition(" ")
            instructions.append((keyword.upper(), rest))
            current = ""
    assert not current, "Dockerfile ends inside a continuation"
    return instructions


DOCKERFILE_TEXT = DOCKERFILE.read_text(encoding="utf-8")
INSTRUCTIONS = dockerfile_instructions(DOCKERFILE_TEXT)


def final_stage() -> list[tuple[str, str]]:
    last_from = max(i for i, (keyword, _) in enumerate(INSTRUCTIONS) if keyword == "FROM")
    return INSTRUCTIONS[last_from:]


def test_dockerfile_base_images_are_pinned_python_311_slim_bookworm() -> None:
    stages: set[str] = set()
    for keyword, args in INSTRUCTIONS:
        if keyword != "FROM":
            continue
        parts = args.split()
        image = parts[0]
        if len(parts) == 3 and parts[1].upper() == "AS":
            stages.add(parts[2])
        if image in stages:
            continue
        assert re.fullmatch(r"python:3\.11\.\d+-slim-bookworm(@sha256:[0-9a-f]{64})?", image), image


def test_dockerfile_runs_as_a_non_root_user() -> None:
    users = [args for keyword, args in final_stage() if keyword == "USER"]
    assert users, "the final stage sets no USER: the exporter would run as root"
    user = users[-1].split(":")[0]
    assert user not in ("root", "0"), users[-1]
    last_user = max(i for i, (keyword, _) in enumerate(final_stage()) if keyword == "USER")
    assert all(keyword != "RUN" for keyword, _ in final_stage()[last_user:]), (
        "RUN after USER runs as that user"
    )


def test_dockerfile_holds_no_secrets() -> None:
    for keyword, args in INSTRUCTIONS:
        if keyword in ("ENV", "ARG"):
            names = re.findall(r"(?:^|\s)([A-Za-z_][A-Za-z0-9_]*)(?==|\s|$)", args)
            for name in names:
                assert not re.search(r"PASSW|SECRET|TOKEN|CREDENTIAL|PRIVATE|API_?KEY", name, re.I), name
    # ACCEPT_EULA belongs on the apt-get line, not in the image's environment.
    assert not any(keyword == "ENV" and "ACCEPT_EULA" in args for keyword, args in INSTRUCTIONS)


def test_dockerfile_ships_odbc18_from_the_msodbc_extra_and_freetds_and_says_whose_licence() -> None:
    """Driver 18 comes from PyPI through the msodbc extra (issue 35), not from an apt repository of
    Microsoft's; the libraries it links to are installed; the labels name Microsoft's licence."""
    runs = " ".join(args for keyword, args in final_stage() if keyword == "RUN")
    assert "packages.microsoft.com" not in DOCKERFILE_TEXT and "apt-key" not in runs
    build_runs = " ".join(args for keyword, args in INSTRUCTIONS if keyword == "RUN")
    assert 'install) extras="kerberos,msodbc,entra"' in build_runs
    install = re.search(r"apt-get install [^;]*", runs)
    assert install is not None
    for package in ("unixodbc", "tdsodbc", "libkrb5-3", "libgssapi-krb5-2", "libstdc++6", "libltdl7"):
        assert re.search(rf"\b{re.escape(package)}\b", install.group(0)), package
    assert "[FreeTDS]" in runs
    for install_line in re.findall(r"apt-get install [^;]*", runs):
        assert "--no-install-recommends" in install_line, install_line
    assert "rm -rf /var/lib/apt/lists/*" in runs
    labels = " ".join(args for keyword, args in final_stage() if keyword == "LABEL")
    assert "LicenseRef-Microsoft-ODBC-Driver-18-EULA" in labels and "Microsoft ODBC Driver 18" in labels


def test_dockerfile_installs_the_package_as_the_tests_do() -> None:
    runs = [args for keyword, args in INSTRUCTIONS if keyword == "RUN"]
    # The package with its kerberos extra (python-gssapi), pinned as `make test` installs it.
    assert any('pip install -c requirements/constraints.txt ".[$extras]"' in args for args in runs)
    entrypoint = next(args for keyword, args in final_stage() if keyword == "ENTRYPOINT")
    assert json.loads(entrypoint) == ["mssql-memory-exporter"]
    assert any(keyword == "HEALTHCHECK" for keyword, _ in final_stage())


def dockerignore_excludes(path: str) -> bool:
    """Docker's .dockerignore semantics for the patterns used here: the last matching line wins, `!`
    re-includes, a pattern matching a directory matches everything below it."""
    excluded = False
    for raw in DOCKERIGNORE.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        pattern = line.lstrip("!").rstrip("/")
        parts = path.split("/")
        prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        if any(fnmatch.fnmatchcase(prefix, pattern) for prefix in prefixes) or (
            "**" in pattern and fnmatch.fnmatchcase(path, pattern.replace("**/", "*/"))
        ):
            excluded = not negate
    return excluded


def test_build_context_sends_what_the_dockerfile_copies_and_nothing_secret() -> None:
    for keyword, args in INSTRUCTIONS:
        if keyword != "COPY" or "--from=" in args:
            continue
        *sources, _ = args.split()
        for source in sources:
            assert (ROOT / source).exists(), f"COPY {source}: not in the repository"
            assert not dockerignore_excludes(source.rstrip("/")), f"COPY {source}: excluded by .dockerignore"
    for path in ("exporter/mssql_memory_exporter/app/cli.py", "pyproject.toml", "README.md"):
        assert not dockerignore_excludes(path), path
    for path in ("compose/.env", ".venv/bin/python", ".git/config", "tests/conftest.py", "build/x"):
        assert dockerignore_excludes(path), f"{path} would be sent to the Docker daemon"


# ------------------------------------------------------------------------------------- deploy manifests


def kubernetes_objects(directory: Path = KUBERNETES) -> dict[str, dict[str, Any]]:
    """The objects of a kustomization directory by kind; every manifest there must be listed in it."""
    kustomization = load_yaml(directory / "kustomization.yaml")
    objects = {}
    for resource in kustomization["resources"]:
        data = load_yaml(directory / resource)
        assert {"apiVersion", "kind", "metadata"} <= set(data), resource
        objects[data["kind"]] = data
    assert sorted(p.name for p in directory.glob("*.yaml") if p.name != "kustomization.yaml") == sorted(
        kustomization["resources"]
    ), "every manifest is listed in kustomization.yaml"
    return objects


def test_kubernetes_probes_use_ready_for_readiness_and_healthy_for_liveness(monkeypatch) -> None:
    """Readiness is /-/ready (503 while starting or stopping), liveness /-/healthy; both are paths a
    running exporter answers 200 on its container port."""
    import threading
    import urllib.request

    from mssql_memory_exporter.web import make_server

    from tests.test_web import PASSWORD_ENV, FakeProbe, make_config

    containers = [
        container
        for directory, kind in ((KUBERNETES, "Deployment"), (KUBERNETES / "drive-health", "DaemonSet"))
        for container in kubernetes_objects(directory)[kind]["spec"]["template"]["spec"]["containers"]
    ]
    paths = set()
    for container in containers:
        port_names = {port["name"] for port in container["ports"]}
        assert container["readinessProbe"]["httpGet"]["path"] == "/-/ready", container["name"]
        if "livenessProbe" in container:
            assert container["livenessProbe"]["httpGet"]["path"] == "/-/healthy", container["name"]
        for kind in ("readinessProbe", "livenessProbe"):
            if kind in container:
                assert container[kind]["httpGet"]["port"] in port_names
                paths.add(container[kind]["httpGet"]["path"])
    monkeypatch.setenv(PASSWORD_ENV, "pw")
    server = make_server(make_config(), FakeProbe(), "127.0.0.1:0")
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        for path in sorted(paths):
            url = f"http://127.0.0.1:{server.server_address[1]}{path}"
            with urllib.request.urlopen(url, timeout=10) as response:
                assert response.status == 200, path
    finally:
        server.shutdown()
        server.server_close()


def test_prometheusrule_carries_exactly_the_groups_of_alerts_rules() -> None:
    from deploy import prometheusrule

    rule = load_yaml(KUBERNETES / "prometheusrule.yaml")
    assert rule["apiVersion"] == "monitoring.coreos.com/v1" and rule["kind"] == "PrometheusRule"
    expected = [
        group for path in sorted(RULES_DIR.glob("*.rules.yml")) for group in load_yaml(path)["groups"]
    ]
    assert rule["spec"]["groups"] == expected, "stale: run python -m deploy.prometheusrule"
    assert prometheusrule.main(["--check"]) == 0, "stale: run python -m deploy.prometheusrule"


def test_kubernetes_objects_reference_each_other(tmp_path: Path) -> None:
    objects = kubernetes_objects()
    deployment, service, monitor = objects["Deployment"], objects["Service"], objects["ServiceMonitor"]
    pod = deployment["spec"]["template"]
    pod_labels = pod["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    assert service["spec"]["selector"].items() <= pod_labels.items()
    [container] = pod["spec"]["containers"]
    port_names = {port["name"] for port in container["ports"]}
    service_ports = {port["name"]: port for port in service["spec"]["ports"]}
    assert all(port["targetPort"] in port_names for port in service_ports.values())
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert all(endpoint["port"] in service_ports for endpoint in monitor["spec"]["endpoints"])

    # Non-root, read-only, as the image expects.
    security = pod["spec"]["securityContext"]
    assert security["runAsNonRoot"] and security["runAsUser"] == 65532
    assert "USER 65532:65532" in DOCKERFILE_TEXT
    assert container["securityContext"]["readOnlyRootFilesystem"] is True

    # Every endpoint's job is the Service's name unless a relabeling sets it: the /probe endpoints must
    # land on the rules' SQL Server selector and /metrics on the exporter's own, never the other way.
    spec = load_spec()
    assert "jobLabel" not in monitor["spec"]
    for endpoint in monitor["spec"]["endpoints"]:
        job = service["metadata"]["name"]
        for relabel in endpoint.get("relabelings", []):
            if relabel.get("targetLabel") == "job":
                job = relabel["replacement"]
        probe = endpoint["path"] == "/probe"
        assert job_matches_selector(job, spec.selector) is probe, (endpoint["path"], job)
        assert job_matches_selector(job, spec.exporter_selector) is not probe, (endpoint["path"], job)

    # The ConfigMap's exporter config loads; its password file is the mounted Secret's key.
    config_map = objects["ConfigMap"]
    volumes = {volume["name"]: volume for volume in pod["spec"]["volumes"]}
    mounts = {mount["name"]: mount["mountPath"] for mount in container["volumeMounts"]}
    config_mount = next(name for name, v in volumes.items() if "configMap" in v)
    assert volumes[config_mount]["configMap"]["name"] == config_map["metadata"]["name"]
    config_arg = next(a for a in container["args"] if a.startswith("--config.file="))
    [(file_name, config_text)] = config_map["data"].items()
    assert config_arg.split("=", 1)[1] == f"{mounts[config_mount]}/{file_name}"
    data = yaml.safe_load(config_text)
    secret_mount = next(name for name, v in volumes.items() if "secret" in v)
    for module in data["auth_modules"].values():
        directory, _, key = module["password_file"].rpartition("/")
        assert directory == mounts[secret_mount], module["password_file"]
        module["password_file"] = str(tmp_path / key)
        (tmp_path / key).write_text("placeholder", encoding="utf-8")
    config = parse_config(data, source="deploy/kubernetes/configmap.yaml")

    probed = [e["params"]["target"][0] for e in monitor["spec"]["endpoints"] if e.get("path") == "/probe"]
    assert sorted(probed) == sorted(config.targets), "one /probe endpoint per configured target"
    for endpoint in monitor["spec"]["endpoints"]:
        if endpoint.get("path") == "/probe":
            instance = [r for r in endpoint["relabelings"] if r["targetLabel"] == "instance"]
            assert instance == [{"targetLabel": "instance", "replacement": endpoint["params"]["target"][0]}]


def test_systemd_unit_and_its_config_agree() -> None:
    unit = SYSTEMD_UNIT.read_text(encoding="utf-8")
    credential = re.search(r"^LoadCredential=(\w+):(\S+)$", unit, re.M)
    assert credential
    data = load_yaml(SYSTEMD_CONFIG)
    expected = f"/run/credentials/{SYSTEMD_UNIT.name}/{credential.group(1)}"
    assert [m["password_file"] for m in data["auth_modules"].values()] == [expected]
    exec_start = re.search(r"^ExecStart=((?:.*\\\n)*.*)$", unit, re.M)
    assert exec_start
    flags = re.findall(r"(--[\w.-]+)=", exec_start.group(1))
    assert set(flags) <= {"--config.file", "--web.listen-address", "--web.config.file"}
    assert re.search(r"^(DynamicUser=yes|User=\w+)$", unit, re.M), "never as root"


def test_systemd_unit_checks_the_config_before_starting_and_reloads_with_sighup() -> None:
    unit = SYSTEMD_UNIT.read_text(encoding="utf-8")
    commands = {
        key: value.replace("\\\n", " ").split()
        for key, value in re.findall(r"^(ExecStart(?:Pre)?|ExecReload)=((?:.*\\\n)*.*)$", unit, re.M)
    }
    start, pre = commands["ExecStart"], commands["ExecStartPre"]
    assert pre[0] == start[0] and "--config.check" in pre
    config = [flag for flag in start if flag.startswith("--config.file=")]
    assert config and config[0] in pre  # the file checked is the file served
    assert commands["ExecReload"] == ["/bin/kill", "-HUP", "$MAINPID"]


@tools.needs(tools.SYSTEMD_ANALYZE)
def test_systemd_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    # verify insists that ExecStart's program exists; the virtualenv is not installed on this machine.
    unit = tmp_path / SYSTEMD_UNIT.name
    text = SYSTEMD_UNIT.read_text(encoding="utf-8")
    text = re.sub(r"^(ExecStart(?:Pre)?)=\S+", r"\1=/bin/true", text, flags=re.M)
    unit.write_text(text, encoding="utf-8")
    result = run(["systemd-analyze", "verify", str(unit)])
    problems = [line for line in (result.stdout + result.stderr).splitlines() if unit.name in line]
    assert result.returncode == 0 and not problems, "\n".join(problems) or result.stderr


# ------------------------------------------------------------------------------------------------- docs


def test_readme_keeps_its_two_commands_first_and_points_to_the_quickstart() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    first_block = readme.split("```sh\n", 1)[1].split("```", 1)[0].splitlines()
    assert [line.split()[:2] for line in first_block] == [["make", "run"], ["make", "test"]]
    head = readme[: readme.index("## ")]
    assert "docs/quickstart.md" in head and "docker compose -f compose/compose.yaml up -d --build" in head


def test_readmes_summary_of_the_bundle_agrees_with_the_bundle_and_the_quickstart() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    head = readme[: readme.index("## ")]
    summary = head.split("In short, once it is up:\n", 1)[1]
    grafana = re.search(r"<http://localhost:(\d+)>, user `(\w+)`, password `(\w+)`", summary)
    assert grafana, summary
    assert int(grafana.group(1)) == published_ports("grafana")[3000]
    assert grafana.group(2) == SERVICES["grafana"]["environment"]["GF_SECURITY_ADMIN_USER"]
    assert grafana.group(3) in SECRET_VARIABLES and "grafana_admin_password" in service_secrets("grafana")
    titles = {json.loads(path.read_text(encoding="utf-8"))["title"] for path in dashboard_files()}
    dashboard = re.search(r"dashboard \*([^*]+)\*, Instance `([\w-]+)`", summary)
    assert dashboard and dashboard.group(1) in titles
    assert dashboard.group(2) in load_yaml(COMPOSE_DIR / "exporter" / "mssql-exporter.yml")["targets"]
    quickstart = QUICKSTART.read_text(encoding="utf-8")
    assert f"*{dashboard.group(1)}*.**" in quickstart, "the quickstart's 'Open first' names the same one"
    alert = re.search(r"\*\*(MSSQL\w+)\*\* \((\w+)\) fires about (\d+) minutes", summary)
    assert alert
    row = rf"\| ~{alert.group(3)} min \| \*\*{alert.group(1)}\*\* \({alert.group(2)}\)"
    assert re.search(row, quickstart), "the quickstart's alert table says the same"


def test_quickstart_matches_the_bundle() -> None:
    text = QUICKSTART.read_text(encoding="utf-8")
    assert "docker compose -f compose/compose.yaml up -d --build" in text
    assert "cp compose/.env.example compose/.env" in text
    host_ports = {port for name in SERVICES for port in published_ports(name).values()}
    for port in re.findall(r"http://localhost:(\d+)", text):
        assert int(port) in host_ports, (
            f"quickstart mentions localhost:{port}, which compose does not publish"
        )
    rules = load_yaml(RULES_DIR / "mssql.alerts.rules.yml")
    alerts = {rule["alert"] for group in rules["groups"] for rule in group["rules"]}
    for name in set(re.findall(r"\bMSSQL[A-Za-z]+\b", text)):
        assert name in alerts, f"quickstart names {name}, which is not an alert"
    exporter_targets = load_yaml(COMPOSE_DIR / "exporter" / "mssql-exporter.yml")["targets"]
    assert all(f"target={name}" in text for name in exporter_targets)
    for variable in SECRET_VARIABLES:
        assert variable in text


def test_quickstart_start_order_is_compose_depends_on() -> None:
    text = QUICKSTART.read_text(encoding="utf-8")
    table = text.split("| Service | Starts when |\n|---|---|\n", 1)[1].split("\n\n", 1)[0]
    documented: dict[str, set[str]] = {}
    for row in table.splitlines():
        service, when = (cell.strip() for cell in row.strip("|").split("|"))
        documented[service.strip("`")] = set(re.findall(r"`([\w-]+)`", when))
    actual = {name: set(service.get("depends_on", {})) for name, service in SERVICES.items()}
    assert documented == actual
    for row in table.splitlines():
        service, when = (cell.strip().strip("`") for cell in row.strip("|").split("|"))
        for dependency, spec in SERVICES[service].get("depends_on", {}).items():
            phrase = "has exited 0" if spec["condition"] == "service_completed_successfully" else "healthy"
            assert phrase in when, f"{service}: waits for {dependency} ({spec['condition']}): {when}"


def test_the_writer_loop_dirties_one_page_per_row_and_outpaces_the_lazy_write_threshold() -> None:
    """The lazy-write half of MSSQLMemoryPressure needs pages dirtied faster than the threshold; the OLTP
    loops dirty one page per iteration. writes.sql updates rows far enough apart to be on distinct pages."""
    sql = (COMPOSE_DIR / "workload" / "writes.sql").read_text(encoding="utf-8")
    rows = re.search(r"DECLARE @rows bigint = (\d+);", sql)
    repeat = re.search(r"^GO (\d+)$", sql, re.M)
    assert rows and repeat
    demo_rows = int(SERVICES["mssql-init"]["environment"]["DEMO_ROWS"])
    rows_per_page = 8096 // 250  # a page's row space over about 250 bytes a row (init/04-demo-db.sql)
    assert demo_rows // int(rows.group(1)) > rows_per_page, "updated rows would share pages"
    # A batch must dirty more pages than the threshold's whole per-second rate for half a minute: the
    # margin covers the pages a checkpoint writes first, which are not lazy writes.
    lazy_writes_max = load_spec().memory.lazy_writes_per_second.max
    assert int(rows.group(1)) >= 30 * lazy_writes_max
    workload = (COMPOSE_DIR / "workload" / "workload.sh").read_text(encoding="utf-8")
    assert re.search(r'run_loop "writes-\$i" writes\.sql 0 &', workload)
    assert int(SERVICES["workload"]["environment"]["WRITE_WORKERS"]) >= 1


def test_quickstart_endurance_rates_follow_from_the_demo_pool_and_the_spec() -> None:
    text = " ".join(QUICKSTART.read_text(encoding="utf-8").split())
    spec = load_spec()
    [pool] = load_yaml(COMPOSE_DIR / "exporter" / "mssql-exporter.yml")["targets"]["sql2022-demo"][
        "ssd_pools"
    ].values()
    rated = pool["drives"]["count"] * pool["drives"]["tbw_per_drive_tb"] * 10**12
    life = pool["planned_lifetime_years"] * 365.25 * 86400
    assert f"rated {rated / 1e12:,.0f} TB over {pool['planned_lifetime_years']} years" in text

    def stated(alert: str) -> float:
        found = re.search(rf"\*\*{alert}\*\* needs a 7-day average above about ([\d.]+) MB/s", text)
        if found is None:
            found = re.search(rf"\*\*{alert}\*\* above about ([\d.]+) MB/s", text)
        assert found, alert
        return float(found.group(1))

    budget = spec.endurance.budget_high_share * rated / life / 1e6
    exhaustion = spec.endurance.exhaustion_share * rated / life / 1e6
    assert stated("MSSQLSSDEnduranceBudgetHigh") == round(budget, 1)
    assert stated("MSSQLSSDEnduranceExhaustionProjected") == round(exhaustion, 1)

    # Remaining life: rated bytes over (age + limit) at the stated date.
    warning = re.search(r"about ([\d.]+) MB/s on (\d{4}-\d\d-\d\d), and within 7 days", text)
    critical = re.search(r"\(critical\) above about ([\d.]+) MB/s on the same day", text)
    assert warning and critical
    on = datetime.fromisoformat(warning.group(2)).replace(tzinfo=UTC).timestamp()
    in_service = datetime.fromisoformat(str(pool["in_service_date"])).replace(tzinfo=UTC).timestamp()
    assert f"in service since {pool['in_service_date']}" in text
    for found, limit in (
        (warning, spec.endurance.remaining_warning_seconds),
        (critical, spec.endurance.remaining_critical_seconds),
    ):
        assert float(found.group(1)) == round(rated / (on - in_service + limit) / 1e6, 1)
    assert f"within {spec.endurance.remaining_warning_seconds / 86400:.0f} days" in text


def test_quickstart_names_every_bundled_dashboard() -> None:
    text = QUICKSTART.read_text(encoding="utf-8")
    for path in dashboard_files():
        title = json.loads(path.read_text(encoding="utf-8"))["title"]
        assert title in text, (
            f"docs/quickstart.md does not say what the dashboard {title!r} ({path.name}) shows"
        )


# ------------------------------------------------------------------------------------------ the version


def test_the_version_is_written_once_and_every_image_tag_follows_it() -> None:
    """pyproject.toml reads the version from the package (issue 34: it was written twice); the manifests'
    image tags and the docs' build and log examples are copies a test can hold to it."""
    from mssql_memory_exporter import __version__

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" not in project["project"] and project["project"]["dynamic"] == ["version"]
    attr = project["tool"]["setuptools"]["dynamic"]["version"]["attr"]
    assert attr == "mssql_memory_exporter.__version__"
    pages = [*sorted((ROOT / "deploy" / "kubernetes").rglob("*.yaml")), ROOT / "docs" / "deploy.md"]
    pages.append(ROOT / "docs" / "configuration.md")
    tag = re.compile(r"(?:mssql-memory-exporter(?:-smartctl)?:|newTag: |starting version=)(\d+\.\d+\.\d+)")
    found = {(page.relative_to(ROOT).as_posix(), v) for page in pages for v in tag.findall(page.read_text())}
    assert found, "no image tag found: the pattern no longer matches the manifests"
    assert {v for _, v in found} == {__version__}, sorted(f for f in found if f[1] != __version__)
