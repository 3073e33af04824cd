"""A managed identity token endpoint on loopback, as App Service and Azure Arc serve it to azure-identity
(IDENTITY_ENDPOINT + IDENTITY_HEADER, api-version 2019-08-01), handing out JWTs signed by a key the test
makes; the stand-in (tests/standin/fedauth.py) checks them with the public half.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import jwt
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

from tests.standin.fedauth import AUDIENCE


@dataclass
class SigningKey:
    private_pem: bytes
    public_pem: bytes

    @classmethod
    def make(cls) -> SigningKey:
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        private = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        public = key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        return cls(private, public)

    def token(self, oid: str, *, audience: str = AUDIENCE, lifetime: float = 3600.0) -> tuple[str, int]:
        now = int(time.time())
        expires = int(now + lifetime)
        claims = {
            "aud": audience,
            "oid": oid,
            "iat": now,
            "nbf": now - 60,
            "exp": expires,
            "jti": str(uuid.uuid4()),
        }
        return jwt.encode(claims, self.private_pem, algorithm="RS256"), expires


@dataclass
class ManagedIdentityEndpoint:
    key: SigningKey
    oid: str
    header: str = field(default_factory=lambda: uuid.uuid4().hex)
    audience: str = AUDIENCE
    lifetime: float = 3600.0
    requests: list[dict[str, list[str]]] = field(default_factory=list)
    issued: list[str] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}/msi/token"

    def env(self) -> dict[str, str]:
        return {"IDENTITY_ENDPOINT": self.url, "IDENTITY_HEADER": self.header}

    def __enter__(self) -> ManagedIdentityEndpoint:
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                query = parse_qs(urlsplit(self.path).query)
                endpoint.requests.append(query)
                if self.headers.get("X-IDENTITY-HEADER") != endpoint.header:
                    self._answer(401, {"error": "unauthorized", "error_description": "bad identity header"})
                    return
                token, expires = endpoint.key.token(
                    endpoint.oid, audience=endpoint.audience, lifetime=endpoint.lifetime
                )
                endpoint.issued.append(token)
                resource = query.get("resource", [""])[0]
                self._answer(
                    200,
                    {
                        "access_token": token,
                        "expires_on": str(expires),
                        "resource": resource,
                        "token_type": "Bearer",
                    },
                )

            def _answer(self, status: int, body: dict[str, str]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:  # quiet: the tests read `requests`
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()


@dataclass
class AuthorityEndpoint:
    """An Entra ID authority on loopback over https (azure-identity insists on https for one): OpenID
    discovery and the v2.0 token endpoint for client credentials, with `secrets` the valid client
    secrets (remove one to revoke it). `tls` is a server-side context for a certificate the test's CA
    signed; azure-identity trusts that CA through REQUESTS_CA_BUNDLE."""

    key: SigningKey
    oid: str
    tenant: str
    tls: Any
    secrets: set[str] = field(default_factory=set)
    # Federated tokens (a Kubernetes service account's) accepted as client assertions: workload identity.
    assertions: set[str] = field(default_factory=set)
    # Public keys (PEM) of registered certificates: a client assertion signed by one is accepted.
    certificates: list[bytes] = field(default_factory=list)
    lifetime: float = 3600.0
    requests: list[dict[str, list[str]]] = field(default_factory=list)
    issued: list[str] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None

    @property
    def authority(self) -> str:
        assert self._server is not None
        return f"https://localhost:{self._server.server_address[1]}"

    def signed_by_a_certificate(self, assertion: str) -> bool:
        for public in self.certificates:
            try:
                jwt.decode(assertion, public, algorithms=["RS256", "PS256"], options={"verify_aud": False})
                return True
            except jwt.PyJWTError:
                continue
        return False

    def __enter__(self) -> AuthorityEndpoint:
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                base = f"{endpoint.authority}/{endpoint.tenant}"
                if urlsplit(self.path).path.endswith("/.well-known/openid-configuration"):
                    self._answer(
                        200,
                        {
                            "token_endpoint": f"{base}/oauth2/v2.0/token",
                            "authorization_endpoint": f"{base}/oauth2/v2.0/authorize",
                            "device_authorization_endpoint": f"{base}/oauth2/v2.0/devicecode",
                            "issuer": f"{base}/v2.0",
                        },
                    )
                else:
                    self._answer(404, {"error": "not_found"})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                form = parse_qs(self.rfile.read(length).decode())
                endpoint.requests.append(
                    {k: v for k, v in form.items() if k not in ("client_secret", "client_assertion")}
                )
                secret_ok = form.get("client_secret", [""])[0] in endpoint.secrets
                assertion = form.get("client_assertion", [""])[0]
                assertion_ok = assertion in endpoint.assertions or endpoint.signed_by_a_certificate(assertion)
                if not (secret_ok or assertion_ok):
                    self._answer(
                        401,
                        {
                            "error": "invalid_client",
                            "error_description": "AADSTS7000215: Invalid client secret provided.",
                            "error_codes": [7000215],
                        },
                    )
                    return
                token, _ = endpoint.key.token(endpoint.oid, lifetime=endpoint.lifetime)
                endpoint.issued.append(token)
                self._answer(
                    200,
                    {"token_type": "Bearer", "expires_in": int(endpoint.lifetime), "access_token": token},
                )

            def _answer(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.socket = self.tls.wrap_socket(self._server.socket, server_side=True)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()


def client_certificate(directory: Path) -> tuple[Path, bytes]:
    """A self-signed RSA client certificate as an app registration holds one: (PEM file with the key and
    the certificate, the public key's PEM for the authority)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "mssql-exporter-test-app")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(hours=1)).not_valid_after(now + dt.timedelta(days=2))
        .sign(key, hashes.SHA256())
    )  # fmt: skip
    path = directory / "client-cert.pem"
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        + cert.public_bytes(serialization.Encoding.PEM)
    )
    path.chmod(0o600)
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return path, public
