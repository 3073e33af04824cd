"""--web.config.file: TLS, client certificates, basic auth, headers, request limits and reloads.

Everything runs over real sockets on 127.0.0.1, TLS included, with a throwaway CA and certificates made
by the `cryptography` package for this test run (no private key is committed).
"""

from __future__ import annotations

import base64
import http.client
import logging
import os
import signal
import socket
import ssl
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import bcrypt
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from mssql_memory_exporter.app.cli import main
from mssql_memory_exporter.app.logsetup import LogfmtFormatter, setup_logging
from mssql_memory_exporter.config import ConfigError
from mssql_memory_exporter.web import ExporterHTTPServer, make_server
from mssql_memory_exporter.webconfig import WebConfigSource, load_web_config

from tests.integration.test_cli import FAKE_SCRAPE_MAIN, GOOD_CONFIG
from tests.integration.test_web import PASSWORD_ENV, FakeProbe, make_config

DATA = Path(__file__).parents[1] / "webconfig_testdata"
BAD = sorted((DATA / "bad").glob("*.yml"))
GOOD = sorted((DATA / "good").glob("*.yml"))

# Deliberately distinctive, so the logs can be searched for them.
PASSWORD = "W3b-Basic-Auth-pw-Qx81"
NEW_PASSWORD = "R0tated-Basic-Auth-pw-Lm27"
WRONG_PASSWORD = "Wr0ng-Guess-pw-Zt55"


# --- a throwaway PKI ----------------------------------------------------------------------------------


@dataclass
class Issued:
    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey

    @property
    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    @property
    def key_pem(self) -> bytes:
        return self.key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )

    @property
    def der(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.DER)


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _builder(subject: str, issuer: x509.Name, key: ec.EllipticCurvePrivateKey) -> x509.CertificateBuilder:
    now = datetime.now(UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(days=1))
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    )


def make_ca(common_name: str) -> Issued:
    key = ec.generate_private_key(ec.SECP256R1())
    usage = x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=True,
        crl_sign=True,
        encipher_only=False,
        decipher_only=False,
    )
    cert = (
        _builder(common_name, _name(common_name), key)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(usage, critical=True)
        .sign(key, hashes.SHA256())
    )
    return Issued(cert, key)


def issue(ca: Issued, common_name: str, sans: list[x509.GeneralName], *, client: bool = False) -> Issued:
    key = ec.generate_private_key(ec.SECP256R1())
    purpose = ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH
    cert = (
        _builder(common_name, ca.cert.subject, key)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([purpose]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()), critical=False
        )
        .sign(ca.key, hashes.SHA256())
    )
    return Issued(cert, key)


@dataclass
class Pki:
    ca: Issued
    other_ca: Issued
    server: Issued
    server2: Issued
    client: Issued
    client_other_san: Issued
    client_other_ca: Issued


@pytest.fixture(scope="module")
def pki() -> Pki:
    import ipaddress

    ca = make_ca("test CA")
    other_ca = make_ca("untrusted CA")
    local = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    return Pki(
        ca=ca,
        other_ca=other_ca,
        server=issue(ca, "exporter-1", local),
        server2=issue(ca, "exporter-2", local),
        client=issue(ca, "prometheus", [x509.DNSName("scraper.example")], client=True),
        client_other_san=issue(ca, "intruder", [x509.DNSName("intruder.example")], client=True),
        client_other_ca=issue(other_ca, "prometheus", [x509.DNSName("scraper.example")], client=True),
    )


def write_pair(directory: Path, stem: str, issued: Issued) -> tuple[Path, Path]:
    cert, key = directory / f"{stem}.crt", directory / f"{stem}.key"
    cert.write_bytes(issued.cert_pem)
    key.write_bytes(issued.key_pem)
    key.chmod(0o600)
    return cert, key


def tls_dir(tmp_path: Path, pki: Pki) -> Path:
    """server.crt/server.key, ca.crt and client certificates in tmp_path."""
    write_pair(tmp_path, "server", pki.server)
    (tmp_path / "ca.crt").write_bytes(pki.ca.cert_pem)
    write_pair(tmp_path, "client", pki.client)
    write_pair(tmp_path, "client-other-san", pki.client_other_san)
    write_pair(tmp_path, "client-other-ca", pki.client_other_ca)
    return tmp_path


def users_yaml(**users: str) -> str:
    lines = ["basic_auth_users:"]
    for user, password in users.items():
        lines.append(f"  {user}: {bcrypt.hashpw(password.encode(), bcrypt.gensalt(4)).decode()}")
    return "\n".join(lines) + "\n"


TLS_YAML = """\
tls_server_config:
  cert_file: server.crt
  key_file: server.key
"""


