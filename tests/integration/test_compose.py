"""The compose bundle, the exporter image and the deploy manifests, validated without a Docker engine.

No Docker engine runs on CI machines, so nothing here starts a container. Instead, each file is checked
by the tool that will read it, fed the way that tool will see it:

- compose/compose.yaml against the Compose Specification's JSON schema (the copy check-jsonschema ships,
  `--builtin-schema vendor.compose-spec`), before and after `${VAR}` interpolation with the values of
  compose/.env.example; then what `docker compose config` would refuse (unknown services, volumes,
  secrets, dependency conditions) and what the bundle promises (pinned images, health checks, passwords
  only as secrets, tempdb on its own volume, every mounted or built path present in the repository).
- Each service's files are copied into a temporary tree at the paths compose mounts them, so
  `promtool check config`, `amtool check-config`, the exporter's own config loader and the Grafana
  provisioning checks resolve relative paths exactly as the containers would.
- The init and workload SQL is parsed with sqlfluff's T-SQL grammar; the login it creates is compared with
  docs/permissions.md.
- The Dockerfile is linted in Python (hadolint is not packaged for Debian 12): pinned base, non-root
  user, no secrets in ENV/ARG, ODBC Driver 18 from Microsoft's repository with a signed-by keyring,
  FreeTDS as fallback, the same pip install as `make test`.
- deploy/: the PrometheusRule equals alerts/rules, the Kubernetes objects reference each other correctly,
  the systemd unit passes `systemd-analyze verify`.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping
from datetime import date
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from mssql_memory_exporter.config import parse_config

from alerts.spec import duration_seconds
from alerts.spec import load as load_spec
from tests import tools

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_DIR = ROOT / "compose"
COMPOSE_FILE = COMPOSE_DIR / "compose.yaml"
ENV_EXAMPLE = COMPOSE_DIR / ".env.example"
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
DASHBOARDS = ROOT / "dashboards"
RULES_DIR = ROOT / "alerts" / "rules"
KUBERNETES = ROOT / "deploy" / "kubernetes"
SYSTEMD_UNIT = ROOT / "deploy" / "systemd" / "mssql-memory-exporter.service"
SYSTEMD_CONFIG = ROOT / "deploy" / "systemd" / "mssql-exporter.yml"
QUICKSTART = ROOT / "docs" / "quickstart.md"
PERMISSIONS_DOC = ROOT / "docs" / "permissions.md"
VENV_BIN = Path(sys.executable).parent

THANOS_DATASOURCE_UID = "mssql-thanos-query"  # dashboards/provisioning/datasources/thanos-query.yml

# The values compose/.env leaves to the user; the tests fill them with placeholders.
SECRET_VARIABLES = {"MSSQL_SA_PASSWORD", "MSSQL_MONITOR_PASSWORD", "GRAFANA_ADMIN_PASSWORD"}


# ------------------------------------------------------------------------------------------------ loading


def load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def env_example() -> dict[str, str]:
    """compose/.env.example as Compose reads it: KEY=VALUE lines, # comments."""
    values: dict[str, str] = {}
    for line in ENV_EXAMPLE.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        assert sep, f".env.example: not KEY=VALUE: {line!r}"
        values[key.strip()] = value.strip()
    return values


_VARIABLE = re.compile(r"\$(?:(?P<escaped>\$)|\{(?P<braced>[^}]*)\}|(?P<plain>[A-Za-z_][A-Za-z0-9_]*))")
_BRACED = re.compile(r"(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:-|-|:\?|\?|:\+|\+)(?P<arg>.*))?", re.S)


def interpolate(text: str, env: Mapping[str, str]) -> str:
    """Compose's interpolation: $$, $VAR, ${VAR}, ${VAR:-default}, ${VAR-default}, ${VAR:?error}."""

    def substitute(match: re.Match[str]) -> str:
        if match.group("escaped"):
            return "$"
        if match.group("plain"):
            return env.get(match.group("plain"), "")
        braced = _BRACED.fullmatch(match.group("braced"))
        assert braced, f"unsupported interpolation {match.group(0)!r}"
        name, op, arg = braced.group("name", "op", "arg")
        value = env.get(name)
        if op == ":-":
            return value if value else arg
        if op == "-":
            return value if value is not None else arg
        if op in (":?", "?"):
            assert value, f"{name} is required: {arg}"
            return value
        if op in (":+", "+"):
            return arg if value else ""
        return value or ""

    return _VARIABLE.sub(substitute, text)


def variables_in(text: str) -> set[str]:
    names = set()
    for match in _VARIABLE.finditer(text):
        if match.group("plain"):
            names.add(match.group("plain"))
        elif match.group("braced"):
            braced = _BRACED.fullmatch(match.group("braced"))
            assert braced, match.group(0)
            names.add(braced.group("name"))
    return names


def walk_strings(node: Any) -> Iterator[str]:
    if isinstance(node, str):
        yield node
    elif isinstance(node, Mapping):
        for value in node.values():
            yield from walk_strings(value)
    elif isinstance(node, list):
        for item in node:
            yield from walk_strings(item)


def map_strings(node: Any, func: Any) -> Any:
    if isinstance(node, str):
        return func(node)
    if isinstance(node, Mapping):
        return {key: map_strings(value, func) for key, value in node.items()}
    if isinstance(node, list):
        return [map_strings(item, func) for item in node]
    return node


