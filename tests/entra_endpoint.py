"""A managed identity token endpoint on loopback, as App Service and Azure Arc serve it to azure-identity
(IDENTITY_ENDPOINT + IDENTITY_HEADER, api-version 2019-08-01), handing out JWTs signed by a key the test
makes; the stand-in (tests/standin/fedauth.py) checks them with the public half.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

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