# --- a running exporter --------------------------------------------------------------------------------


@dataclass
class Running:
    server: ExporterHTTPServer
    web: WebConfigSource

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])


@pytest.fixture
def serve(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., Running]]:
    monkeypatch.setenv(PASSWORD_ENV, "pw")
    servers: list[ExporterHTTPServer] = []

    def _serve(web_config: Path, reload_interval: float = 0.0) -> Running:
        # Interval 0: every connection re-checks the files, so a test need not wait for the real second.
        web = WebConfigSource(str(web_config), reload_interval=reload_interval)
        server = make_server(make_config(), FakeProbe(), "127.0.0.1:0", web=web)
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        servers.append(server)
        return Running(server, web)

    yield _serve
    for server in servers:
        server.shutdown()
        server.server_close()


@dataclass
class Reply:
    status: int
    headers: http.client.HTTPMessage
    body: bytes
    peer: bytes | None  # the server certificate (DER) this connection got


def client_context(
    directory: Path, client: str | None = None, max_version: ssl.TLSVersion | None = None
) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(directory / "ca.crt"))
    if client is not None:
        context.load_cert_chain(directory / f"{client}.crt", directory / f"{client}.key")
    if max_version is not None:
        context.maximum_version = max_version
    return context


def basic(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def request(
    port: int,
    path: str = "/-/healthy",
    *,
    context: ssl.SSLContext | None = None,
    headers: dict[str, str] | None = None,
    method: str = "GET",
    body: bytes | None = None,
) -> Reply:
    if context is None:
        conn: http.client.HTTPConnection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    else:
        conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=5)
    try:
        conn.connect()
        peer = conn.sock.getpeercert(binary_form=True) if context is not None else None
        conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        return Reply(response.status, response.headers, response.read(), peer)
    finally:
        conn.close()