def example_env() -> dict[str, str]:
    """The environment of a user who copied .env.example and set the passwords."""
    env = env_example()
    for name in SECRET_VARIABLES:
        env[name] = f"Placeholder-{name}-1a"
    return env


RAW = load_yaml(COMPOSE_FILE)
COMPOSE: dict[str, Any] = map_strings(RAW, lambda text: interpolate(text, example_env()))
SERVICES: dict[str, dict[str, Any]] = COMPOSE["services"]


def service_volumes(service: str) -> list[tuple[str, str, bool]]:
    """(source, target, is_bind) of every volume of a service, short or long syntax."""
    mounts = []
    for volume in SERVICES[service].get("volumes", []):
        if isinstance(volume, str):
            source, target, *_ = volume.split(":")
            mounts.append((source, target, source.startswith((".", "/"))))
        else:
            mounts.append((volume["source"], volume["target"], volume.get("type") == "bind"))
    return mounts


def service_secrets(service: str) -> dict[str, str]:
    """secret name -> path inside the container."""
    paths = {}
    for entry in SERVICES[service].get("secrets", []):
        name = entry if isinstance(entry, str) else entry["source"]
        target = name if isinstance(entry, str) else entry.get("target", name)
        paths[name] = target if target.startswith("/") else f"/run/secrets/{target}"
    return paths


def is_one_shot(service: str) -> bool:
    return SERVICES[service].get("restart", "no") == "no"


def container_view(service: str, root: Path) -> Path:
    """Copy what compose mounts into `service` to root/<target>, and its secrets as placeholder files.
    Mounts are applied shortest target first, as Docker nests them."""
    for source, target, is_bind in sorted(service_volumes(service), key=lambda mount: len(mount[1])):
        if not is_bind:
            (root / target.lstrip("/")).mkdir(parents=True, exist_ok=True)
            continue
        src = (COMPOSE_DIR / source).resolve()
        dst = root / target.lstrip("/")
        if src.is_dir():
            shutil.copytree(src, dst, dirs_exist_ok=True)
        elif src.is_file():
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dst)
        else:
            pytest.fail(f"{service} mounts {source}, which is not in the repository")
    for name, path in service_secrets(service).items():
        file = root / path.lstrip("/")
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(f"placeholder-{name}", encoding="utf-8")
    return root


def published_ports(service: str) -> dict[int, int]:
    """container port -> host port."""
    ports = {}
    for entry in SERVICES[service].get("ports", []):
        *_, host, container = str(entry).split(":")
        ports[int(container)] = int(host)
    return ports


def run(cmd: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False, **kwargs)


# ------------------------------------------------------------------------- the Compose Specification


def check_jsonschema(path: Path) -> subprocess.CompletedProcess[str]:
    tool = VENV_BIN / "check-jsonschema"
    assert tool.exists(), "check-jsonschema comes with the test extras (pip install -e '.[test]')"
    return run([str(tool), "--builtin-schema", "vendor.compose-spec", str(path)])


def test_compose_file_follows_the_compose_specification(tmp_path: Path) -> None:
    as_written = check_jsonschema(COMPOSE_FILE)
    assert as_written.returncode == 0, as_written.stdout + as_written.stderr
    # Interpolated with .env.example's values, as Compose validates it.
    interpolated = tmp_path / "compose.yaml"
    interpolated.write_text(yaml.safe_dump(COMPOSE, sort_keys=False), encoding="utf-8")
    result = check_jsonschema(interpolated)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_schema_check_catches_a_misspelt_key(tmp_path: Path) -> None:
    broken = json.loads(json.dumps(RAW))
    broken["services"]["mssql"]["helthcheck"] = broken["services"]["mssql"].pop("healthcheck")
    path = tmp_path / "compose.yaml"
    path.write_text(yaml.safe_dump(broken), encoding="utf-8")
    result = check_jsonschema(path)
    assert result.returncode != 0 and "helthcheck" in result.stdout


def test_every_variable_is_in_env_example_and_every_secret_is_left_blank() -> None:
    used = set().union(*(variables_in(text) for text in walk_strings(RAW)))
    secret_sources = {secret["environment"] for secret in RAW["secrets"].values()}
    documented = env_example()
    assert used | secret_sources <= documented.keys(), "not in .env.example: " + ", ".join(
        sorted((used | secret_sources) - documented.keys())
    )
    assert documented.keys() <= used | secret_sources, "unused in compose.yaml: " + ", ".join(
        sorted(documented.keys() - used - secret_sources)
    )
    assert secret_sources == SECRET_VARIABLES
    for name in secret_sources:
        assert documented[name] == "", f".env.example must not ship a value for {name}"
    assert not used & SECRET_VARIABLES, "passwords must not be interpolated into compose.yaml"


def test_the_env_file_is_ignored_by_git() -> None:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    assert run(["git", "-C", str(ROOT), "check-ignore", "-q", "compose/.env"]).returncode == 0
    assert run(["git", "-C", str(ROOT), "check-ignore", "-q", "compose/.env.example"]).returncode == 1


