"""Running `smartctl --json` for one drive and telling what its exit status means.

smartctl's exit status is a bit mask (smartctl(8), "RETURN VALUES"):
  bit 0  the command line did not parse                               -> no reading
  bit 1  the device could not be opened, or (with -n standby) it is asleep -> no reading
  bit 2  some command to the disk failed, or a checksum was wrong     -> a partial reading: keep what is there
  bit 3  SMART status: DISK FAILING
  bit 4  prefail attributes at or below their threshold
  bit 5  some attribute was at or below its threshold in the past
  bit 6  the device's error log has errors
  bit 7  the self-test log has errors
Bits 3-7 are findings about the drive, exported as such; they do not make the reading fail.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# -x: identity, health, attributes and every log smartctl knows for the protocol (the ATA Device
# Statistics among them, and the error and self-test logs behind bits 6 and 7). -n standby: a sleeping
# disk is not spun up by a monitoring read; smartctl then exits with bit 1 and this reader keeps the
# previous reading.
READ_ARGS = ("--json=c", "-x", "-n", "standby")

NO_READING_BITS = 0b0000_0011
PARTIAL_BIT = 0b0000_0100

# Bits 3-7 in order, as the `finding` label spells them.
FINDINGS = (
    (3, "failing"),
    (4, "prefail_below_threshold"),
    (5, "was_below_threshold"),
    (6, "error_log"),
    (7, "self_test_errors"),
)


@dataclass(frozen=True)
class Outcome:
    """One run of smartctl: a document to parse, a drive asleep, or a failure with its reason."""

    status: int | None  # smartctl's exit status; None when it did not run or did not finish
    doc: Mapping[str, Any] | None = None  # the JSON document when there is a reading (maybe partial)
    asleep: bool = False
    error: str | None = None  # why there is no reading, for the log: never smartctl's raw output
    findings: dict[str, bool] = field(default_factory=dict)

    @property
    def partial(self) -> bool:
        return self.status is not None and bool(self.status & PARTIAL_BIT)


def command(program: Sequence[str], device: str, extra_args: Sequence[str]) -> list[str]:
    """`program` is smartctl, or a command that runs it ([sudo, -n, /usr/sbin/smartctl])."""
    return [*program, *READ_ARGS, *extra_args, device]


def _messages(doc: Mapping[str, Any]) -> list[str]:
    block = doc.get("smartctl")
    messages = block.get("messages") if isinstance(block, Mapping) else None
    out = []
    for message in messages if isinstance(messages, list) else []:
        if isinstance(message, Mapping) and isinstance(message.get("string"), str):
            out.append(message["string"])
    return out


def _is_asleep(doc: Mapping[str, Any]) -> bool:
    # With -n standby smartctl says "Device is in STANDBY mode" (or SLEEP, IDLE for -n idle) and exits 2.
    mode = doc.get("power_mode")
    if isinstance(mode, str) and mode.upper() in ("STANDBY", "SLEEP"):
        return True
    return any(
        "device is in" in text.lower() and ("standby" in text.lower() or "sleep" in text.lower())
        for text in _messages(doc)
    )


def run(argv: Sequence[str], timeout: float) -> Outcome:
    """Run smartctl once; never raises for anything smartctl or the OS does."""
    try:
        # A process group of its own, so a hung smartctl (a drive that never answers) is killed whole.
        process = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except FileNotFoundError:
        return Outcome(None, error=f"{argv[0]} not found")
    except PermissionError:
        return Outcome(None, error=f"permission denied running {argv[0]}")
    except OSError as exc:
        return Outcome(None, error=f"cannot run {argv[0]}: {exc.strerror or exc}")
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill(process)
        return Outcome(None, error=f"smartctl did not finish within {timeout:g} s; killed")
    return interpret(process.returncode, out, err)


def _kill(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    # Unkillable (stuck in the kernel on a dead device): left for the OS, not waited on longer.
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.communicate(timeout=5)


def interpret(status: int, out: bytes, err: bytes = b"") -> Outcome:
    """What an exit status and the JSON on stdout amount to."""
    if status < 0:
        return Outcome(None, error=f"smartctl was killed by signal {-status}")
    try:
        doc = json.loads(out)
    except ValueError as exc:
        # The output itself is not logged: it is not ours to copy into logs, and it is not JSON anyway.
        what = "no output" if not out.strip() else f"output that is not JSON ({len(out)} bytes; {exc})"
        # smartctl --json writes nothing to stderr; what is there comes from around it (sudo's "a password
        # is required", the loader), and says why.
        lines = err.decode(errors="replace").strip().splitlines()
        why = f"; stderr: {lines[0][:200]}" if lines else ""
        return Outcome(status, error=f"smartctl exited with status {status} and {what}{why}")
    if not isinstance(doc, Mapping):
        return Outcome(status, error=f"smartctl exited with status {status} and JSON that is not an object")
    findings = {name: bool(status & (1 << bit)) for bit, name in FINDINGS}
    if status & NO_READING_BITS:
        if status & 0b10 and _is_asleep(doc):
            return Outcome(status, asleep=True, findings=findings)
        said = "; ".join(_messages(doc)) or "no message"
        return Outcome(status, error=f"smartctl exited with status {status} (no reading): {said}")
    return Outcome(status, doc=doc, findings=findings)
