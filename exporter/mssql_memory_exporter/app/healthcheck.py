"""`--healthcheck`: ask a running exporter whether it serves, for a container's HEALTHCHECK.

The check runs as a separate process and cannot see the server's flags, so a fixed 127.0.0.1:9399 went
wrong as soon as an operator changed `--web.listen-address`. The address is taken, in order, from this
command's own `--web.listen-address` when given on its command line, from the exporter running as the
container's PID 1 (its /proc/1/cmdline), and else the default. Any HTTP answer below 500 counts as
serving: 401 (basic auth) and the 400 a TLS port gives plain HTTP both prove a live listener, and the
check needs neither a password nor a client certificate.
"""

from __future__ import annotations

import http.client
from pathlib import Path

from ..web import parse_listen_address

DEFAULT_LISTEN = ":9399"
LISTEN_FLAG = "--web.listen-address"
TIMEOUT_SECONDS = 4.0


def _flag_value(args: list[str]) -> str | None:
    for index, arg in enumerate(args):
        if arg.startswith(LISTEN_FLAG + "="):
            return arg.split("=", 1)[1]
        if arg == LISTEN_FLAG and index + 1 < len(args):
            return args[index + 1]
    return None


def pid1_listen_address(cmdline: Path = Path("/proc/1/cmdline")) -> str | None:
    """The listen address of the exporter running as PID 1, if PID 1 is one (a container)."""
    try:
        args = [a.decode("utf-8", "replace") for a in cmdline.read_bytes().split(b"\0") if a]
    except OSError:
        return None
    if not any("mssql-memory-exporter" in a or "mssql_memory_exporter" in a for a in args[:3]):
        return None
    return _flag_value(args) or DEFAULT_LISTEN


def _hosts(host: str) -> list[str]:
    if host in ("", "0.0.0.0"):
        return ["127.0.0.1", "::1"]
    if host == "::":
        return ["::1", "127.0.0.1"]
    return [host]


def check(listen: str) -> tuple[bool, str]:
    """(serving, what was found) for the exporter listening on `listen`."""
    host, port = parse_listen_address(listen)
    problems = []
    for candidate in _hosts(host):
        conn = http.client.HTTPConnection(candidate, port, timeout=TIMEOUT_SECONDS)
        try:
            conn.request("GET", "/-/healthy")
            status = conn.getresponse().status
        except (TimeoutError, OSError, http.client.HTTPException) as exc:
            problems.append(f"{candidate}:{port}: {exc}")
            continue
        finally:
            conn.close()
        if status < 500:
            return True, f"{candidate}:{port} answered {status}"
        problems.append(f"{candidate}:{port} answered {status}")
    return False, "; ".join(problems)


def main(listen: str | None) -> int:
    address = listen or pid1_listen_address() or DEFAULT_LISTEN
    try:
        ok, found = check(address)
    except ValueError as exc:
        print(f"unhealthy: {exc}")
        return 1
    print(("healthy: " if ok else "unhealthy: ") + found)
    return 0 if ok else 1