def test_references_between_services_volumes_and_secrets_resolve() -> None:
    volumes_declared = set(COMPOSE.get("volumes", {}))
    secrets_declared = set(COMPOSE.get("secrets", {}))
    volumes_used: set[str] = set()
    secrets_used: set[str] = set()
    for name, service in SERVICES.items():
        for source, _, is_bind in service_volumes(name):
            if not is_bind:
                assert source in volumes_declared, f"{name}: volume {source} is not declared"
                volumes_used.add(source)
        for secret in service_secrets(name):
            assert secret in secrets_declared, f"{name}: secret {secret} is not declared"
            secrets_used.add(secret)
        for dependency, spec in service.get("depends_on", {}).items():
            assert dependency in SERVICES, f"{name} depends on unknown service {dependency}"
            condition = spec["condition"]
            if condition == "service_healthy":
                assert "healthcheck" in SERVICES[dependency], f"{name} waits for {dependency} to be healthy"
            if condition == "service_completed_successfully":
                assert is_one_shot(dependency), f"{name} waits for {dependency} to finish"
    assert volumes_used == volumes_declared
    assert secrets_used == secrets_declared
    for secret in COMPOSE["secrets"].values():
        assert set(secret) == {"environment"}, "secrets come from compose/.env, not from files"


def mounted_paths() -> list[tuple[str, Path]]:
    paths = []
    for name, service in SERVICES.items():
        for source, _, is_bind in service_volumes(name):
            if is_bind:
                paths.append((f"{name}:{source}", (COMPOSE_DIR / source).resolve()))
        if "build" in service:
            build = service["build"]
            context = (COMPOSE_DIR / build["context"]).resolve()
            paths.append((f"{name}:build", context))
            paths.append((f"{name}:dockerfile", context / build.get("dockerfile", "Dockerfile")))
    for kind in ("secrets", "configs"):
        for name, spec in COMPOSE.get(kind, {}).items():
            if "file" in spec:
                paths.append((f"{kind}:{name}", (COMPOSE_DIR / spec["file"]).resolve()))
    return paths


@pytest.mark.parametrize(("what", "path"), mounted_paths(), ids=[what for what, _ in mounted_paths()])
def test_every_mounted_or_built_path_is_in_the_repository(what: str, path: Path) -> None:
    assert path.exists(), f"{what}: {path.relative_to(ROOT)} does not exist"
    assert ROOT in path.parents or path == ROOT, f"{what}: {path} is outside the repository"


def test_images_are_pinned() -> None:
    for name, service in SERVICES.items():
        image = service["image"]
        if "build" in service:
            assert image.endswith(":local"), f"{name}: the built image gets a local name"
            continue
        repository, _, tag = image.rpartition(":")
        assert repository and "/" not in tag, f"{name}: {image} has no tag"
        assert tag != "latest" and re.search(r"\d+\.\d+|CU\d+", tag), f"{name}: {image} is not pinned"
    sqlserver = SERVICES["mssql"]["image"]
    assert re.fullmatch(r"mcr\.microsoft\.com/mssql/server:2022-CU\d+-ubuntu-22\.04", sqlserver)
    assert {SERVICES[name]["image"] for name in ("mssql-volumes", "mssql-init", "workload")} == {sqlserver}


def test_long_running_services_have_health_checks_and_one_shots_do_not_restart() -> None:
    one_shots = {name for name in SERVICES if is_one_shot(name)}
    assert one_shots == {"mssql-volumes", "mssql-init", "thanos-bucket-volume", "prometheus-long-term"}
    for name, service in SERVICES.items():
        if name in one_shots:
            continue
        assert service["restart"] == "unless-stopped"
        test = service["healthcheck"]["test"]
        assert test[0] in ("CMD", "CMD-SHELL"), f"{name}: health check {test}"


def test_passwords_travel_only_as_secret_files() -> None:
    for name, service in SERVICES.items():
        for key, value in (service.get("environment") or {}).items():
            if "PASSWORD" in key:
                assert key.endswith("__FILE") and str(value).startswith("/run/secrets/"), f"{name}: {key}"
        argv = [*service.get("entrypoint", []), *service.get("command", [])]
        argv += service.get("healthcheck", {}).get("test", [])
        for arg in argv:
            assert not re.search(r"(^|\s)-P(\s|$)", str(arg)), f"{name}: a password flag on a command line"
    scripts = [*COMPOSE_DIR.glob("**/*.sh")]
    assert scripts
    for script in scripts:
        text = script.read_text(encoding="utf-8")
        password_flag = re.search(r"^.*(?i:sqlcmd).*\s-P(\s|$)", text, re.M)
        assert not password_flag, f"{script.name}: sqlcmd -P puts the password where ps shows it"
    # The SQL Server image reads its sa password only from MSSQL_SA_PASSWORD: the wrapper exports it from
    # the secret file inside the container.
    entrypoint = (COMPOSE_DIR / "mssql" / "entrypoint.sh").read_text(encoding="utf-8")
    assert "read_secret mssql_sa_password" in entrypoint and "export MSSQL_SA_PASSWORD" in entrypoint


