"""A real MIT Kerberos KDC for the Windows-authentication tests: Debian's `krb5kdc` with a throwaway
realm in a temp directory, on loopback, on a free port.

Principals and keytabs are made with `kadmin.local` (it opens the database directly: no kadmind).
Clients find the realm through the krb5.conf written here, so every process that should use it gets
`env()` (KRB5_CONFIG, KRB5_KDC_PROFILE). TCP only (`udp_preference_limit = 1`): a stopped KDC then
refuses at once instead of letting each client wait out UDP retries.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

REALM = "EXPORTER.TEST"
TOOLS = ("krb5kdc", "kadmin.local", "kdb5_util")


def missing_tools() -> list[str]:
    sbin = os.environ.get("PATH", "") + os.pathsep + "/usr/sbin:/sbin"
    return [tool for tool in TOOLS if shutil.which(tool, path=sbin) is None]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Kdc:
    """One realm, one KDC process. `stop()` and `start()` again keep the database and the port."""

    def __init__(self, directory: Path, *, max_life: str = "10h", clockskew_seconds: int = 300) -> None:
        self.directory = directory
        self.port = _free_port()
        self.realm = REALM
        self.krb5_conf = directory / "krb5.conf"
        self.kdc_conf = directory / "kdc.conf"
        self.log = directory / "kdc.log"
        self._process: subprocess.Popen[bytes] | None = None
        self._write_configs(max_life, clockskew_seconds)
        # The master key only protects this throwaway database; kdb5_util takes it from -P.
        self._run(["kdb5_util", "create", "-s", "-r", REALM, "-P", "throwaway-master-key"])

    def _write_configs(self, max_life: str, clockskew_seconds: int) -> None:
        d = self.directory
        self.kdc_conf.write_text(
            "[kdcdefaults]\n"
            f"  kdc_listen = 127.0.0.1:{self.port}\n"
            f"  kdc_tcp_listen = 127.0.0.1:{self.port}\n"
            "[realms]\n"
            f"  {REALM} = {{\n"
            f"    database_name = {d}/principal\n"
            f"    key_stash_file = {d}/stash\n"
            f"    acl_file = {d}/kadm5.acl\n"
            f"    max_life = {max_life}\n"
            "    max_renewable_life = 0\n"
            "    supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal\n"
            "  }\n"
            "[logging]\n"
            f"  kdc = FILE:{self.log}\n"
        )
        (d / "kadm5.acl").write_text("")
        # rdns/dns_canonicalize_hostname off: the service principal is the name FreeTDS builds, and
        # `localhost` must not turn into this machine's own name on the way.
        self.krb5_conf.write_text(
            "[libdefaults]\n"
            f"  default_realm = {REALM}\n"
            "  dns_lookup_kdc = false\n"
            "  dns_lookup_realm = false\n"
            "  dns_canonicalize_hostname = false\n"
            "  rdns = false\n"
            "  udp_preference_limit = 1\n"
            f"  clockskew = {clockskew_seconds}\n"
            "[realms]\n"
            f"  {REALM} = {{\n"
            f"    kdc = 127.0.0.1:{self.port}\n"
            "  }\n"
            "[domain_realm]\n"
            f"  localhost = {REALM}\n"
        )

    def env(self) -> dict[str, str]:
        return {"KRB5_CONFIG": str(self.krb5_conf), "KRB5_KDC_PROFILE": str(self.kdc_conf)}

    def _run(self, argv: list[str]) -> str:
        env = {**os.environ, **self.env(), "PATH": os.environ.get("PATH", "") + ":/usr/sbin:/sbin"}
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{argv[0]} failed ({done.returncode}): {done.stderr.strip()}")
        return done.stdout

    def kadmin(self, query: str) -> str:
        return self._run(["kadmin.local", "-r", REALM, "-q", query])

    def add_principal(self, name: str, *, max_life: str | None = None) -> str:
        """A principal with a random key (only a keytab can log in as it); returns name@REALM."""
        life = f'-maxlife "{max_life}" ' if max_life else ""
        self.kadmin(f"addprinc -randkey {life}{name}")
        return f"{name}@{REALM}"

    def add_password_principal(self, name: str, password: str) -> str:
        self.kadmin(f'addprinc -pw "{password}" {name}')
        return f"{name}@{REALM}"

    def keytab(self, name: str, path: Path) -> Path:
        """Export the principal's current keys to `path` (mode 0600), without changing them."""
        self.kadmin(f"ktadd -k {path} -norandkey {name}")
        path.chmod(0o600)
        return path

    def set_max_life(self, name: str, max_life: str) -> None:
        self.kadmin(f'modprinc -maxlife "{max_life}" {name}')

    def start(self) -> None:
        env = {**os.environ, **self.env()}
        sbin = shutil.which("krb5kdc", path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")
        assert sbin is not None
        self._process = subprocess.Popen(
            [sbin, "-n", "-P", str(self.directory / "kdc.pid")],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=(self.directory / "kdc.stderr").open("ab"),
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"krb5kdc exited: {(self.directory / 'kdc.stderr').read_text()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"krb5kdc did not listen on 127.0.0.1:{self.port} within 30 s")

    def stop(self) -> None:
        if self._process is None:
            return
        self._process.terminate()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait(timeout=10)
        self._process = None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None
