"""Kerberos tickets for FreeTDS's GSSAPI logins.

FreeTDS takes its Kerberos credentials from the process's default credential cache (KRB5CCNAME), so
the variable is set once, from the thread that builds the Scraper, before any connection is opened
(setenv while another thread is inside the driver's getenv is not safe; see freetds.py).

With a keytab the exporter keeps its own cache, in its private directory (freetds.private_directory):
tickets are fetched from the keytab through MIT's GSSAPI library (python-gssapi, the `kerberos`
extra), like `kinit -k` but with nothing on a command line, into a new cache file that then replaces
the old one whole, so a login never sees a half-written cache. They are fetched again at the first
login after half of their lifetime has passed, so a KDC that is down for a while does not stop logins
while the old ticket lasts. With `ccache` someone else keeps the cache fresh (k5start, sssd); an
expired one is reported before FreeTDS is asked to log in.

Nothing here reads key material: the keytab's path goes to the library, never its content.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import threading
import time
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path

from ..config import ExporterConfig
from ..config.windows_auth import KerberosSettings
from . import freetds

log = logging.getLogger(__name__)

ENV = "KRB5CCNAME"
CCACHE_NAME = "krb5cc"
RENEW_AFTER = 0.5  # of a ticket's lifetime, as MIT's own refresh does
# How long start-up (and a reload) waits for the first tickets: the default scrape timeout. A login waits
# for the KDC as long as its own budget allows.
STARTUP_KDC_WAIT_SECONDS = 10.0


class KerberosError(Exception):
    """No usable ticket; the message names the principal, the cache or the KDC, never a key."""


def _gssapi():  # noqa: ANN202 - the module, imported when Kerberos is configured
    try:
        import gssapi
    except ImportError:
        raise KerberosError(
            "Kerberos logins from a keytab need the python-gssapi package: install the exporter with "
            "its `kerberos` extra (it builds against libkrb5-dev)"
        ) from None
    return gssapi


def kdc_description(realm: str) -> str:
    """Where krb5.conf says the realm's KDCs are, for a log line a DBA can act on."""
    files = os.environ.get("KRB5_CONFIG", "/etc/krb5.conf").split(":")
    for name in files:
        try:
            text = Path(name).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        block = re.search(rf"^\s*{re.escape(realm)}\s*=\s*\{{(.*?)\}}", text, re.MULTILINE | re.DOTALL)
        if block:
            kdcs = re.findall(r"^\s*kdc\s*=\s*(\S+)", block.group(1), re.MULTILINE)
            if kdcs:
                return f"KDC {', '.join(kdcs)} of realm {realm} (from {name})"
    return f"the KDC of realm {realm} (found through DNS or krb5.conf)"


def _realm_of(principal: str | None) -> str:
    return principal.rpartition("@")[2] if principal and "@" in principal else "the default realm"