def read_only_services_given_copied_files(compose: Mapping[str, Any]) -> list[str]:
    """Services with a read-only root filesystem that list a secret or config whose value Compose
    copies into the container (`environment:` or `content:` sourced) rather than bind-mounting (`file:`).
    Docker refuses that copy ("container rootfs is marked read-only", docker/compose#12303 and #12031),
    so such a service never starts, and every service that waits for it to be healthy never starts."""
    problems = []
    for name, service in compose["services"].items():
        if not service.get("read_only"):
            continue
        for kind in ("secrets", "configs"):
            for entry in service.get(kind, []):
                source = entry if isinstance(entry, str) else entry["source"]
                definition = compose.get(kind, {}).get(source, {})
                copied = sorted({"environment", "content"} & set(definition))
                if copied:
                    problems.append(f"{name}: read_only with {kind[:-1]} {source} from {copied[0]}:")
    return problems


def test_no_read_only_service_is_given_a_secret_or_config_compose_must_copy_in() -> None:
    assert not read_only_services_given_copied_files(COMPOSE)
    # The check sees the combination that kept the exporter from starting.
    broken = json.loads(json.dumps(COMPOSE))
    broken["services"]["exporter"]["read_only"] = True
    assert read_only_services_given_copied_files(broken) == [
        "exporter: read_only with secret mssql_monitor_password from environment:"
    ]
    broken["configs"] = {"extra": {"content": "x"}}
    broken["services"]["alert-receiver"]["configs"] = [{"source": "extra", "target": "/x"}]
    assert "alert-receiver: read_only with config extra from content:" in (
        read_only_services_given_copied_files(broken)
    )


def test_the_exporter_keeps_its_hardening_without_a_read_only_root() -> None:
    exporter = SERVICES["exporter"]
    assert exporter["cap_drop"] == ["ALL"]
    assert "no-new-privileges:true" in exporter["security_opt"]
    assert "user" not in exporter or str(exporter["user"]).split(":")[0] not in ("0", "root")
    assert re.search(r"^USER 65532:65532$", DOCKERFILE.read_text(encoding="utf-8"), re.M)


def test_shell_scripts_parse() -> None:
    for script in sorted(COMPOSE_DIR.glob("**/*.sh")):
        result = run(["bash", "-n", str(script)])
        assert result.returncode == 0, f"{script.relative_to(ROOT)}: {result.stderr}"


# ----------------------------------------------------------------------------- SQL Server and its demo


def test_sql_server_is_developer_edition_with_a_buffer_pool_smaller_than_the_demo_data() -> None:
    mssql = SERVICES["mssql"]["environment"]
    init = SERVICES["mssql-init"]["environment"]
    assert mssql["ACCEPT_EULA"] == "Y" and mssql["MSSQL_PID"] == "Developer"
    process_mb = int(mssql["MSSQL_MEMORY_LIMIT_MB"])
    buffer_pool_mb = int(init["MAX_SERVER_MEMORY_MB"])
    assert process_mb >= 2048, "SQL Server on Linux does not start below 2048 MB"
    assert buffer_pool_mb < process_mb
    demo_mb = int(init["DEMO_ROWS"]) * 250 / 2**20  # about 250 bytes a row (compose/init/04-demo-db.sql)
    assert demo_mb > 2.5 * buffer_pool_mb, "the demo data must overflow the buffer pool several times"


def test_tempdb_has_its_own_named_volume_that_init_moves_it_to() -> None:
    tempdb_dir = SERVICES["mssql-init"]["environment"]["TEMPDB_DIR"]
    mounts = {target: source for source, target, is_bind in service_volumes("mssql") if not is_bind}
    assert tempdb_dir in mounts and mounts[tempdb_dir] != mounts["/var/opt/mssql"]
    volume_fix = SERVICES["mssql-volumes"]
    assert (mounts[tempdb_dir], tempdb_dir, False) in service_volumes("mssql-volumes")
    assert tempdb_dir in " ".join(volume_fix["entrypoint"]) and "10001" in " ".join(volume_fix["entrypoint"])


SQLCMD_VARIABLE = re.compile(r"\$\((\w+)\)")


def test_sqlcmd_variables_of_the_init_scripts_are_all_provided() -> None:
    init_sh = (COMPOSE_DIR / "init" / "init.sh").read_text(encoding="utf-8")
    exported = set(re.findall(r"^export (\w+)=", init_sh, re.M))
    for script in sorted((COMPOSE_DIR / "init").glob("*.sql")):
        for name in SQLCMD_VARIABLE.findall(script.read_text(encoding="utf-8")):
            assert name in exported, f"{script.name} uses $({name}), which init.sh does not export"
        assert script.name in init_sh, f"init.sh does not run {script.name}"
    for script in (COMPOSE_DIR / "workload").glob("*.sql"):
        assert not SQLCMD_VARIABLE.search(script.read_text(encoding="utf-8")), script.name
    # Values that reach SQL through the environment of mssql-init, not through the command line.
    assert set(SERVICES["mssql-init"]["environment"]) >= {"MAX_SERVER_MEMORY_MB", "DEMO_ROWS", "TEMPDB_DIR"}


# Statements that are valid T-SQL (each documented by Microsoft) but that sqlfluff's T-SQL grammar does not
# know; they are replaced by a statement it does know before parsing. Everything else must parse.
TSQL_GRAMMAR_GAPS = [
    re.compile(r"^\s*CHECKPOINT;", re.M),
    re.compile(r"^\s*REVERT;", re.M),
    re.compile(r"^\s*EXECUTE AS LOGIN = N'[^']*';", re.M),
    re.compile(r"^\s*(ELSE\s+)?ALTER LOGIN \[[^\]]+\] WITH PASSWORD = N'[^']*';", re.M),
    re.compile(r"^\s*GRANT VIEW SERVER PERFORMANCE STATE TO \[[^\]]+\];", re.M),
]


