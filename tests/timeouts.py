"""How long the tests wait, in one place.

A test that is not about a timeout must pass on a slow, loaded machine: CI runs the suite on two cores
shared with other work, and there a scrape of the stand-in, the stand-in's first sqlfluff parse of a new
batch text (2 s quiet, over 5 s loaded) or a process's start-up can take many times its quiet length.
Such tests wait PATIENT_SECONDS for anything they do not test (login and query timeouts, scrape deadlines,
a server becoming ready): a wait that long only ever ends early, so a healthy run costs nothing for it.

A test whose subject IS a timeout configures a short one, measures, and compares against that timeout
plus SLACK_SECONDS: what a loaded machine may add between the deadline and the answer being out
(thread wake-ups, the GIL shared with the stand-in's threads). The stand-in's own big cost never counts
against it: its parse of each batch variant is paid before the first test
(conftest.standin_parses_the_batch), and the standin fixture fails a test of a timeout that made the
stand-in parse a new text.
"""

from __future__ import annotations

PATIENT_SECONDS = 30.0
SLACK_SECONDS = 1.0
