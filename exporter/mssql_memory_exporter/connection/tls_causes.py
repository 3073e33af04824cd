"""Why Microsoft's ODBC Driver 18 could not set up TLS, in words naming the cause.

Driver 18 passes OpenSSL's verify error through ("SSL Provider: [error:0A000086:SSL routines::certificate
verify failed:<reason>]"); a server that does not speak TDS 8.0 shows only as a connection closed during
the handshake. The reasons below are the ones measured against the stand-in (tests/test_strict.py); the
driver's own text stays in front of ours.
"""

from __future__ import annotations

from ..config import TargetConfig

# OpenSSL's verify reason -> what it means for the target.
_VERIFY = (
    (
        ("unable to get local issuer certificate", "self-signed certificate", "self signed certificate"),
        "the server's certificate is not signed by a CA this host trusts (Driver 18 reads OpenSSL's trust "
        "store: the system's CA bundle, or the file SSL_CERT_FILE names; docs/drivers.md)",
    ),
    (
        ("subject name does not match host name", "hostname mismatch"),
        "the server's certificate does not name {host}",
    ),
    (("certificate has expired",), "the server's certificate has expired"),
    (("certificate is not yet valid",), "the server's certificate is not valid yet (check the clocks)"),
)
# What Driver 18 says when the server closes the connection during TDS 8.0's TLS handshake.
_CLOSED = ("TCP Provider: Error code 0x2746", "error was encountered during handshakes before login")


def tls_failure_cause(target: TargetConfig, message: str) -> str | None:
    """The cause of a failed TLS set-up, or None when `message` is not one."""
    if "certificate verify failed" in message:
        for needles, cause in _VERIFY:
            if any(needle in message for needle in needles):
                return cause.format(host=target.host)
        return "the server's certificate failed verification"
    if target.encryption == "strict" and any(needle in message for needle in _CLOSED):
        return (
            "the server closed the connection during the TDS 8.0 (encryption: strict) handshake: it does "
            "not speak TDS 8.0 (SQL Server before 2022, or a port without strict encryption); use "
            "encryption: require for it"
        )
    return None