def sqlcmd_to_tsql(text: str) -> str:
    """What SQL Server receives from sqlcmd, near enough for a parser: variables substituted (numbers
    where a number is expected), `GO n` as plain GO, and the grammar gaps above replaced."""
    numeric = {"MAX_SERVER_MEMORY_MB", "DEMO_ROWS"}
    text = SQLCMD_VARIABLE.sub(lambda m: "1024" if m.group(1) in numeric else f"v_{m.group(1).lower()}", text)
    text = re.sub(r"^GO\s+\d+\s*$", "GO", text, flags=re.M)
    text = text.replace("DEFAULT_DATABASE = [master]", "DEFAULT_DATABASE = master")
    for gap in TSQL_GRAMMAR_GAPS:
        text = gap.sub(
            lambda m: ("ELSE " if m.group(0).lstrip().startswith("ELSE") else "") + "SELECT 1;", text
        )
    return text


@pytest.mark.parametrize(
    "script", sorted(COMPOSE_DIR.glob("**/*.sql")), ids=lambda p: str(p.relative_to(COMPOSE_DIR))
)
def test_sql_scripts_parse_as_tsql(script: Path) -> None:
    from sqlfluff.core import FluffConfig, Linter

    parsed = Linter(config=FluffConfig(overrides={"dialect": "tsql"})).parse_string(
        sqlcmd_to_tsql(script.read_text(encoding="utf-8"))
    )
    assert parsed.tree is not None
    unparsable = [segment.raw[:160] for segment in parsed.tree.recursive_crawl("unparsable")]
    assert not unparsable, f"{script.name}: sqlfluff cannot parse: {unparsable}"


def permissions_doc_block(heading: str) -> str:
    text = PERMISSIONS_DOC.read_text(encoding="utf-8")
    section = text.split(f"### {heading}\n", 1)[1]
    return section.split("```sql\n", 1)[1].split("```", 1)[0]


def test_the_exporter_login_is_created_exactly_as_docs_permissions_md_says_for_2022() -> None:
    doc = permissions_doc_block("SQL Server 2022 and later")
    script = (COMPOSE_DIR / "init" / "03-login.sql").read_text(encoding="utf-8")
    login = SERVICES["mssql-init"]["environment"]["MONITOR_LOGIN"]
    script = script.replace("$(MONITOR_LOGIN)", login)

    def grants(sql: str) -> list[str]:
        return sorted(re.findall(r"^GRANT [^;]+;", sql, re.M))

    def login_options(sql: str) -> list[str]:
        create = re.search(r"CREATE LOGIN \[[^\]]+\]\s+WITH (.*?);", sql, re.S)
        assert create
        options = [option.strip() for option in re.sub(r"--[^\n]*", "", create.group(1)).split(",")]
        return sorted(option for option in options if not option.startswith("PASSWORD"))

    assert grants(script) == grants(doc)
    assert login_options(script) == login_options(doc)
    exporter_config = load_yaml(COMPOSE_DIR / "exporter" / "mssql-exporter.yml")
    assert {module["username"] for module in exporter_config["auth_modules"].values()} == {login}


# ---------------------------------------------------------------------------------------- the exporter


def exporter_config_in_container(tmp_path: Path) -> tuple[dict[str, Any], Path]:
    root = container_view("exporter", tmp_path)
    args = SERVICES["exporter"]["command"]
    config_path = next(arg.split("=", 1)[1] for arg in args if arg.startswith("--config.file="))
    data = load_yaml(root / config_path.lstrip("/"))
    return data, root


def test_exporter_config_loads_with_the_exporters_own_loader(tmp_path: Path) -> None:
    data, root = exporter_config_in_container(tmp_path)
    secrets = set(service_secrets("exporter").values())
    for module in data["auth_modules"].values():
        assert module["password_file"] in secrets, "the password file must be a secret compose mounts"
        module["password_file"] = str(root / module["password_file"].lstrip("/"))
    config = parse_config(data, source="compose/exporter/mssql-exporter.yml")

    mssql_mounts = {target for _, target, is_bind in service_volumes("mssql") if not is_bind}
    for name, target in config.targets.items():
        assert target.host in SERVICES, f"{name}: host {target.host} is not a compose service"
        assert target.port == 1433
        # volume_map labels each named volume of the mssql service with its mount point.
        assert set(target.volume_map) == mssql_mounts
        assert all(label == directory for directory, label in target.volume_map.items())
        tempdb_dir = SERVICES["mssql-init"]["environment"]["TEMPDB_DIR"]
        pools = [pool for pool in target.ssd_pools.values() if tempdb_dir in pool.volumes]
        assert pools, "an SSD endurance pool must cover tempdb's volume, for the endurance dashboard"
        for pool in pools:
            assert pool.in_service_date < date.today()