class TicketKeeper:
    """Keeps the process's credential cache usable for the configured Kerberos identity."""

    def __init__(self, settings: KerberosSettings) -> None:
        self.settings = settings
        self._lock = threading.Lock()
        self._renew_at = 0.0  # monotonic; 0: fetch at the first chance
        self._expires_at = 0.0
        self.cache: str | None = settings.ccache
        self._cache_holder: str | None = None  # the principal the given ccache held at the last login
        self._fetch: Future[None] | None = None  # the keytab fetch in flight, in a thread of its own

    def prepare(self) -> None:
        """Point KRB5CCNAME at the cache and, with a keytab, fetch the first tickets. A KDC that cannot
        be reached is logged, not fatal: each login tries again, and says why it cannot log in. A KDC
        that does not answer holds start-up for STARTUP_KDC_WAIT_SECONDS at most, and a stop signal
        ends that wait at once (the fetch runs in a thread of its own)."""
        if self.settings.keytab is not None:
            # The directory's name is fixed for the process; it is made (again) at each fetch.
            self.cache = f"FILE:{freetds.private_directory_path() / CCACHE_NAME}"
        if self.cache is not None and os.environ.get(ENV) != self.cache:
            os.environ[ENV] = self.cache
        if self.settings.keytab is not None:
            try:
                freetds.private_directory(reopen=True)
                self.ready(STARTUP_KDC_WAIT_SECONDS)
            except (KerberosError, freetds.FreeTdsConfError) as exc:
                log.warning("no Kerberos ticket at start-up", extra={"err": str(exc)})

    def ready(self, timeout: float = STARTUP_KDC_WAIT_SECONDS) -> None:
        """Called before each login: renew from the keytab when due, or check the given cache. The KDC
        gets `timeout` seconds (the login's budget): MIT's library waits about a minute for a KDC that
        accepts and never answers, which hung start-up, scrapes and renewals alike (issue 36). On
        timeout a ticket still valid is used; without one the error names the KDC."""
        if self.settings.keytab is not None:
            with self._lock:
                fetch = None
                if time.monotonic() >= self._renew_at:
                    if self._fetch is None or self._fetch.done():
                        self._fetch = Future()
                        threading.Thread(
                            target=self._fetch_into, args=(self._fetch,), name="kerberos-fetch", daemon=True
                        ).start()
                    fetch = self._fetch
            if fetch is None:
                return
            try:
                fetch.result(timeout=max(0.0, timeout))
            except FutureTimeout:
                settings = self.settings
                message = (
                    f"{kdc_description(_realm_of(settings.principal))} did not answer a ticket request "
                    f"for {settings.principal} within {timeout:g} s"
                )
                still = self._expires_at - time.monotonic()
                if still > 0:
                    log.warning(
                        f"{message}; logging in with the ticket still valid",
                        extra={"valid_for_seconds": round(still)},
                    )
                    return
                raise KerberosError(message) from None
        elif self.settings.ccache is not None:
            holder = self._check_cache()
            if holder != self._cache_holder:
                self._cache_holder = holder
                # Who logs in, said once per change: the config's principal is only a check.
                log.info(
                    "Kerberos logins use the credential cache",
                    extra={"ccache": self.settings.ccache, "principal": holder},
                )

    def _fetch_into(self, future: Future[None]) -> None:
        try:
            self._renew()
        except BaseException as exc:  # every outcome reaches the login waiting for it
            future.set_exception(exc)
        else:
            future.set_result(None)

    def _renew(self) -> None:
        gssapi = _gssapi()
        settings = self.settings
        assert settings.keytab is not None and settings.principal is not None
        directory = freetds.private_directory()
        target = directory / CCACHE_NAME
        fresh = directory / f".{CCACHE_NAME}.{os.getpid()}.{threading.get_ident()}"
        name = gssapi.Name(settings.principal, gssapi.NameType.kerberos_principal)
        # A new, empty cache each time: given one that still holds tickets, the library would hand
        # those back instead of asking the KDC. It fills it from the keytab, and it then replaces the
        # cache FreeTDS reads whole.
        with contextlib.suppress(FileNotFoundError):
            fresh.unlink()
        try:
            creds = gssapi.Credentials(
                name=name,
                usage="initiate",
                store={"client_keytab": settings.keytab, "ccache": f"FILE:{fresh}"},
            )
            lifetime = creds.lifetime
            os.replace(fresh, target)
        except gssapi.exceptions.GSSError as exc:
            with contextlib.suppress(OSError):
                fresh.unlink()
            still = self._expires_at - time.monotonic()
            keytab_problem = _keytab_problem(gssapi, name, settings.keytab)
            if keytab_problem is not None:
                # The keytab, not the KDC: the library's initiate error ("No credentials cache found")
                # says neither (issue 36).
                message = (
                    f"cannot get a Kerberos ticket for {settings.principal} with keytab {settings.keytab}: "
                    f"{keytab_problem}"
                )
            else:
                message = (
                    f"cannot get a Kerberos ticket for {settings.principal} with keytab {settings.keytab} "
                    f"from {kdc_description(_realm_of(settings.principal))}: {_reason(exc)}"
                )
            if still > 0:
                # The old ticket still works: try again at the next login, not only when it is gone.
                log.warning(message, extra={"valid_for_seconds": round(still)})
                return
            raise KerberosError(message) from None
        except OSError as exc:
            with contextlib.suppress(OSError):
                fresh.unlink()
            reason = exc.strerror or exc
            raise KerberosError(f"cannot write the credential cache {target}: {reason}") from None
        now = time.monotonic()
        self._expires_at = now + lifetime
        self._renew_at = now + lifetime * RENEW_AFTER
        log.info(
            "Kerberos ticket fetched from the keytab",
            extra={"principal": settings.principal, "lifetime_seconds": lifetime, "ccache": target},
        )

    def _check_cache(self) -> str:
        """The principal the given cache holds tickets for; KerberosError when it holds none that work,
        or holds another principal's than `kerberos.principal` names: FreeTDS would log in as whoever
        the cache holds, whatever the config says (issue 36), so that login is refused here."""
        gssapi = _gssapi()
        try:
            creds = gssapi.Credentials(usage="initiate", store={"ccache": self.settings.ccache})
            left = creds.lifetime
            holder = str(creds.name)
        except gssapi.exceptions.GSSError as exc:
            raise KerberosError(
                f"no usable Kerberos ticket in {self.settings.ccache}: {_reason(exc)} (renew it with "
                "kinit, or give the exporter a keytab)"
            ) from None
        if left is not None and left <= 0:
            raise KerberosError(f"the Kerberos ticket in {self.settings.ccache} has expired")
        wanted = self.settings.principal
        if wanted is not None and not _same_principal(holder, wanted):
            raise KerberosError(
                f"the credential cache {self.settings.ccache} holds tickets for {holder}, not for "
                f"kerberos.principal {wanted}; FreeTDS would log in as {holder}: fill the cache as "
                f"{wanted} (kinit {wanted}), or set kerberos.principal to {holder}"
            )
        return holder


