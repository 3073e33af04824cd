"""The secret check catches what it is there for: a canary planted in PASSING tests, through every
channel a test has (stdout, stderr, a DEBUG log record's extra field, a subprocess writing to the
inherited descriptors, the log of a process the end-to-end stack started), must be found, while the
terminal output alone (all the old check read) holds none of it.

The canaries are not secrets the real run checks for, so planting them here cannot fail `make test`'s own
check, and the real secrets never appear in this test's output."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests import secret_check
from tests.conftest import TEST_PASSWORD

# The modules default_secrets() reads its passwords from, imported at collection: importing them inside a
# test (the first main() without secrets) would count their imports' own socket probes (urllib3 binds ::1
# to learn whether IPv6 works) against that unit test, when it runs first.
secret_check.default_secrets()

ROOT = Path(__file__).resolve().parents[2]
CHANNELS = ("stdout", "stderr", "debug-log-extra", "subprocess-fd", "stack-process-log")
PLUGINS = ["-p", "tests.conftest", "-p", "no:cacheprovider"]
CANARIES = {channel: f"canary-{channel}-Vq3kP9" for channel in CHANNELS}

PLANTED = textwrap.dedent(
    """
    import logging
    import subprocess
    import sys

    import pytest

    from tests.e2e_stack import Stack, free_port

    CANARIES = {canaries!r}


    def test_prints():
        print(CANARIES["stdout"])


    def test_writes_stderr():
        print(CANARIES["stderr"], file=sys.stderr)


    def test_logs_debug_with_an_extra_field():
        log = logging.getLogger("mssql_memory_exporter.canary")
        log.debug("probe", extra={{"err": CANARIES["debug-log-extra"]}})


    # The planted file lives outside tests/, where a module's tier is unit: these two start processes.
    @pytest.mark.integration
    def test_subprocess_inherits_the_descriptors():
        subprocess.run([sys.executable, "-c", "print({{!r}})".format(CANARIES["subprocess-fd"])], check=True)


    @pytest.mark.integration
    def test_stack_process(tmp_path):
        port = free_port()
        code = (
            "import http.server, sys; print(sys.argv[1], flush=True); "
            "http.server.HTTPServer(('127.0.0.1', int(sys.argv[2])), http.server.SimpleHTTPRequestHandler)"
            ".serve_forever()"
        )
        with Stack(tmp_path) as stack:
            stack.start_process(
                "planted", [sys.executable, "-c", code, CANARIES["stack-process-log"], str(port)],
                f"http://127.0.0.1:{{port}}/",
            )
    """
)


def _run_planted(tmp_path: Path) -> tuple[subprocess.CompletedProcess[str], Path]:
    (tmp_path / "test_planted.py").write_text(PLANTED.format(canaries=CANARIES))
    evidence = tmp_path / "evidence"
    env = {
        **os.environ,
        secret_check.EVIDENCE_ENV: str(evidence),
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "exporter")]),
    }
    result = subprocess.run(
        # -p tests.conftest: the planted file lives outside tests/, so load the hooks by name, as the
        # suite's own conftest; -p no:cacheprovider keeps the run from writing into the repository.
        [sys.executable, "-m", "pytest", "-q", *PLUGINS, "test_planted.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return result, evidence


@pytest.mark.integration
def test_a_leak_in_a_passing_test_is_caught_through_every_channel(tmp_path: Path):
    result, evidence = _run_planted(tmp_path)
    terminal = result.stdout + result.stderr
    assert result.returncode == 0 and f"{len(CHANNELS)} passed" in terminal, terminal
    # The terminal output is what the old check read: none of the canaries reached it.
    assert not [c for c in CHANNELS if CANARIES[c] in terminal], terminal

    terminal_log = tmp_path / "test-output.log"
    terminal_log.write_text(terminal)
    secrets = {f"canary {channel}": value for channel, value in CANARIES.items()}
    leaks = secret_check.find_leaks([terminal_log, evidence], secrets)
    assert {leak.secret for leak in leaks} == set(secrets), "\n".join(map(str, leaks))
    stack_leaks = [leak for leak in leaks if leak.secret == "canary stack-process-log"]
    assert all(secret_check.PROCESS_LOGS in leak.path.parts for leak in stack_leaks), stack_leaks

    # The command scripts/test.sh runs fails on it, and names secrets and places without the values.
    check = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from tests import secret_check;"
            f" sys.exit(secret_check.main(sys.argv[1:], secrets={secrets!r}))",
            str(terminal_log),
            str(evidence),
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "exporter")])},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert check.returncode == 1, check.stdout + check.stderr
    assert "canary stack-process-log" in check.stderr and "test-captured.log" in check.stderr
    assert not [c for c in CHANNELS if CANARIES[c] in check.stdout + check.stderr]


def test_clean_output_passes_and_missing_output_fails(tmp_path: Path, capsys):
    clean = tmp_path / "clean.log"
    clean.write_text("nothing to see\n")
    assert secret_check.main([str(clean)]) == 0
    assert secret_check.main([str(tmp_path / "never-written.log")]) == 2
    leaky = tmp_path / "leaky.log"
    leaky.write_text(f"line one\nconnecting with {TEST_PASSWORD}\n")
    assert secret_check.main([str(leaky)]) == 1
    # Every copy of a secret is reported once per line, even when a file is named twice.
    assert secret_check.find_leaks([leaky, tmp_path], {"pw": TEST_PASSWORD}) == [
        secret_check.Leak("pw", leaky, 2)
    ]
    # tmp_path is outside the evidence directory, so this planted copy cannot trip the real run's check.
    assert TEST_PASSWORD not in capsys.readouterr().err


def test_default_secrets_cover_the_passwords_the_suite_uses():
    from tests.integration.test_webconfig import PASSWORD, WRONG_PASSWORD

    values = set(secret_check.default_secrets().values())
    assert {TEST_PASSWORD, PASSWORD, WRONG_PASSWORD, "s3cr3t-inline-value"} <= values