def test_exporter_service_runs_the_image_built_from_the_dockerfile() -> None:
    exporter = SERVICES["exporter"]
    assert (COMPOSE_DIR / exporter["build"]["context"]).resolve() == ROOT
    assert exporter["build"]["dockerfile"] == "Dockerfile"
    flags = {arg.split("=", 1)[0] for arg in exporter["command"]}
    assert flags <= {"--config.file", "--web.listen-address", "--collector.host", "--web.config.file"}
    assert "--collector.host" not in flags, "the exporter is not on SQL Server's host in the bundle"


# ----------------------------------------------------------------------------------------- Prometheus


def job_matches_selector(job: str, selector: str) -> bool:
    """Whether a job name satisfies every `job` matcher of the rules' PromQL selector."""
    matchers = re.findall(r'(\w+)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"', selector)
    assert matchers, selector
    ok = True
    for label, op, value in matchers:
        if label != "job":
            continue
        value = value.encode().decode("unicode_escape")
        if op == "=":
            ok &= job == value
        elif op == "!=":
            ok &= job != value
        elif op == "=~":
            ok &= re.fullmatch(value, job) is not None
        else:
            ok &= re.fullmatch(value, job) is None
    return ok


@pytest.mark.parametrize("promtool", tools.promtool_versions(), ids=str)
def test_prometheus_config_passes_promtool_with_the_rules_where_compose_mounts_them(
    tmp_path: Path, promtool: tools.Versioned
) -> None:
    # 3.13.3 is the release the bundle runs; 2.42 is Debian's, for users who take the file to theirs.
    tools.check_binary(promtool)
    root = container_view("prometheus", tmp_path)
    config_arg = next(a for a in SERVICES["prometheus"]["command"] if a.startswith("--config.file="))
    config = root / config_arg.split("=", 1)[1].lstrip("/")
    result = run([promtool.path, "check", "config", str(config)])
    assert result.returncode == 0, result.stdout + result.stderr
    # A rule_files glob that matches nothing is not an error to promtool: every rule file must be loaded.
    for rule_file in sorted(RULES_DIR.glob("*.rules.yml")):
        assert re.search(rf"Checking \S*/{re.escape(rule_file.name)}\n\s+SUCCESS", result.stdout), (
            f"{rule_file.name} is not loaded by compose/prometheus/prometheus.yml:\n{result.stdout}"
        )


def test_the_probe_job_matches_the_rules_selector_and_the_exporter() -> None:
    config = load_yaml(COMPOSE_DIR / "prometheus" / "prometheus.yml")
    probe_jobs = [job for job in config["scrape_configs"] if job.get("metrics_path") == "/probe"]
    assert len(probe_jobs) == 1
    job = probe_jobs[0]
    selector = load_spec().selector
    assert job_matches_selector(job["job_name"], selector), f"job {job['job_name']} vs {selector}"
    assert not job_matches_selector("prometheus", selector), "the selector must not take every job"

    exporter_config = load_yaml(COMPOSE_DIR / "exporter" / "mssql-exporter.yml")
    targets = {target for static in job["static_configs"] for target in static["targets"]}
    assert targets == set(exporter_config["targets"])
    address = next(r["replacement"] for r in job["relabel_configs"] if r.get("target_label") == "__address__")
    host, port = address.split(":")
    listen = next(a for a in SERVICES["exporter"]["command"] if a.startswith("--web.listen-address="))
    assert host in SERVICES and "build" in SERVICES[host] and listen.endswith(f":{port}")
    am_targets = [
        t for am in config["alerting"]["alertmanagers"] for s in am["static_configs"] for t in s["targets"]
    ]
    assert am_targets == ["alertmanager:9093"] and "alertmanager" in SERVICES


def test_rule_windows_hold_several_scrapes_of_the_bundles_prometheus() -> None:
    """Every range in the generated rules covers at least four scrape intervals of the bundle's
    Prometheus, so one missed scrape leaves a rate to compute (pint's promql/rate asks for two)."""
    config = load_yaml(COMPOSE_DIR / "prometheus" / "prometheus.yml")
    intervals = [duration_seconds(config["global"]["scrape_interval"])]
    intervals += [
        duration_seconds(job["scrape_interval"])
        for job in config["scrape_configs"]
        if "scrape_interval" in job
    ]
    ranges = set()
    for path in RULES_DIR.glob("*.rules.yml"):
        for group in load_yaml(path)["groups"]:
            for rule in group["rules"]:
                ranges |= set(re.findall(r"\[(\d+[smhdwy])(?::[^\]]*)?\]", rule["expr"]))
    assert ranges, "no range selector found in the rules"
    short = sorted(r for r in ranges if duration_seconds(r) < 4 * max(intervals))
    assert not short, f"windows {short} hold fewer than 4 scrapes at {max(intervals)} s"


# -------------------------------------------------------------------------------------- Alertmanager


@tools.needs(tools.AMTOOL)
def test_alertmanager_config_passes_amtool_and_its_templates_resolve_where_compose_mounts_them(
    tmp_path: Path,
) -> None:
    root = container_view("alertmanager", tmp_path)
    config_arg = next(a for a in SERVICES["alertmanager"]["command"] if a.startswith("--config.file="))
    config_path = root / config_arg.split("=", 1)[1].lstrip("/")
    result = run(["amtool", "check-config", str(config_path)])
    assert result.returncode == 0, result.stdout + result.stderr
    # amtool counts template globs, not files: a glob that matches nothing passes it.
    config = load_yaml(config_path)
    for pattern in config.get("templates", []):
        matches = list(config_path.parent.glob(pattern))
        assert matches, f"templates: {pattern} matches no file where compose mounts the templates"


