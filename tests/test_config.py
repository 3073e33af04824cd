"""Config loading, error reporting, secrets and ODBC connection strings."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mssql_memory_exporter.config import (
    ConfigError,
    CredentialError,
    DriverError,
    ExporterConfig,
    TargetConfig,
    build_connection_string,
    connection_string_redacted,
    driver_kind,
    freetds_section,
    freetds_verifies,
    load_config,
    parse_config,
    resolve_driver,
)
from pydantic import SecretStr

TESTDATA = Path(__file__).parent / "config_testdata"
GOOD = sorted((TESTDATA / "good").glob("*.yml"))
BAD = sorted((TESTDATA / "bad").glob("*.yml"))

PASSWORD_ENV = "MSSQL_EXPORTER_TEST_PASSWORD"
PASSWORD = "Pa55;w}rd {x}"  # every character that needs quoting in a connection string
ODBC18 = "ODBC Driver 18 for SQL Server"
ODBC17 = "ODBC Driver 17 for SQL Server"
FREETDS = "FreeTDS"


@pytest.fixture(autouse=True)
def _password_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PASSWORD_ENV, PASSWORD)
    monkeypatch.delenv("MSSQL_EXPORTER_TEST_UNSET_PASSWORD", raising=False)


def minimal(**target: object) -> dict:
    return {
        "auth_modules": {"monitor": {"username": "prometheus_monitor", "password_env": PASSWORD_ENV}},
        "targets": {"t": {"host": "sql.example.com", "auth_module": "monitor", **target}},
    }


def target(**fields: object) -> TargetConfig:
    return parse_config(minimal(**fields)).targets["t"]


def parse_odbc(conn_str: str) -> dict[str, str]:
    """A reference reader of ODBC connection strings, to check the quoting round-trips."""
    pairs: dict[str, str] = {}
    i = 0
    while i < len(conn_str):
        eq = conn_str.index("=", i)
        key = conn_str[i:eq]
        i = eq + 1
        if conn_str.startswith("{", i):
            value = []
            i += 1
            while True:
                if conn_str[i] == "}":
                    if conn_str.startswith("}}", i):
                        value.append("}")
                        i += 2
                        continue
                    i += 1
                    break
                value.append(conn_str[i])
                i += 1
            pairs[key] = "".join(value)
            assert i == len(conn_str) or conn_str[i] == ";", conn_str
            i += 1
        else:
            end = conn_str.find(";", i)
            end = len(conn_str) if end < 0 else end
            pairs[key] = conn_str[i:end]
            i = end + 1
    return pairs


# --- fixtures ------------------------------------------------------------------------------------------


def test_fixture_directories_are_not_empty():
    assert len(GOOD) >= 5
    assert len(BAD) >= 30


@pytest.mark.parametrize("path", GOOD, ids=lambda p: p.name)
def test_good_fixture_loads(path: Path):
    config = load_config(str(path))
    assert config.targets
    for name, tgt in config.targets.items():
        assert tgt.name == name
        assert tgt.username


@pytest.mark.parametrize("path", BAD, ids=lambda p: p.name)
def test_bad_fixture_fails_with_expected_message(path: Path):
    first = path.read_text().splitlines()[0] if path.read_text() else ""
    assert first.startswith("# expect: "), f"{path.name} lacks its '# expect:' line"
    expected = first.removeprefix("# expect: ")
    with pytest.raises(ConfigError) as info:
        load_config(str(path))
    message = str(info.value)
    assert expected in message
    for line in message.splitlines():
        assert line.startswith(f"{path}: "), line
    assert "Traceback" not in message
    assert "s3cr3t-inline-value" not in message
    assert PASSWORD not in message


# --- defaults and field values -------------------------------------------------------------------------


def test_defaults():
    tgt = target()
    assert (tgt.name, tgt.host, tgt.port, tgt.instance) == ("t", "sql.example.com", 1433, None)
    assert tgt.database == "master"
    assert (tgt.driver, tgt.encryption, tgt.trust_server_certificate) == ("auto", "require", False)
    assert (tgt.login_timeout_seconds, tgt.query_timeout_seconds) == (5.0, 10.0)
    assert (tgt.workload, tgt.labels, tgt.auth_module) == ("oltp", {}, "monitor")


def test_full_fixture_values():
    config = load_config(str(TESTDATA / "good" / "full.yml"))
    tgt = config.targets["prod-a"]
    assert config.default_target == "prod-a"
    assert tgt.port == 14330
    assert tgt.database == "monitoring"
    assert tgt.driver == "odbc18"
    assert tgt.encryption == "request"
    assert tgt.trust_server_certificate is True
    assert tgt.login_timeout_seconds == 3.0
    assert tgt.query_timeout_seconds == 7.5
    assert tgt.workload == "olap"
    assert tgt.labels == {"env": "prod", "rack": "12", "_team": "dba"}


def test_named_instance_has_no_port():
    tgt = target(instance="SQL2019")
    assert tgt.port is None
    assert tgt.instance == "SQL2019"


def test_explicit_null_port_means_default():
    assert target(port=None).port == 1433


def test_unquoted_off_is_taken_as_off():
    assert target(encryption=False).encryption == "off"


def test_direct_construction_of_a_target():
    tgt = TargetConfig(name="x", host="h", auth_module="m")
    assert tgt.port == 1433
    assert tgt.username is None
    assert build_connection_string(tgt, FREETDS, "pw", username="u").endswith("UID=u;PWD=pw;")
    with pytest.raises(ConfigError, match="no username"):
        build_connection_string(tgt, FREETDS, "pw")


def test_all_errors_are_reported_at_once():
    data = minimal(port=0, workload="x", extra=1)
    with pytest.raises(ConfigError) as info:
        parse_config(data, source="c.yml")
    assert info.value.lines == [
        "c.yml: targets.t.port: must be greater than or equal to 1",
        "c.yml: targets.t.workload: must be 'oltp' or 'olap'",
        "c.yml: targets.t.extra: unknown key",
    ]


def test_relative_password_file_follows_the_config_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    confdir = tmp_path / "etc"
    confdir.mkdir()
    (confdir / "secret").write_text("from-file\n")
    data = minimal()
    data["auth_modules"]["monitor"] = {"username": "u", "password_file": "secret"}
    (confdir / "c.yml").write_text(yaml.safe_dump(data))
    monkeypatch.chdir(tmp_path)
    config = load_config("etc/c.yml")
    assert config.auth_modules["monitor"].password_file == str(confdir / "secret")
    assert config.credentials_for("t").password.get_secret_value() == "from-file"


@pytest.mark.parametrize(
    ("content", "error"),
    [
        (None, "cannot read config file: it does not exist"),
        (b"\xff\xfe\x00bad", "not valid UTF-8"),
    ],
)
def test_unreadable_config_file(tmp_path: Path, content: bytes | None, error: str):
    path = tmp_path / "c.yml"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(ConfigError, match=error) as info:
        load_config(str(path))
    assert str(info.value).startswith(f"{path}: ")


def test_config_directory_instead_of_file(tmp_path: Path):
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config(str(tmp_path))


def test_yaml_error_does_not_quote_the_line(tmp_path: Path):
    path = tmp_path / "c.yml"
    path.write_text('targets:\n  t:\n    host: "never-show-this-line\n')
    with pytest.raises(ConfigError) as info:
        load_config(str(path))
    assert "never-show-this-line" not in str(info.value)
    assert "line " in str(info.value)


# --- secrets -------------------------------------------------------------------------------------------


def test_password_is_read_at_call_time(monkeypatch: pytest.MonkeyPatch):
    config = parse_config(minimal())
    monkeypatch.setenv(PASSWORD_ENV, "rotated")
    user, password = config.credentials_for("t")
    assert user == "prometheus_monitor"
    assert isinstance(password, SecretStr)
    assert password.get_secret_value() == "rotated"
    assert config.credentials_for(config.targets["t"]).password.get_secret_value() == "rotated"


def test_env_var_removed_after_load(monkeypatch: pytest.MonkeyPatch):
    config = parse_config(minimal())
    monkeypatch.delenv(PASSWORD_ENV)
    with pytest.raises(CredentialError, match="the environment variable it names is not set") as err:
        config.credentials_for("t")
    assert PASSWORD_ENV not in str(err.value)  # a pasted password would be logged with every scrape


def file_config(tmp_path: Path, content: str) -> tuple[ExporterConfig, Path]:
    secret = tmp_path / "secret"
    secret.write_text(content)
    data = minimal()
    data["auth_modules"]["monitor"] = {"username": "u", "password_file": str(secret)}
    return parse_config(data), secret


@pytest.mark.parametrize(
    ("content", "expected"),
    [("pw\n", "pw"), ("pw\r\n", "pw"), ("pw", "pw"), ("pw\n\n", "pw\n"), (" pw \n", " pw ")],
)
def test_password_file_strips_one_trailing_newline(tmp_path: Path, content: str, expected: str):
    config, _ = file_config(tmp_path, content)
    assert config.credentials_for("t").password.get_secret_value() == expected


def test_password_file_changes_are_picked_up(tmp_path: Path):
    config, secret = file_config(tmp_path, "first\n")
    secret.write_text("second\n")
    assert config.credentials_for("t").password.get_secret_value() == "second"


def test_password_file_removed_after_load(tmp_path: Path):
    config, secret = file_config(tmp_path, "gone-secret\n")
    secret.unlink()
    with pytest.raises(CredentialError) as info:
        config.credentials_for("t")
    assert str(secret) in str(info.value)
    assert "gone-secret" not in str(info.value)


def test_empty_password_file(tmp_path: Path):
    config, secret = file_config(tmp_path, "pw\n")
    secret.write_text("\n")
    with pytest.raises(CredentialError, match="is empty"):
        config.credentials_for("t")


@pytest.mark.parametrize("content", ["", "\n", "\r\n"])
def test_empty_password_file_is_refused_at_load(tmp_path: Path, content: str):
    secret = tmp_path / "secret"
    secret.write_text(content)
    data = minimal()
    data["auth_modules"]["monitor"] = {"username": "u", "password_file": str(secret)}
    with pytest.raises(ConfigError, match=r"auth_modules\.monitor\.password_file: file .*secret is empty"):
        parse_config(data)


def test_unreadable_password_file_at_load(tmp_path: Path):
    secret = tmp_path / "secret"
    secret.write_text("pw")
    secret.chmod(0)
    if os.access(secret, os.R_OK):
        pytest.skip("running as a user who can read anything (root)")
    data = minimal()
    data["auth_modules"]["monitor"] = {"username": "u", "password_file": str(secret)}
    with pytest.raises(ConfigError, match=r"auth_modules\.monitor\.password_file: .*secret is not readable"):
        parse_config(data)


def test_password_file_that_is_a_directory(tmp_path: Path):
    data = minimal()
    data["auth_modules"]["monitor"] = {"username": "u", "password_file": str(tmp_path)}
    with pytest.raises(ConfigError, match=r"password_file: .* is a directory, not a regular file"):
        parse_config(data)


def test_secrets_never_in_repr_or_dumps(tmp_path: Path):
    config = parse_config(minimal())
    creds = config.credentials_for("t")
    for text in (repr(config), str(config), config.model_dump_json(), repr(creds), str(creds)):
        assert PASSWORD not in text
    assert creds.password.get_secret_value() == PASSWORD


def test_redacted_connection_string_has_no_password():
    tgt = target()
    full = build_connection_string(tgt, ODBC18, PASSWORD)
    redacted = connection_string_redacted(tgt, ODBC18)
    assert parse_odbc(full)["PWD"] == PASSWORD
    assert PASSWORD not in redacted
    assert parse_odbc(redacted)["PWD"] == "********"
    assert {k: v for k, v in parse_odbc(full).items() if k != "PWD"} == {
        k: v for k, v in parse_odbc(redacted).items() if k != "PWD"
    }


def test_connection_errors_do_not_carry_the_password():
    tgt = target(encryption="strict")
    with pytest.raises(DriverError) as info:
        build_connection_string(tgt, FREETDS, PASSWORD)
    assert PASSWORD not in str(info.value)


# --- connection strings --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("encryption", "encrypt"), [("off", "no"), ("request", "no"), ("require", "yes"), ("strict", "strict")]
)
def test_odbc18_encryption(encryption: str, encrypt: str):
    pairs = parse_odbc(build_connection_string(target(encryption=encryption), ODBC18, "pw"))
    assert pairs["Encrypt"] == encrypt
    assert "Encryption" not in pairs


@pytest.mark.parametrize(("encryption", "encrypt"), [("off", "no"), ("request", "no"), ("require", "yes")])
def test_odbc17_encryption(encryption: str, encrypt: str):
    pairs = parse_odbc(build_connection_string(target(encryption=encryption), ODBC17, "pw"))
    assert pairs["Encrypt"] == encrypt


@pytest.mark.parametrize("trust", [True, False])
@pytest.mark.parametrize("driver", [ODBC18, ODBC17])
def test_microsoft_trust_server_certificate(driver: str, trust: bool):
    pairs = parse_odbc(build_connection_string(target(trust_server_certificate=trust), driver, "pw"))
    assert pairs["TrustServerCertificate"] == ("yes" if trust else "no")


def test_microsoft_port_and_instance():
    by_port = parse_odbc(build_connection_string(target(port=14330), ODBC18, "pw"))
    assert by_port["Server"] == "tcp:sql.example.com,14330"
    assert "Port" not in by_port
    by_instance = parse_odbc(build_connection_string(target(instance="SQL2019"), ODBC18, "pw"))
    assert by_instance["Server"] == "sql.example.com\\SQL2019"


def test_microsoft_full_string():
    conn = build_connection_string(target(database="mon"), ODBC18, "pw")
    assert conn == (
        "Driver={ODBC Driver 18 for SQL Server};Server=tcp:sql.example.com,1433;Database=mon;"
        "Encrypt=yes;TrustServerCertificate=no;APP=mssql-memory-exporter;UID=prometheus_monitor;PWD=pw;"
    )


@pytest.mark.parametrize("encryption", ["off", "request", "require"])
def test_freetds_encryption(encryption: str):
    pairs = parse_odbc(build_connection_string(target(encryption=encryption), FREETDS, "pw"))
    assert pairs["Encryption"] == encryption
    assert "Encrypt" not in pairs
    assert "TrustServerCertificate" not in pairs


def test_freetds_full_string_without_tls():
    conn = build_connection_string(target(port=1533, encryption="off"), FREETDS, "pw")
    assert conn == (
        "Driver={FreeTDS};Server=sql.example.com;Port=1533;Database=master;TDS_Version=7.4;"
        "Encryption=off;ClientCharset=UTF-8;APP=mssql-memory-exporter;UID=prometheus_monitor;PWD=pw;"
    )


def test_freetds_full_string_when_the_certificate_is_checked():
    # The address moves into a freetds.conf section (the only place FreeTDS takes a CA file from).
    tgt = target(port=1533)
    name, _ = freetds_section(tgt)
    conn = build_connection_string(tgt, FREETDS, "pw")
    assert conn == (
        f"Driver={{FreeTDS}};Servername={name};Database=master;TDS_Version=7.4;"
        "Encryption=require;ClientCharset=UTF-8;APP=mssql-memory-exporter;UID=prometheus_monitor;PWD=pw;"
    )


@pytest.mark.parametrize(
    ("fields", "verifies"),
    [
        ({}, True),  # the defaults: require, certificate checked
        ({"encryption": "request"}, True),
        ({"encryption": "off"}, False),
        ({"trust_server_certificate": True}, False),
        ({"encryption": "request", "trust_server_certificate": True}, False),
    ],
)
def test_when_freetds_checks_the_certificate(fields: dict, verifies: bool):
    tgt = target(**fields)
    assert freetds_verifies(tgt) is verifies
    pairs = parse_odbc(build_connection_string(tgt, FREETDS, "pw"))
    assert ("Servername" in pairs) is verifies and ("Server" in pairs) is not verifies


def test_freetds_section_holds_the_address_and_the_ca(tmp_path: Path):
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    name, text = freetds_section(target(port=1533, driver="freetds", ca_file=str(ca)))
    assert text.splitlines() == [
        f"[{name}]",
        "\thost = sql.example.com",
        "\tport = 1533",
        "\ttds version = 7.4",
        f"\tca file = {ca}",
        "\tcheck certificate hostname = yes",
    ]
    _, by_instance = freetds_section(target(instance="SQL2019"))
    assert "\tinstance = SQL2019\n" in by_instance and "\tport =" not in by_instance
    assert "\tca file = system\n" in by_instance  # no ca_file: the system trust store
    # Different targets, or one target changed, never share a section name.
    names = {freetds_section(target(**f))[0] for f in ({}, {"port": 1534}, {"host": "b.example.com"})}
    assert len(names) == 3


def test_freetds_instance():
    pairs = parse_odbc(build_connection_string(target(instance="SQL2019", encryption="off"), FREETDS, "pw"))
    assert pairs["Server"] == "sql.example.com\\SQL2019"
    assert "Port" not in pairs


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"driver": "auto"}, r"ca_file: is for driver: freetds"),
        ({"driver": "odbc18"}, r"ca_file: is for driver: freetds"),
        (
            {"driver": "freetds", "encryption": "off"},
            r"ca_file: needs encryption request or require, not off",
        ),
        (
            {"driver": "freetds", "trust_server_certificate": True},
            r"ca_file: contradicts trust_server_certificate",
        ),
    ],
)
def test_ca_file_only_where_it_is_used(tmp_path: Path, fields: dict, error: str):
    ca = tmp_path / "ca.pem"
    ca.write_text("x")
    with pytest.raises(ConfigError, match=rf"test-config: targets\.t\.{error}"):
        parse_config(minimal(ca_file=str(ca), **fields), source="test-config")


@pytest.mark.parametrize("path", ["missing.pem", "bad#name.pem", " lead.pem", "a;b.pem"])
def test_ca_file_must_be_a_readable_plain_path(tmp_path: Path, path: str):
    (tmp_path / "bad#name.pem").write_text("x")
    with pytest.raises(ConfigError, match=r"targets\.t\.ca_file: "):
        parse_config(minimal(ca_file=path, driver="freetds"), source="c.yml", base_dir=tmp_path)


def test_relative_ca_file_follows_the_config_file(tmp_path: Path):
    (tmp_path / "ca.pem").write_text("x")
    tgt = parse_config(minimal(ca_file="ca.pem", driver="freetds"), base_dir=tmp_path).targets["t"]
    assert tgt.ca_file == str(tmp_path / "ca.pem")


def test_strict_needs_odbc18():
    tgt = target(encryption="strict")
    with pytest.raises(DriverError, match="FreeTDS cannot do strict"):
        build_connection_string(tgt, FREETDS, "pw")
    with pytest.raises(DriverError, match="cannot do strict"):
        build_connection_string(tgt, ODBC17, "pw")


@pytest.mark.parametrize(
    ("value", "quoted"),
    [
        ("plain", "plain"),
        ("a;b", "{a;b}"),
        ("a}b", "{a}}b}"),
        ("{ab", "{{ab}"),
        ("a{b", "a{b"),
        ("}", "{}}}"),
        (" lead", "{ lead}"),
        ("", ""),
    ],
)
def test_brace_quoting(value: str, quoted: str):
    conn = build_connection_string(target(), FREETDS, value)
    assert conn.endswith(f";PWD={quoted};")


def test_username_and_database_are_quoted_too():
    conn = build_connection_string(target(database="x;y"), ODBC18, "pw", username="DOM}AIN")
    pairs = parse_odbc(conn)
    assert pairs["Database"] == "x;y"
    assert pairs["UID"] == "DOM}AIN"


@given(password=st.text(alphabet=st.characters(exclude_characters="\x00"), max_size=40))
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_password_round_trips(password: str):
    tgt = target()
    for driver in (ODBC18, FREETDS):
        assert parse_odbc(build_connection_string(tgt, driver, password))["PWD"] == password
        assert parse_odbc(build_connection_string(tgt, driver, SecretStr(password)))["PWD"] == password


# --- driver resolution ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("available", "expected"),
    [
        ([FREETDS, ODBC17, ODBC18], ODBC18),
        ([FREETDS, ODBC17], ODBC17),
        ([FREETDS], FREETDS),
        (["SQLite3", FREETDS], FREETDS),
    ],
)
def test_auto_prefers_18_then_17_then_freetds(available: list[str], expected: str):
    assert resolve_driver("auto", available) == expected


@pytest.mark.parametrize(("choice", "name"), [("odbc18", ODBC18), ("odbc17", ODBC17), ("freetds", FREETDS)])
def test_explicit_choice(choice: str, name: str):
    assert resolve_driver(choice, [FREETDS, ODBC17, ODBC18]) == name


def test_missing_driver_names_what_is_installed():
    with pytest.raises(DriverError, match=r"ODBC Driver 18 for SQL Server.*installed ODBC drivers: FreeTDS"):
        resolve_driver("odbc18", [FREETDS])
    with pytest.raises(DriverError, match="installed ODBC drivers: none"):
        resolve_driver("auto", [])


def test_auto_with_strict_only_takes_18():
    assert resolve_driver("auto", [FREETDS, ODBC17, ODBC18], encryption="strict") == ODBC18
    with pytest.raises(DriverError, match="for encryption strict"):
        resolve_driver("auto", [FREETDS, ODBC17], encryption="strict")


def test_driver_kind():
    assert driver_kind(ODBC18) == "odbc18"
    assert driver_kind(ODBC17) == "odbc17"
    assert driver_kind("FreeTDS") == "freetds"
    with pytest.raises(DriverError, match="unsupported ODBC driver"):
        driver_kind("SQLite3")


# --- properties: the loader only ever answers with a config or a ConfigError ---------------------------

scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
# YAML keys are usually strings, but `1433:`, `yes:` and `~:` give ints, booleans and None.
keys = st.text(max_size=12) | st.integers() | st.booleans() | st.none()
yamlish = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(keys, children, max_size=4),
    max_leaves=20,
)
TARGET_KEYS = [
    "name",
    "host",
    "port",
    "instance",
    "database",
    "driver",
    "encryption",
    "trust_server_certificate",
    "ca_file",
    "login_timeout_seconds",
    "query_timeout_seconds",
    "workload",
    "labels",
    "auth_module",
    "password",
]


def _load_or_error(data: object) -> None:
    try:
        config = parse_config(data, source="prop.yml")
    except ConfigError as exc:
        assert str(exc).startswith("prop.yml: ")
        assert PASSWORD not in str(exc)
    else:
        assert isinstance(config, ExporterConfig)


@given(data=yamlish)
@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_arbitrary_documents(data: object):
    _load_or_error(data)


@given(top=st.dictionaries(st.sampled_from(["default_target", "auth_modules", "targets", "x"]), yamlish))
@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_arbitrary_top_level_sections(top: dict):
    _load_or_error(top)


@given(changes=st.dictionaries(st.sampled_from(TARGET_KEYS), yamlish, max_size=5))
@settings(max_examples=500, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_arbitrary_target_fields(changes: dict):
    data = minimal()
    data["targets"]["t"].update(changes)
    _load_or_error(data)


@given(changes=st.dictionaries(st.sampled_from(["username", "password_env", "password_file", "x"]), yamlish))
@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_arbitrary_auth_module_fields(changes: dict):
    data = minimal()
    data["auth_modules"]["monitor"].update(changes)
    _load_or_error(data)


@given(data=yamlish)
@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_arbitrary_documents_through_a_file(tmp_path_factory: pytest.TempPathFactory, data: object):
    path = tmp_path_factory.mktemp("prop") / "c.yml"
    path.write_text(yaml.safe_dump(data))
    try:
        load_config(str(path))
    except ConfigError as exc:
        assert str(exc).startswith(f"{path}: ")


@given(text=st.text(max_size=200))
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_arbitrary_text_files(tmp_path_factory: pytest.TempPathFactory, text: str):
    path = tmp_path_factory.mktemp("prop") / "c.yml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    try:
        load_config(str(path))
    except ConfigError as exc:
        assert str(exc).startswith(f"{path}: ")


# --- control characters in connection fields (issue 25, defect 7) -----------------------------------
# A NUL in a user name was accepted and the driver, C code, cut the name there: "expo\0rter" logged in
# as "expo". Every field that reaches the driver or a file path refuses control characters, by name.


def _with_auth(**module: object) -> dict:
    data = minimal()
    data["auth_modules"]["monitor"] = {"username": "u", "password_env": PASSWORD_ENV, **module}
    return data


@pytest.mark.parametrize("bad", ["expo\x00rter", "expo\nrter", "expo\x1brter", "expo\x7frter", "expo\x85rt"])
@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda v: _with_auth(username=v), "auth_modules.monitor.username"),
        (lambda v: minimal(database=v), "targets.t.database"),
        (lambda v: minimal(host=v), "targets.t.host"),
        (lambda v: minimal(instance=v, port=None), "targets.t.instance"),
        (lambda v: minimal(auth_module=v), "targets.t.auth_module"),
        (lambda v: _with_auth(password_env=None, password_file=v), "auth_modules.monitor.password_file"),
        (lambda v: minimal(driver=v), "targets.t.driver"),
        (lambda v: minimal(ca_file=v, driver="freetds"), "targets.t.ca_file"),
    ],
)
def test_control_characters_are_refused_in_connection_fields(make, field: str, bad: str):
    with pytest.raises(ConfigError) as info:
        parse_config(make(bad))
    assert any(line.startswith(f"<config>: {field}: ") for line in info.value.lines), info.value.lines


def test_a_nul_in_a_user_name_is_named(monkeypatch: pytest.MonkeyPatch):
    with pytest.raises(ConfigError) as info:
        parse_config(_with_auth(username="expo\x00rter"))
    assert str(info.value) == (
        "<config>: auth_modules.monitor.username: contains a control character (U+0000 at position 5); "
        "remove it"
    )


def test_a_nul_in_a_password_file_is_refused(tmp_path: Path):
    secret = tmp_path / "secret"
    secret.write_bytes(b"pass\x00word\n")
    with pytest.raises(ConfigError, match=r"password_file: file .*secret contains a NUL byte"):
        parse_config(_with_auth(password_env=None, password_file=str(secret)))
    secret.write_bytes(b"password\n")
    config = parse_config(_with_auth(password_env=None, password_file=str(secret)))
    secret.write_bytes(b"pass\x00word\n")
    with pytest.raises(CredentialError, match="contains a NUL byte"):
        config.credentials_for("t")


# Issue 36 item 7: whatever the YAML library or a validator raises is one config error line. Before, a
# 5000-digit port escaped as ValueError and 3,000 nested mappings as RecursionError: SIGHUP then killed
# the exporter and --config.check printed a traceback.
@pytest.mark.parametrize(
    ("text", "error"),
    [
        (
            "auth_modules: {m: {username: u, password_env: X}}\n"
            "targets:\n  x: {host: h, auth_module: m, port: " + "9" * 5000 + "}\n",
            "invalid YAML: an integer with too many digits",
        ),
        ("targets:\n  x:\n    labels: " + "{a: " * 3000 + "1" + "}" * 3000 + "\n", "nested too deeply"),
        (
            "targets:\n  x:\n    labels:\n" + "".join(f"{'  ' * (i + 3)}a{i}:\n" for i in range(3000)),
            "nested",
        ),
    ],
    ids=["5000-digit-port", "deep-flow-mappings", "deep-block-mappings"],
)
def test_any_failure_of_the_yaml_library_is_one_config_error(tmp_path: Path, text: str, error: str):
    path = tmp_path / "c.yml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=error) as info:
        load_config(str(path))
    assert len(info.value.lines) == 1 and info.value.lines[0].startswith(f"{path}: ")


def test_an_unforeseen_exception_while_validating_is_a_config_error(tmp_path: Path, monkeypatch):
    import mssql_memory_exporter.config.models as models

    def explode(*_args: object, **_kwargs: object) -> None:
        raise OverflowError("a library's own failure\nsecond line")

    monkeypatch.setattr(models, "parse_config", explode)
    path = tmp_path / "c.yml"
    path.write_text("targets: {}\n")
    with pytest.raises(ConfigError) as info:
        load_config(str(path))
    assert info.value.lines == [f"{path}: cannot be loaded: OverflowError: a library's own failure"]


# Issue 36 item 8: the config file is read like a password file (secret_file.read_regular_file). Before,
# a FIFO blocked a reload in open() (and SIGTERM with it), and /dev/zero grew the exporter to 1.4 GB.
def test_config_file_that_is_a_fifo_is_refused_without_blocking(tmp_path: Path):
    fifo = tmp_path / "c.yml"
    os.mkfifo(fifo)
    outcome: list[BaseException | object] = []

    def load() -> None:
        try:
            outcome.append(load_config(str(fifo)))
        except BaseException as exc:  # handed to the test thread
            outcome.append(exc)

    # A thread, so that the old code's open() blocking on the FIFO fails the test instead of hanging it.
    reader = threading.Thread(target=load, daemon=True)
    reader.start()
    reader.join(timeout=30)
    if reader.is_alive():
        with open(fifo, "w"):  # lets the blocked open() return, so the thread ends
            pass
        pytest.fail("load_config blocked opening a FIFO")
    assert isinstance(outcome[0], ConfigError), outcome
    assert "cannot read config file: it is a named pipe" in str(outcome[0])


def test_config_file_that_is_a_device_is_refused_unread():
    # /dev/null, not the /dev/zero of the report: refused by its type alike, and the old code reading it
    # fails this test with "the config is empty" instead of filling the machine's memory.
    with pytest.raises(ConfigError, match="/dev/null: cannot read config file: it is a character device"):
        load_config("/dev/null")


def test_config_file_larger_than_the_cap_is_refused(tmp_path: Path, monkeypatch):
    import mssql_memory_exporter.config.yaml_loading as yaml_loading

    monkeypatch.setattr(yaml_loading, "MAX_CONFIG_BYTES", 4096)
    path = tmp_path / "c.yml"
    path.write_text("# padding\n" * 1000)
    with pytest.raises(ConfigError, match="larger than 4096 bytes: it cannot be a config file"):
        load_config(str(path))


def test_config_file_on_proc_is_refused():
    with pytest.raises(ConfigError, match="kernel's proc filesystem"):
        load_config("/proc/self/status")