def host_realm(spn: str) -> str | None:
    """The realm the Kerberos library maps the SPN's host to (krb5.conf's [domain_realm], as
    kerberos.realm's documentation promises), or None when it maps it to none (then the default realm
    applies). FreeTDS hands the library the SPN as a principal name, which takes the default realm
    whatever [domain_realm] says (issue 36: "Server krbtgt/OTHER@CORP not found"); the exporter asks
    the library as a host-based service name instead and gives FreeTDS the answer as REALM=."""
    service, _, host = spn.partition("/")
    if not host or "@" in host:
        return None
    try:
        gssapi = _gssapi()
        name = gssapi.Name(f"{service}@{host}", gssapi.NameType.hostbased_service)
        realm = str(name.canonicalize(gssapi.MechType.kerberos)).rpartition("@")[2]
    except Exception:  # no python-gssapi, or no mapping: FreeTDS keeps the default realm
        return None
    return realm or None


def _same_principal(holder: str, wanted: str) -> bool:
    """`wanted` may leave out the realm (the default one): compare the name part then."""
    return holder == wanted or ("@" not in wanted and holder.rpartition("@")[0] == wanted)


def _keytab_problem(gssapi, name: object, keytab: str) -> str | None:  # noqa: ANN001 - the module
    """What is wrong with the keytab for `name`, as kinit -k would say it ("Key table file ... not
    found", "No key table entry found for ..."), or None when it holds the principal's keys. Asked of
    the library as an acceptor would (it opens the keytab and looks the name up); nothing is read here."""
    try:
        gssapi.Credentials(name=name, usage="accept", store={"keytab": keytab})
    except gssapi.exceptions.GSSError as exc:
        return _reason(exc)
    return None


def diagnose(spn: str, timeout: float = STARTUP_KDC_WAIT_SECONDS) -> str | None:
    """Why a service ticket for `spn` cannot be had, asked of the same library and cache FreeTDS uses:
    FreeTDS reports a failed GSSAPI step only as "Unable to connect to data source". One request to
    the KDC, made only after a failed login, given `timeout` seconds (a thread of its own: a silent KDC
    must not hold the scrape); None when the ticket can be had (or nothing can be said)."""
    answered, why = _in_time(spn, timeout)
    return why if answered else _silent(spn, timeout)


def service_ticket_in_time(spn: str, timeout: float) -> str | None:
    """Get the service ticket for `spn` into the cache before FreeTDS asks for it, within `timeout`
    seconds: inside the driver, a KDC that accepts and never answers holds the login past the scrape's
    deadline, and the scrape then blames SQL Server (issue 36). Returns why the login cannot go on when
    the KDC did not answer in time, else None (a ticket refused is left to FreeTDS and diagnose(), which
    word it as before). A ticket already in the cache costs no request."""
    answered, _why = _in_time(spn, timeout)
    return None if answered else _silent(spn, timeout)


def _in_time(spn: str, timeout: float) -> tuple[bool, str | None]:
    answer: Future[str | None] = Future()

    def ask() -> None:
        try:
            answer.set_result(_diagnose(spn))
        except BaseException as exc:  # handed to the waiting login
            answer.set_exception(exc)

    threading.Thread(target=ask, name="kerberos-service-ticket", daemon=True).start()
    try:
        return True, answer.result(timeout=max(0.0, timeout))
    except FutureTimeout:
        return False, None


def _silent(spn: str, timeout: float) -> str:
    realm = spn.rpartition("@")[2] if "@" in spn else _default_realm()
    return f"{kdc_description(realm)} did not answer a service ticket request for {spn} within {timeout:g} s"


def _default_realm() -> str:
    try:
        gssapi = _gssapi()
        name = gssapi.Name("probe/realm", gssapi.NameType.kerberos_principal)
        return str(name.canonicalize(gssapi.MechType.kerberos)).rpartition("@")[2] or "the default realm"
    except Exception:  # no library or no krb5.conf: say so generically
        return "the default realm"


def _diagnose(spn: str) -> str | None:
    try:
        gssapi = _gssapi()
    except KerberosError:
        return None
    try:
        name = gssapi.Name(spn, gssapi.NameType.kerberos_principal)
        gssapi.SecurityContext(name=name, usage="initiate", mech=gssapi.MechType.kerberos).step()
    except gssapi.exceptions.GSSError as exc:
        return _reason(exc)
    return None


def _reason(exc: Exception) -> str:
    """The library's minor message (the useful part: 'Cannot contact any KDC ...', 'Clock skew ...')."""
    text = str(exc)
    minor = re.search(r"Minor \(\d+\): (.*)$", text)
    if minor and minor.group(1).strip() not in ("", "Success", "Unknown error"):
        return minor.group(1)
    # No minor reason (an expired cache says "Success" there): the major status says it.
    major = re.search(r"Major \(\d+\): (.*?)(?:, Minor \(|$)", text)
    return major.group(1) if major else text


_keeper: TicketKeeper | None = None
_keeper_lock = threading.Lock()


def prepare(config: ExporterConfig) -> TicketKeeper | None:
    """Set up the process's Kerberos identity (config allows one); call before any connection opens."""
    global _keeper
    settings = config.kerberos()
    if settings is None:
        return None
    with _keeper_lock:
        if _keeper is None or _keeper.settings != settings:
            _keeper = TicketKeeper(settings)
        keeper = _keeper
    keeper.prepare()
    return keeper