def test_alertmanager_webhooks_reach_the_bundled_receiver() -> None:
    config = load_yaml(ROOT / "alerts" / "alertmanager.yml")
    receiver_port = SERVICES["alert-receiver"]["command"][-1]
    for receiver in config["receivers"]:
        for webhook in receiver.get("webhook_configs", []):
            url = urlsplit(webhook["url"])
            assert url.hostname in SERVICES, f"{receiver['name']}: {url.hostname} is not a compose service"
            assert str(url.port) == receiver_port


def test_the_alert_receiver_prints_one_line_per_alert() -> None:
    sys.path.insert(0, str(COMPOSE_DIR / "alert-receiver"))
    try:
        import receiver
    finally:
        sys.path.pop(0)
    payload = {
        "alerts": [
            {
                "status": "firing",
                "labels": {
                    "alertname": "MSSQLMemoryPressure",
                    "severity": "critical",
                    "instance": "x",
                    "node": "000",
                },
                "annotations": {"summary": "Buffer pool under memory pressure"},
            }
        ]
    }
    [line] = receiver.describe("pager", payload)
    assert "PAGER FIRING MSSQLMemoryPressure severity=critical instance=x node=000" in line


# ----------------------------------------------------------------------------------------------- Grafana

# Grafana's provisioning formats (https://grafana.com/docs/grafana/latest/administration/provisioning/).
DATASOURCE_KEYS = {
    "name", "type", "access", "orgId", "uid", "url", "user", "database", "basicAuth", "basicAuthUser",
    "withCredentials", "isDefault", "jsonData", "secureJsonData", "version", "editable",
}  # fmt: skip
PROVIDER_KEYS = {
    "name", "orgId", "folder", "folderUid", "type", "disableDeletion", "updateIntervalSeconds",
    "allowUiUpdates", "options",
}  # fmt: skip
PROVIDER_OPTION_KEYS = {"path", "foldersFromFilesStructure"}


def provisioning_files(kind: str) -> list[Path]:
    directory = DASHBOARDS / "provisioning" / kind
    if not directory.is_dir():
        pytest.skip(f"dashboards/provisioning/{kind}/ has not landed yet (the mount test fails meanwhile)")
    files = sorted(p for p in directory.iterdir() if p.suffix in (".yml", ".yaml", ".json"))
    assert files, f"dashboards/provisioning/{kind}/ holds no provisioning file"
    return files


def test_grafana_datasource_provisioning_follows_grafanas_format() -> None:
    prometheus_port = 9090
    scrape_interval = load_yaml(COMPOSE_DIR / "prometheus" / "prometheus.yml")["global"]["scrape_interval"]
    defaults = thanos = 0
    for path in provisioning_files("datasources"):
        data = load_yaml(path)
        assert data["apiVersion"] == 1, f"{path.name}: apiVersion must be 1"
        assert set(data) <= {"apiVersion", "datasources", "deleteDatasources", "prune"}, path.name
        for source in data.get("datasources", []):
            assert {"name", "type"} <= set(source) and set(source) <= DATASOURCE_KEYS, (
                f"{path.name}: {source}"
            )
            defaults += bool(source.get("isDefault"))
            if source["type"] == "prometheus" and source.get("uid") == THANOS_DATASOURCE_UID:
                # Thanos Query of the long-term profile (docs/scaling.md), never the default.
                url = urlsplit(interpolate(source["url"], {}))
                assert url.hostname == "thanos-query" and url.hostname in SERVICES, source["url"]
                assert SERVICES["thanos-query"]["profiles"] == ["long-term"]
                assert f"--http-address=0.0.0.0:{url.port}" in SERVICES["thanos-query"]["command"]
                assert not source.get("isDefault")
                assert source["jsonData"]["timeInterval"] == scrape_interval
                thanos += 1
            elif source["type"] == "prometheus":
                url = urlsplit(interpolate(source["url"], {}))
                assert url.hostname == "prometheus" and url.hostname in SERVICES, source["url"]
                assert url.port == prometheus_port and prometheus_port in published_ports("prometheus")
                # $__rate_interval is built on timeInterval: it must be the bundle's scrape interval.
                interval = source.get("jsonData", {}).get("timeInterval")
                if interval:
                    assert interval == scrape_interval, f"timeInterval {interval} vs {scrape_interval}"
    assert defaults <= 1, "at most one default datasource"
    assert thanos == 1, "the long-term profile's Thanos Query is provisioned for the fleet dashboard"


def test_grafana_dashboard_provider_reads_the_mounted_dashboards(tmp_path: Path) -> None:
    files = provisioning_files("dashboards")
    root = container_view("grafana", tmp_path)
    for path in files:
        data = load_yaml(path)
        assert data["apiVersion"] == 1, f"{path.name}: apiVersion must be 1"
        for provider in data["providers"]:
            assert "name" in provider and set(provider) <= PROVIDER_KEYS, f"{path.name}: {provider}"
            assert provider.get("type", "file") == "file"
            options = provider["options"]
            assert set(options) <= PROVIDER_OPTION_KEYS and options["path"].startswith("/"), options
            in_container = root / options["path"].lstrip("/")
            assert list(in_container.glob("**/*.json")), (
                f"{path.name}: provider {provider['name']} reads {options['path']}, "
                "where compose mounts no dashboard"
            )