def raw_exchange(port: int, data: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(data)
        answer = b""
        try:
            while chunk := sock.recv(65536):
                answer += chunk
        except ConnectionResetError:
            pass  # the server may close with our unread bytes still queued
    return answer


REFUSED = (OSError, http.client.HTTPException)  # ssl.SSLError, resets and early closes all land here


# --- TLS -----------------------------------------------------------------------------------------------


def test_https_with_min_tls13_refuses_a_tls12_client(tmp_path: Path, pki: Pki, serve: Callable[..., Running]):
    directory = tls_dir(tmp_path, pki)
    (directory / "web.yml").write_text(TLS_YAML + "  min_version: TLS13\n")
    running = serve(directory / "web.yml")
    reply = request(running.port, context=client_context(directory))
    assert (reply.status, reply.body) == (200, b"OK\n")
    assert reply.peer == pki.server.der
    with pytest.raises(ssl.SSLError):
        request(running.port, context=client_context(directory, max_version=ssl.TLSVersion.TLSv1_2))
    # A plain-HTTP client gets a 400 and nothing else (tests/integration/test_web_hardening.py), and the
    # server keeps serving.
    assert request(running.port).status == 400
    assert request(running.port, context=client_context(directory)).status == 200


def test_require_and_verify_client_cert(tmp_path: Path, pki: Pki, serve: Callable[..., Running]):
    directory = tls_dir(tmp_path, pki)
    (directory / "web.yml").write_text(
        TLS_YAML + "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n"
    )
    running = serve(directory / "web.yml")
    with pytest.raises(REFUSED):
        request(running.port, context=client_context(directory))  # no certificate
    with pytest.raises(REFUSED):
        request(running.port, context=client_context(directory, "client-other-ca"))
    reply = request(running.port, "/probe?target=prod-a", context=client_context(directory, "client"))
    assert reply.status == 200 and b"mssql_up" in reply.body


def test_client_allowed_sans(tmp_path: Path, pki: Pki, serve: Callable[..., Running]):
    directory = tls_dir(tmp_path, pki)
    (directory / "web.yml").write_text(
        TLS_YAML + "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n"
        "  client_allowed_sans: [scraper.example]\n"
    )
    running = serve(directory / "web.yml")
    assert request(running.port, context=client_context(directory, "client")).status == 200
    with pytest.raises(REFUSED):
        request(running.port, context=client_context(directory, "client-other-san"))


def test_verify_client_cert_if_given(tmp_path: Path, pki: Pki, serve: Callable[..., Running]):
    directory = tls_dir(tmp_path, pki)
    (directory / "web.yml").write_text(
        TLS_YAML + "  client_auth_type: VerifyClientCertIfGiven\n  client_ca_file: ca.crt\n"
    )
    running = serve(directory / "web.yml")
    assert request(running.port, context=client_context(directory)).status == 200
    assert request(running.port, context=client_context(directory, "client")).status == 200
    with pytest.raises(REFUSED):
        request(running.port, context=client_context(directory, "client-other-ca"))


def test_go_cipher_suite_names_are_applied(tmp_path: Path, pki: Pki, serve: Callable[..., Running]):
    directory = tls_dir(tmp_path, pki)
    (directory / "web.yml").write_text(
        TLS_YAML + "  max_version: TLS12\n  cipher_suites: [TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384]\n"
    )
    running = serve(directory / "web.yml")
    context = client_context(directory)
    with (
        socket.create_connection(("127.0.0.1", running.port), timeout=5) as raw,
        context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        assert tls.version() == "TLSv1.2"
        assert tls.cipher()[0] == "ECDHE-ECDSA-AES256-GCM-SHA384"


def test_rotated_certificate_serves_the_next_connection(
    tmp_path: Path, pki: Pki, serve: Callable[..., Running]
):
    directory = tls_dir(tmp_path, pki)
    (directory / "web.yml").write_text(TLS_YAML)
    running = serve(directory / "web.yml")
    context = client_context(directory)
    # A keep-alive connection opened before the rotation.
    before = http.client.HTTPSConnection("127.0.0.1", running.port, context=context, timeout=5)
    before.request("GET", "/-/healthy")
    before.getresponse().read()
    assert before.sock.getpeercert(binary_form=True) == pki.server.der

    write_pair(directory, "server", pki.server2)
    assert request(running.port, context=context).peer == pki.server2.der
    # The open connection keeps its session and still works.
    before.request("GET", "/-/healthy")
    assert before.getresponse().status == 200
    before.close()


def test_broken_rotation_keeps_the_last_good_certificate(
    tmp_path: Path, pki: Pki, serve: Callable[..., Running], caplog: pytest.LogCaptureFixture
):
    directory = tls_dir(tmp_path, pki)
    (directory / "web.yml").write_text(TLS_YAML)
    running = serve(directory / "web.yml")
    context = client_context(directory)
    with caplog.at_level(logging.INFO, logger="mssql_memory_exporter"):
        # Mid-rotation: the new certificate is written, its key not yet.
        (directory / "server.crt").write_bytes(pki.server2.cert_pem)
        for _ in range(3):
            assert request(running.port, context=context).peer == pki.server.der
        failures = [r for r in caplog.records if r.getMessage().startswith("web config reload failed")]
        assert len(failures) == 1  # logged once, not once per connection
        assert "tls_server_config.key_file: is not the key of the certificate" in failures[0].err
        assert failures[0].levelno == logging.ERROR

        (directory / "server.key").write_bytes(pki.server2.key_pem)
        assert request(running.port, context=context).peer == pki.server2.der
        assert any(r.getMessage() == "web config reloaded" for r in caplog.records)

        # A web config that is not even YAML any more: same story.
        (directory / "web.yml").write_text("tls_server_config: [\n")
        assert request(running.port, context=context).peer == pki.server2.der


def test_reload_cannot_turn_tls_off(
    tmp_path: Path, pki: Pki, serve: Callable[..., Running], caplog: pytest.LogCaptureFixture
):
    directory = tls_dir(tmp_path, pki)
    (directory / "web.yml").write_text(TLS_YAML)
    running = serve(directory / "web.yml")
    with caplog.at_level(logging.ERROR, logger="mssql_memory_exporter"):
        (directory / "web.yml").write_text("http_server_config: {}\n")
        assert request(running.port, context=client_context(directory)).status == 200
    # Still TLS: plain HTTP is told so, never served.
    assert request(running.port).body == b"Client sent an HTTP request to an HTTPS server.\n"
    assert any("needs a restart" in getattr(r, "err", "") for r in caplog.records)


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("cert_not_pem", "tls_server_config.cert_file: no PEM certificate in"),
        ("key_not_pem", "tls_server_config.key_file: no PEM private key in"),
        ("key_mismatch", "tls_server_config.key_file: is not the key of the certificate in cert_file"),
        ("key_encrypted", "tls_server_config.key_file: the key is encrypted"),
        ("key_missing", "tls_server_config.key_file: cannot read"),
        ("ca_not_pem", "tls_server_config.client_ca_file: no PEM certificate in"),
    ],
)
def test_bad_tls_files_stop_loading(tmp_path: Path, pki: Pki, case: str, expected: str):
    path = write_bad_tls_case(tmp_path, pki, case)
    with pytest.raises(ConfigError) as info:
        WebConfigSource(str(path))
    assert expected in str(info.value)
    assert all(line.startswith(f"{path}: ") for line in info.value.lines)
    assert "PRIVATE KEY" not in str(info.value)


