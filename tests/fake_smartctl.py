"""A fake `smartctl` executable for tests: replays real fixtures and misbehaves on demand.

The script is written into a test's directory with its control directory baked in, so it works the same
when the exporter runs it as its own process. For each device it reads `<control>/<device basename>.json`:

  {"fixture": "/path/to/real.json"}           replay the fixture, exiting with its recorded exit status
  {"fixture": ..., "exit": 4}                  replay, exiting with another status
  {"doc": {...}, "exit": 0}                    print this document instead of a fixture
  {"mode": "hang"}                             never answer (until killed)
  {"mode": "garbage"} / {"mode": "truncated", "fixture": ...}   output that is not JSON / cut short
  {"mode": "vanished"}                         what smartctl 7.3 says for a device node that is gone
  {"mode": "standby"}                          what smartctl says for a sleeping disk under -n standby
  {"mode": "fail", "exit": N, "message": "..."}   a JSON error with exit status N

Every call is appended to `<control>/calls.log` as "start <device> <time>" and "end <device> <time>", and
its argv to `<control>/argv.log`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

# 141 real `smartctl --json` outputs; where they come from, and their licence: the README there.
FIXTURES = Path(__file__).resolve().parent / "smartctl_testdata"

_SCRIPT = r"""#!{python}
import json, os, sys, time
CONTROL = {control!r}
device = sys.argv[-1]
name = os.path.basename(device)
with open(os.path.join(CONTROL, "argv.log"), "a") as log:
    log.write(json.dumps(sys.argv[1:]) + "\n")
with open(os.path.join(CONTROL, "calls.log"), "a") as log:
    log.write("start %s %.6f\n" % (name, time.time()))
def done(status):
    with open(os.path.join(CONTROL, "calls.log"), "a") as log:
        log.write("end %s %.6f\n" % (name, time.time()))
    sys.stdout.flush()
    os._exit(status)
def envelope(status, message, severity="error"):
    return {{"json_format_version": [1, 0], "smartctl": {{"version": [7, 3],
        "argv": ["smartctl"] + sys.argv[1:], "exit_status": status,
        "messages": [{{"string": message, "severity": severity}}]}}}}
path = os.path.join(CONTROL, name + ".json")
if not os.path.exists(path):
    sys.stdout.write(json.dumps(envelope(2, device + ": Unable to detect device type")))
    done(1)
spec = json.load(open(path))
mode = spec.get("mode", "replay")
if mode == "hang":
    time.sleep(3600)
if mode == "garbage":
    sys.stdout.write("smartctl: \x00\x01 this is not json {{")
    done(spec.get("exit", 0))
if mode == "vanished":
    sys.stdout.write(json.dumps(envelope(2, "Smartctl open device: " + device + " failed: No such device")))
    done(2)
if mode == "standby":
    doc = envelope(2, "Device is in STANDBY mode, exit(2)", "information")
    sys.stdout.write(json.dumps(doc))
    done(2)
if mode == "fail":
    sys.stdout.write(json.dumps(envelope(spec["exit"], spec.get("message", "failed"))))
    done(spec["exit"])
doc = spec["doc"] if "doc" in spec else json.load(open(spec["fixture"]))
status = spec.get("exit", doc.get("smartctl", {{}}).get("exit_status", 0))
text = json.dumps(doc)
if mode == "truncated":
    text = text[: len(text) // 2]
sys.stdout.write(text)
done(status)
"""


class FakeSmartctl:
    """The fake executable at `path`, steered through files in `control`."""

    def __init__(self, directory: Path) -> None:
        self.control = directory / "control"
        self.control.mkdir(parents=True, exist_ok=True)
        self.path = directory / "smartctl"
        self.path.write_text(_SCRIPT.format(python=sys.executable, control=str(self.control)))
        self.path.chmod(0o755)

    def set(self, device: str, **spec: object) -> None:
        (self.control / f"{Path(device).name}.json").write_text(json.dumps(spec))

    def replay(self, device: str, fixture: str, **extra: object) -> None:
        self.set(device, fixture=str(FIXTURES / fixture), **extra)

    def calls(self) -> list[tuple[str, str, float]]:
        log = self.control / "calls.log"
        if not log.exists():
            return []
        out = []
        for line in log.read_text().splitlines():
            what, device, when = line.split()
            out.append((what, device, float(when)))
        return out

    def argv(self) -> list[list[str]]:
        log = self.control / "argv.log"
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def fixture(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())