def dashboard_files() -> list[Path]:
    return sorted(DASHBOARDS.glob("*.json")) if DASHBOARDS.is_dir() else []


def test_dashboards_are_json_with_titles_and_unique_uids() -> None:
    uids: dict[str, str] = {}
    for path in dashboard_files():
        data = json.loads(path.read_text(encoding="utf-8"))
        assert data.get("title"), f"{path.name}: no title"
        uid = data.get("uid")
        if uid:
            assert uid not in uids, f"{path.name} and {uids[uid]} share uid {uid}"
            uids[uid] = path.name


def test_grafana_runs_the_release_named_in_dashboards_grafana_version_txt() -> None:
    # dashboards/generate.py: "The current Grafana release the compose bundle runs".
    version_file = DASHBOARDS / "grafana_version.txt"
    image = SERVICES["grafana"]["image"]
    assert image.startswith("grafana/grafana:")
    if not version_file.exists():
        pytest.skip("dashboards/grafana_version.txt has not landed yet")
    assert image == f"grafana/grafana:{version_file.read_text(encoding='utf-8').strip()}"


# --------------------------------------------------------------------- profile long-term: Thanos Ruler

# What `docker compose up` starts without a profile: the bundle of docs/quickstart.md, no Thanos.
DEFAULT_PROFILE = {
    "mssql-volumes", "mssql", "mssql-init", "workload", "exporter", "prometheus", "alertmanager",
    "alert-receiver", "grafana",
}


def _command_flag(service: str, name: str) -> str:
    values = [a.split("=", 1)[1] for a in SERVICES[service]["command"] if a.startswith(f"--{name}=")]
    assert len(values) == 1, f"{service}: --{name} given {len(values)} times"
    return values[0]


def test_the_default_profile_is_unchanged_and_thanos_is_long_term_only() -> None:
    default = {name for name, service in SERVICES.items() if not service.get("profiles")}
    assert default == DEFAULT_PROFILE
    for name in set(SERVICES) - default:
        assert SERVICES[name]["profiles"] == ["long-term"], name
    assert "thanos-ruler" in SERVICES


def test_thanos_ruler_loads_the_generated_ruler_files_where_compose_mounts_them(tmp_path: Path) -> None:
    root = container_view("thanos-ruler", tmp_path)
    pattern = _command_flag("thanos-ruler", "rule-file")
    loaded = sorted(p.name for p in root.glob(pattern.lstrip("/")))
    generated = sorted(p.name for p in (RULES_DIR / "thanos-ruler").glob("*.rules.yml"))
    assert loaded and loaded == generated
    tools.check_thanos()
    result = run([tools.THANOS.path, "tools", "rules-check", f"--rules={root / pattern.lstrip('/')}"])
    assert result.returncode == 0, result.stderr
    assert "result=SUCCESS" in result.stderr and "rulesfound=0" not in result.stderr


def test_thanos_ruler_reads_query_and_query_serves_what_the_ruler_records() -> None:
    query = urlsplit("http://" + _command_flag("thanos-ruler", "query"))
    assert query.hostname == "thanos-query"
    assert _command_flag("thanos-query", "http-address") == f"0.0.0.0:{query.port}"
    grpc_port = _command_flag("thanos-ruler", "grpc-address").rsplit(":", 1)[1]
    endpoints = load_yaml(COMPOSE_DIR / "thanos" / "endpoints.yml")["endpoints"]
    assert {"address": f"thanos-ruler:{grpc_port}", "strict": True} in endpoints
    # Every store the ruler's queries fan out to is strict: a missing one fails the evaluation (abort)
    # instead of leaving its series out of the totals.
    assert all(endpoint["strict"] for endpoint in endpoints)
    # The same bucket as the sidecar's, so its uploaded blocks join the history.
    for name in ("thanos-ruler", "thanos-sidecar"):
        assert _command_flag(name, "objstore.config-file") == "/etc/thanos/bucket.yml"
        assert ("./thanos/bucket.yml", "/etc/thanos/bucket.yml", True) in service_volumes(name)
        assert ("thanos-bucket", "/bucket", False) in service_volumes(name)
    assert _command_flag("thanos-ruler", "label").startswith("ruler=")


def test_no_prometheus_loads_the_ruler_files_and_it_carries_the_shard_label() -> None:
    config = load_yaml(COMPOSE_DIR / "prometheus" / "prometheus.yml")
    # Not rules/thanos-ruler/; long-term/ holds only the opt-in watch on the ruler (profile long-term).
    assert config["rule_files"] == ["rules/*.rules.yml", "long-term/*.rules.yml"]
    assert ("prometheus-long-term", "/etc/prometheus/long-term", False) in service_volumes("prometheus")
    assert ("../alerts/rules", "/etc/prometheus/rules", True) in [
        (s, t, b) for s, t, b in service_volumes("prometheus")
    ]
    # The fleet group counts per this label; the sidecar refuses a Prometheus without external labels.
    assert set(config["global"]["external_labels"]) == {load_spec().fleet.shard_label}
