"""Where the exporter listens: the addresses of a repeatable `--web.listen-address`, or the sockets systemd
passes with `--web.systemd-socket` (exporter-toolkit's flags, same meaning). The first listening socket
belongs to the ExporterHTTPServer itself; each further one has an ExtraListener that accepts on it and
hands its connections to that server's connection loop, so every address shares one loop, one pool and
one set of limits."""

from __future__ import annotations

import os
import socket
import socketserver
import stat
from collections.abc import Callable
from typing import Any, NamedTuple

from .requests import parse_listen_address

# sd_listen_fds(3): the first passed descriptor is 3, the number of them is in LISTEN_FDS, and LISTEN_PID
# names the process they are for (so a child that inherits the environment does not take them too).
SD_LISTEN_FDS_START = 3


class Bind(NamedTuple):
    family: socket.AddressFamily
    address: tuple[Any, ...]
    dual_stack: bool


def resolve(listen: str) -> Bind:
    """Where `listen` binds: `:port` is every interface (IPv4 and IPv6 where the system has both)."""
    host, port = parse_listen_address(listen)
    if not host:
        if socket.has_dualstack_ipv6():
            return Bind(socket.AF_INET6, ("::", port), True)
        return Bind(socket.AF_INET, ("0.0.0.0", port), False)
    resolved = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    # A name such as localhost can resolve to both families; like Go exporters, take IPv4 first.
    family, _, _, _, sockaddr = min(resolved, key=lambda info: info[0] != socket.AF_INET)
    return Bind(family, sockaddr, False)


class SystemdSocketError(Exception):
    """--web.systemd-socket without usable sockets from systemd; the message says what is wrong."""


def systemd_sockets(environ: dict[str, str] | None = None) -> list[socket.socket]:
    """The listening TCP sockets systemd passed (socket activation), taking them over: the variables are
    removed from this process's environment, as sd_listen_fds(1) does, so nothing this process starts
    believes the sockets are its own."""
    env = os.environ if environ is None else environ
    pid_text, count_text = env.get("LISTEN_PID", ""), env.get("LISTEN_FDS", "")
    if not count_text:
        raise SystemdSocketError(
            "--web.systemd-socket: no sockets passed (LISTEN_FDS is not set); start "
            "the exporter from a systemd .socket unit, or drop the flag"
        )
    if pid_text and pid_text != str(os.getpid()):
        raise SystemdSocketError(f"--web.systemd-socket: LISTEN_PID={pid_text} names another process")
    if not count_text.isdigit() or int(count_text) < 1:
        raise SystemdSocketError(f"--web.systemd-socket: LISTEN_FDS={count_text!r} is not a positive number")
    sockets = []
    for fd in range(SD_LISTEN_FDS_START, SD_LISTEN_FDS_START + int(count_text)):
        sockets.append(_listening_socket(fd))
    for name in ("LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"):
        env.pop(name, None)
    return sockets


def _listening_socket(fd: int) -> socket.socket:
    try:
        mode = os.fstat(fd).st_mode
    except OSError as exc:
        raise SystemdSocketError(f"--web.systemd-socket: descriptor {fd}: {exc.strerror}") from None
    if not stat.S_ISSOCK(mode):
        raise SystemdSocketError(f"--web.systemd-socket: descriptor {fd} is not a socket")
    sock = socket.socket(fileno=fd)
    os.set_inheritable(fd, False)
    if sock.type != socket.SOCK_STREAM or sock.family not in (socket.AF_INET, socket.AF_INET6):
        raise SystemdSocketError(
            f"--web.systemd-socket: descriptor {fd} is not a TCP socket (use ListenStream= with a port)"
        )
    if not sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):
        raise SystemdSocketError(f"--web.systemd-socket: descriptor {fd} is not listening (Accept=no)")
    return sock


class ExtraListener(socketserver.TCPServer):
    """A further listening socket of one ExporterHTTPServer: accepts (with the server's back-off and TLS
    set-up) and hands each connection to that server."""

    def __init__(
        self,
        sock: socket.socket,
        accept: Callable[[socket.socket], tuple[socket.socket, Any]],
        owner: socketserver.BaseServer,
    ) -> None:
        self.address_family = sock.family
        super().__init__(sock.getsockname(), socketserver.BaseRequestHandler, bind_and_activate=False)
        self.socket.close()
        self.socket = sock
        self.server_address = sock.getsockname()
        self._accept = accept
        self._owner = owner

    def get_request(self) -> tuple[socket.socket, Any]:
        return self._accept(self.socket)

    def process_request(self, request: Any, client_address: Any) -> None:
        self._owner.process_request(request, client_address)

    def handle_error(self, request: Any, client_address: Any) -> None:
        self._owner.handle_error(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        self._owner.shutdown_request(request)


def bound_socket(bind: Bind, backlog: int) -> socket.socket:
    """A listening socket for `bind` (SO_REUSEADDR as TCPServer sets it)."""
    sock = socket.socket(bind.family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if bind.dual_stack:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        sock.bind(bind.address)
        sock.listen(backlog)
    except BaseException:
        sock.close()
        raise
    return sock
