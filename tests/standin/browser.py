"""A SQL Server Browser stand-in: answers instance-name lookups ([MC-SQLR]) on UDP, so targets configured
by `instance:` instead of `port:` can be tested through the real driver.

A client that connects to `host\\NAME` first sends CLNT_UCAST_INST (0x04 followed by the instance name)
to UDP port 1434 of the host; the Browser answers SVR_RESP (0x05, a little-endian 16-bit length, then
`ServerName;H;InstanceName;NAME;IsClustered;No;Version;V;tcp;PORT;;`). The drivers always ask port
1434, so this stand-in binds that port (tests run as root on CI machines; without the privilege the
test that needs it skips). `silent=True` receives and never answers, as a Browser behind a firewall.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading

BROWSER_PORT = 1434
CLNT_UCAST_INST = 0x04
SVR_RESP = 0x05


def svr_resp(server: str, instance: str, version: str, tcp_port: int) -> bytes:
    data = (
        f"ServerName;{server};InstanceName;{instance};IsClustered;No;Version;{version};tcp;{tcp_port};;"
    ).encode("ascii")
    return struct.pack("<BH", SVR_RESP, len(data)) + data


class BrowserStandIn:
    """Answers lookups of the instances in `instances` (name -> TCP port); case-insensitive, as SQL
    Server's instance names are. Unknown names get no answer, as the real Browser does."""

    def __init__(
        self,
        instances: dict[str, int],
        host: str = "127.0.0.1",
        port: int = BROWSER_PORT,
        silent: bool = False,
        version: str = "15.0.2000.5",
    ) -> None:
        self.instances = {name.upper(): tcp for name, tcp in instances.items()}
        self.host = host
        self.port = port
        self.silent = silent
        self.version = version
        self.requests: list[str] = []  # instance names asked for, in order
        self._sock: socket.socket | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port))
        sock.settimeout(0.2)  # lets stop() end the loop without a wake-up socket
        self._sock = sock
        self._thread = threading.Thread(target=self._loop, name=f"browser-{self.port}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        sock, self._sock = self._sock, None
        if self._thread is not None:
            self._thread.join(2)
        if sock is not None:
            sock.close()

    def __enter__(self) -> BrowserStandIn:
        self.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def _loop(self) -> None:
        while True:
            sock = self._sock
            if sock is None:
                return
            try:
                packet, peer = sock.recvfrom(4096)
            except TimeoutError:
                continue
            except OSError:
                return
            if not packet or packet[0] != CLNT_UCAST_INST:
                continue
            name = packet[1:].split(b"\x00", 1)[0].decode("ascii", "replace")
            self.requests.append(name)
            tcp_port = self.instances.get(name.upper())
            if self.silent or tcp_port is None:
                continue
            with contextlib.suppress(OSError):
                sock.sendto(svr_resp(socket.gethostname(), name, self.version, tcp_port), peer)
