"""Text a generator owns inside a hand-written page: what lies between a BEGIN and an END marker line.

Every generated docs table (metrics, permissions, reserved labels, platforms, where rules run) is kept
this way, so the replacing and the `--check` of a page are written once, here.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path


def replace_between(text: str, begin: str, end: str, body: str, missing: str) -> str:
    """`text` with what lies between its `begin` and `end` marker lines replaced by `body` (which ends
    with a newline); LookupError(`missing`) when the page lacks the markers."""
    pattern = re.compile(re.escape(begin) + r"\n.*?" + re.escape(end), re.S)
    if not pattern.search(text):
        raise LookupError(missing)
    return pattern.sub(lambda _m: f"{begin}\n{body}{end}", text)


def refresh(page: Path, renderer: Callable[[str], str], *, check: bool) -> int:
    """Rewrites `page` through `renderer`, or with `check` only says whether it is stale: 0 current (or
    written), 1 stale, 2 markers missing (the renderer's LookupError, printed)."""
    current = page.read_text(encoding="utf-8")
    try:
        fresh = renderer(current)
    except LookupError as exc:
        print(f"{page}: {exc}", file=sys.stderr)
        return 2
    if fresh == current:
        return 0
    if check:
        print(f"{page} is stale: run `make generate`", file=sys.stderr)
        return 1
    page.write_text(fresh, encoding="utf-8")
    return 0
