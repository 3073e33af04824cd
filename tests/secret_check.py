"""The secret check `make test` runs after the tests: no secret the tests use may appear in anything the
run produced.

What it reads (scripts/test.sh passes them): the terminal output, and the evidence directory named by
MSSQL_TEST_EVIDENCE_DIR, where tests/conftest.py appends every test's captured stdout, stderr and log
records (passing tests too: pytest would otherwise throw those away) and tests/e2e_stack.py copies the
log of every process it started (exporter, Prometheus, Alertmanager).

    python -m tests.secret_check build/test-output.log build/test-evidence

It prints secret names and places, never the values, so its own output can be kept with the run's.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

EVIDENCE_ENV = "MSSQL_TEST_EVIDENCE_DIR"
CAPTURED_LOG = "test-captured.log"
PROCESS_LOGS = "processes"

# Secrets written into fixture files that the exporter reads; the tests check the one message they
# look at, this checks everything else. Distinctive enough that a hit cannot be a coincidence.
FIXTURE_SECRETS = {
    "inline password in a bad exporter config fixture": "s3cr3t-inline-value",
    "inline key in a bad web-config fixture": "inline-key-material",
}


def default_secrets() -> dict[str, str]:
    """name -> value for every distinctive secret the test suite hands the exporter."""
    from tests.conftest import TEST_PASSWORD
    from tests.integration.test_webconfig import NEW_PASSWORD, PASSWORD, WRONG_PASSWORD
    from tests.integration.test_windows_auth import NTLM_PASSWORD, WRONG_NTLM_PASSWORD
    from tests.unit.test_config import PASSWORD as CONFIG_PASSWORD

    secrets = {
        "stand-in SQL login password (tests.conftest.TEST_PASSWORD)": TEST_PASSWORD,
        "connection-string quoting password (tests.unit.test_config.PASSWORD)": CONFIG_PASSWORD,
        **FIXTURE_SECRETS,
        "NTLM login password (tests.integration.test_windows_auth.NTLM_PASSWORD)": NTLM_PASSWORD,
        "wrong NTLM password (tests.integration.test_windows_auth.WRONG_NTLM_PASSWORD)": WRONG_NTLM_PASSWORD,
    }
    web = {"PASSWORD": PASSWORD, "NEW_PASSWORD": NEW_PASSWORD, "WRONG_PASSWORD": WRONG_PASSWORD}
    for name, value in web.items():
        secrets[f"web-config basic-auth password (tests.integration.test_webconfig.{name})"] = value
    # Not the base64 Authorization headers: tests/integration/test_webconfig.py uses them as test ids on
    # purpose,
    # so they are in every report line of those tests.
    return secrets


@dataclass(frozen=True)
class Leak:
    secret: str  # the secret's name, never its value
    path: Path
    line: int

    def __str__(self) -> str:
        return f"{self.secret}: {self.path} line {self.line}"


def _files(paths: Iterable[Path]) -> Iterator[Path]:
    seen: set[Path] = set()
    for path in paths:
        found = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for file in found:
            if file.resolve() not in seen:  # a file named and also inside a named directory: read once
                seen.add(file.resolve())
                yield file


def find_leaks(paths: Iterable[Path], secrets: Mapping[str, str]) -> list[Leak]:
    """Every line of every file under `paths` holding one of `secrets`; a missing path raises, so a
    check that read nothing cannot pass."""
    leaks = []
    for file in _files(paths):
        text = file.read_text(errors="replace")  # FileNotFoundError for a path that is not there
        for name, value in secrets.items():
            if value not in text:
                continue
            leaks += [Leak(name, file, n) for n, line in enumerate(text.splitlines(), 1) if value in line]
    return leaks


def main(argv: list[str], secrets: Mapping[str, str] | None = None) -> int:
    """0 when no secret appears, 1 when one does (each place listed), 2 when a path is missing."""
    if not argv:
        print("usage: python -m tests.secret_check PATH...", file=sys.stderr)
        return 2
    paths = [Path(arg) for arg in argv]
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        print(f"secret check: nothing to check at {', '.join(missing)}", file=sys.stderr)
        return 2
    secrets = default_secrets() if secrets is None else secrets
    files = list(_files(paths))
    leaks = find_leaks(paths, secrets)
    if leaks:
        for leak in leaks[:50]:
            print(f"secret check: {leak}", file=sys.stderr)
        print(f"secret check: FAILED, {len(leaks)} line(s) hold a test secret", file=sys.stderr)
        return 1
    print(f"secret check: none of {len(secrets)} test secrets appears in {len(files)} file(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