def write_bad_tls_case(directory: Path, pki: Pki, case: str) -> Path:
    """A web config in `directory` whose TLS files are broken in the way `case` names."""
    tls_dir(directory, pki)
    extra = ""
    if case == "cert_not_pem":
        (directory / "server.crt").write_bytes(pki.server.der)
    elif case == "key_not_pem":
        (directory / "server.key").write_text("not a key\n")
    elif case == "key_mismatch":
        (directory / "server.key").write_bytes(pki.server2.key_pem)
    elif case == "key_encrypted":
        encrypted = pki.server.key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"key-password"),
        )
        (directory / "server.key").write_bytes(encrypted)
    elif case == "key_missing":
        (directory / "server.key").unlink()
    elif case == "ca_not_pem":
        (directory / "ca.crt").write_text("no certificates here\n")
        extra = "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n"
    (directory / "web.yml").write_text(TLS_YAML + extra)
    return directory / "web.yml"


def test_notes_for_settings_python_serves_differently(
    tmp_path: Path, pki: Pki, caplog: pytest.LogCaptureFixture
):
    directory = tls_dir(tmp_path, pki)
    (directory / "server.key").chmod(0o644)
    (directory / "web.yml").write_text(
        TLS_YAML + "  client_auth_type: RequestClientCert\n  curve_preferences: [X25519]\n"
        "http_server_config:\n  http2: true\n"
    )
    with caplog.at_level(logging.INFO, logger="mssql_memory_exporter"):
        WebConfigSource(str(directory / "web.yml"))
    text = caplog.text
    assert "RequestClientCert is served as NoClientCert" in text
    assert "curve_preferences is ignored" in text
    assert "http2 is ignored" in text
    assert "readable by every user" in text


# --- fixtures and the command line ---------------------------------------------------------------------


def test_fixture_directories_are_not_empty():
    assert len(BAD) >= 25 and len(GOOD) >= 3


@pytest.mark.parametrize("path", GOOD, ids=lambda p: p.name)
def test_good_fixture_loads(path: Path):
    source = WebConfigSource(str(path))
    assert source.state.ssl_context is None
    assert load_web_config(str(path)) == source.state.config


def _expected(path: Path) -> str:
    first = path.read_text().splitlines()[0] if path.read_text() else ""
    assert first.startswith("# expect: "), f"{path.name} lacks its '# expect:' line"
    return first.removeprefix("# expect: ")


@pytest.mark.parametrize("path", BAD, ids=lambda p: p.name)
def test_bad_fixture_fails_with_expected_message(path: Path):
    expected = _expected(path)
    with pytest.raises(ConfigError) as info:
        WebConfigSource(str(path))
    message = str(info.value)
    assert expected in message
    for line in message.splitlines():
        assert line.startswith(f"{path}: "), line
    for secret in ("s3cr3t-inline-value", "inline-key-material", "QOauhQNbBCuQDKes6eFzPeMq"):
        assert secret not in message


@pytest.mark.parametrize("path", BAD, ids=lambda p: p.name)
def test_bad_web_config_makes_main_return_2(
    tmp_path: Path, path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    monkeypatch.setenv(PASSWORD_ENV, "pw")
    config = tmp_path / "exporter.yml"
    config.write_text(GOOD_CONFIG)
    args = [
        "--config.file",
        str(config),
        "--web.config.file",
        str(path),
        "--web.listen-address",
        "127.0.0.1:0",
    ]
    try:
        assert main(args) == 2
    finally:
        setup_logging("info", "logfmt")
    out, err = capsys.readouterr()
    assert f"error: {path}: " in err and _expected(path) in err
    assert out == "" and "listening" not in err and "Traceback" not in err


def test_missing_web_config_file_makes_main_return_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    monkeypatch.setenv(PASSWORD_ENV, "pw")
    config = tmp_path / "exporter.yml"
    config.write_text(GOOD_CONFIG)
    absent = tmp_path / "absent.yml"
    try:
        assert main(["--config.file", str(config), "--web.config.file", str(absent)]) == 2
    finally:
        setup_logging("info", "logfmt")
    assert (
        f"error: {absent}: cannot read web config file: No such file or directory" in capsys.readouterr().err
    )


def test_bad_web_configs_stop_the_cli_subprocess_with_exit_2(tmp_path: Path, pki: Pki):
    """A few of the above as an operator meets them: the real command, its exit code and stderr."""
    config = tmp_path / "exporter.yml"
    config.write_text(GOOD_CONFIG)
    names = ["plaintext_password.yml", "cert_file_not_found.yml"]
    cases = [(DATA / "bad" / name, _expected(DATA / "bad" / name)) for name in names]
    (tmp_path / "mismatch").mkdir()
    cases.append(
        (write_bad_tls_case(tmp_path / "mismatch", pki, "key_mismatch"), "tls_server_config.key_file: ")
    )

    def run(case: tuple[Path, str]) -> tuple[Path, str, int, str, str]:
        path, expected = case
        proc = subprocess.run(
            [
                *(sys.executable, "-m", "mssql_memory_exporter", "--config.file", str(config)),
                *("--web.config.file", str(path), "--web.listen-address", "127.0.0.1:0"),
            ],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, PASSWORD_ENV: "pw"},
            check=False,
        )
        return path, expected, proc.returncode, proc.stdout, proc.stderr

    # In parallel: each run is a fresh interpreter (about half a second of imports).
    with ThreadPoolExecutor(max_workers=len(cases)) as pool:
        results = list(pool.map(run, cases))
    for path, expected, code, out, err in results:
        assert code == 2, (path.name, err)
        assert f"error: {path}: " in err and expected in err, (path.name, err)
        assert "Traceback" not in err and out == "" and "listening" not in err
        assert "s3cr3t-inline-value" not in err


