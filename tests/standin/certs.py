"""Throwaway certificate authorities and server certificates for the stand-in's TLS (made per test run;
no private key is committed)."""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class Pem:
    cert: Path
    key: Path
    _cert_obj: x509.Certificate
    _key_obj: ec.EllipticCurvePrivateKey


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _write(directory: Path, stem: str, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> Pem:
    directory.mkdir(parents=True, exist_ok=True)
    cert_path, key_path = directory / f"{stem}.pem", directory / f"{stem}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    key_path.chmod(0o600)
    return Pem(cert_path, key_path, cert, key)


def _validity(builder: x509.CertificateBuilder) -> x509.CertificateBuilder:
    now = dt.datetime.now(dt.UTC)
    return builder.not_valid_before(now - dt.timedelta(hours=1)).not_valid_after(now + dt.timedelta(days=2))


def make_ca(directory: Path, stem: str = "ca", common_name: str = "Stand-in test CA") -> Pem:
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        _validity(x509.CertificateBuilder())
        .subject_name(_name(common_name))
        .issuer_name(_name(common_name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(key, hashes.SHA256())
    )
    return _write(directory, stem, cert, key)


def issue_server(
    ca: Pem, directory: Path, stem: str = "server", names: tuple[str, ...] = (), *, expired: bool = False
) -> Pem:
    """A TLS server certificate signed by `ca`; `names` are DNS names or IP addresses (SANs); `expired`
    makes one whose validity ended yesterday."""
    names = names or ("localhost", "127.0.0.1")
    sans: list[x509.GeneralName] = []
    for name in names:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            sans.append(x509.DNSName(name))
    key = ec.generate_private_key(ec.SECP256R1())
    builder = _validity(x509.CertificateBuilder())
    if expired:
        now = dt.datetime.now(dt.UTC)
        builder = x509.CertificateBuilder().not_valid_before(now - dt.timedelta(days=30))
        builder = builder.not_valid_after(now - dt.timedelta(days=1))
    cert = (
        builder
        .subject_name(_name(names[0]))
        .issuer_name(ca._cert_obj.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca._key_obj, hashes.SHA256())
    )
    return _write(directory, stem, cert, key)


def standard_pki(directory: Path) -> dict[str, Pem]:
    """What the TLS tests need: a CA, a stranger CA, a server certificate for localhost/127.0.0.1 from
    the CA, and one from the CA for a name the tests never connect to."""
    ca, other = make_ca(directory, "ca"), make_ca(directory, "other-ca", "Some other CA")
    return {
        "ca": ca,
        "other": other,
        "server": issue_server(ca, directory, "server", ("localhost", "127.0.0.1")),
        "wrong-name": issue_server(ca, directory, "wrong-name", ("db.example.org",)),
    }
