"""`--check-target NAME`: what the exporter will read on one server, before it is deployed.

It logs in as the config says, sends the batch once (built-in and custom collectors, as a scrape of that
target would) and prints one line per collector: ok with its rows and series, left out (the platform or
release lacks what it reads, named), off (the target's collectors setting), or failed with the reason
and, for a refused permission, the statement that grants it. Exit 0 only when every collector that is on
for the target is ok (or left out for what the server lacks), 1 otherwise, 2 for a bad config or name.

Nothing it prints is a secret: reasons are SQL Server's messages and the exporter's own, as in its log,
and the login's name is the auth module's username (a password never leaves the connection string).
"""

from __future__ import annotations

import re
import sys
from typing import TextIO

from ..collectors.server_properties import ENGINE_EDITION_KEY, PRODUCT_VERSION_KEY
from ..config import ExporterConfig, TargetConfig
from ..scrape.platform import major_version

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
# SQL Server's errors for a permission the login lacks: 300 (a server permission such as VIEW SERVER
# STATE), 297 (the same, worded generally), 229 (SELECT on an object: an explicit DENY, or no grant).
PERMISSION_ERRORS = frozenset({229, 297, 300})
_DENIED_OBJECT = re.compile(
    r"permission was denied on the object '([^']+)', database '([^']+)', schema '([^']+)'", re.IGNORECASE
)
_DENIED_SERVER = re.compile(r"(VIEW [A-Z ]+STATE) permission was denied", re.IGNORECASE)


def grant_for(number: int, message: str, login: str, edition: object, version: object) -> str | None:
    """The T-SQL that gives `login` what SQL Server just refused, or None when the error is no refusal."""
    if number not in PERMISSION_ERRORS:
        return None
    who = "[" + login.replace("]", "]]") + "]"
    denied = _DENIED_OBJECT.search(message)
    if denied is not None:
        obj, database, schema = denied.groups()
        if database.lower() == "mssqlsystemresource":
            # A system view refused by name is an explicit DENY: the server-state grant does not undo it.
            return f"USE [master]; REVOKE SELECT ON [sys].[{obj}] FROM {who};  -- an explicit DENY hides it"
        if database.lower() == "msdb" and obj.lower().startswith("sysjob"):
            return f"USE [msdb]; ALTER ROLE [SQLAgentReaderRole] ADD MEMBER {who};  -- Agent's job tables"
        return f"USE [{database}]; GRANT SELECT ON [{schema}].[{obj}] TO {who};"
    if str(edition).strip() == "5":  # Azure SQL Database: database-level state
        return f"GRANT VIEW DATABASE STATE TO {who};  -- in the monitored database"
    named = _DENIED_SERVER.search(message)
    major = major_version(version)
    if named is not None and "PERFORMANCE" in named.group(1).upper():
        return f"GRANT VIEW SERVER PERFORMANCE STATE TO {who};"
    if major is not None and major >= 16:
        return f"GRANT VIEW SERVER PERFORMANCE STATE TO {who};  -- or VIEW SERVER STATE, which includes it"
    return f"GRANT VIEW SERVER STATE TO {who};"


def check(config: ExporterConfig, name: str, out: TextIO | None = None) -> int:
    """Run the batch once against target `name` and print what became of each collector."""
    out = out if out is not None else sys.stdout
    from ..scrape.scraper import SCRAPE, Outcome, Scraper

    target = config.targets.get(name)
    if target is None:
        print(
            f"error: no target named {name!r} in the config (targets: {', '.join(config.targets)})", file=out
        )
        return EXIT_USAGE
    scraper = Scraper(config)
    outcomes: dict[str, Outcome] = {}
    try:
        scraper.probe(target, target.login_timeout_seconds + target.query_timeout_seconds, outcomes=outcomes)
        memo = scraper._state(target).memo
    finally:
        scraper.close()
    if SCRAPE in outcomes:
        print(f"target {name}: FAILED to read the server: {outcomes[SCRAPE].reason}", file=out)
        return EXIT_FAILED
    edition, version = memo.get(ENGINE_EDITION_KEY), memo.get(PRODUCT_VERSION_KEY)
    print(f"target {name}: SQL Server {version or '?'}, engine edition {edition or '?'}", file=out)
    custom = {q.name for q in config.custom_queries}
    failed = 0
    for record in scraper.collectors:
        label = f"{record.name}{' (custom)' if record.name in custom else ''}"
        outcome = outcomes.get(record.name)
        if record.name not in target.enabled_collectors:
            print(f"off       {label}: not in the target's collectors setting", file=out)
        elif outcome is None:
            failed += 1
            print(f"FAILED    {label}: did not run", file=out)
        elif outcome.status == "ok":
            print(f"ok        {label}: {outcome.rows} rows, {outcome.series} series", file=out)
        elif outcome.status == "left out":
            print(f"left out  {label}: {outcome.reason}", file=out)
        else:
            failed += 1
            print(f"FAILED    {label}: {outcome.reason}", file=out)
            grant = grant_for(outcome.error_number, outcome.reason, _login(target), edition, version)
            if grant is not None:
                print(f"          fix: {grant}", file=out)
    print(
        f"target {name}: {'every collector that is on is ok' if not failed else f'{failed} failed'}", file=out
    )
    return EXIT_FAILED if failed else EXIT_OK


def _login(target: TargetConfig) -> str:
    return target.username or "<the exporter's login>"