def test_cli_serves_https_with_basic_auth_and_never_logs_the_password(tmp_path: Path, pki: Pki):
    directory = tls_dir(tmp_path, pki)
    config = tmp_path / "exporter.yml"
    config.write_text(GOOD_CONFIG)
    (directory / "web.yml").write_text(TLS_YAML + users_yaml(prometheus=PASSWORD))
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            FAKE_SCRAPE_MAIN,
            "--config.file",
            str(config),
            "--web.config.file",
            str(directory / "web.yml"),
            "--web.listen-address",
            "127.0.0.1:0",
            "--log.level",
            "debug",
        ],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, PASSWORD_ENV: "pw"},
    )
    lines: list[str] = []
    listening = threading.Event()

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            if "msg=listening" in line:
                listening.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert listening.wait(20), lines
        line = next(line for line in lines if "msg=listening" in line)
        assert "tls=true" in line and "basic_auth=true" in line
        port = int(line.split("address=")[1].split()[0].rsplit(":", 1)[1])
        context = client_context(directory)
        assert request(port, context=context).status == 401
        assert request(port, context=context, headers=basic("prometheus", WRONG_PASSWORD)).status == 401
        reply = request(port, "/metrics", context=context, headers=basic("prometheus", PASSWORD))
        assert reply.status == 200 and b"mssql_up 1.0" in reply.body
        opener = urllib.request.build_opener(urllib.request.HTTPSHandler(context=context))
        with pytest.raises(urllib.error.HTTPError):
            opener.open(f"https://127.0.0.1:{port}/-/healthy", timeout=5)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    reader.join(5)
    text = "".join(lines)
    assert "level=debug msg=request" in text  # debug logging really was on
    for secret in (PASSWORD, WRONG_PASSWORD, base64.b64encode(f"prometheus:{PASSWORD}".encode()).decode()):
        assert secret not in text
    assert "Traceback" not in text


def test_passwords_never_reach_the_logs(
    tmp_path: Path,
    serve: Callable[..., Running],
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
):
    (tmp_path / "web.yml").write_text(users_yaml(prometheus=PASSWORD))
    with caplog.at_level(logging.DEBUG):
        running = serve(tmp_path / "web.yml")
        request(running.port, headers=basic("prometheus", PASSWORD))
        request(running.port, headers=basic("prometheus", WRONG_PASSWORD))
        request(running.port, headers=basic(PASSWORD, PASSWORD))
        request(running.port, f"/probe?target={WRONG_PASSWORD[:3]}", headers=basic("prometheus", PASSWORD))
        # A reload where the operator pasted the new password itself instead of its hash.
        (tmp_path / "web.yml").write_text(f"basic_auth_users:\n  prometheus: '{NEW_PASSWORD}'\n")
        request(running.port, headers=basic("prometheus", NEW_PASSWORD))
        raw_exchange(
            running.port,
            f"GET /x HTTP/1.1\r\nAuthorization: Basic {PASSWORD}\r\nConnection: close\r\n\r\n".encode(),
        )
    formatter = LogfmtFormatter()
    text = "\n".join(formatter.format(record) for record in caplog.records) + "".join(capfd.readouterr())
    assert "basic auth failed" in text and "web config reload failed" in text  # the paths were taken
    for secret in (PASSWORD, WRONG_PASSWORD, NEW_PASSWORD):
        assert secret not in text
