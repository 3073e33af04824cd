"""The one write-or-check of every generator: whole files (rules, dashboards, PrometheusRules, golden
expositions) and the sections a generator owns inside a hand-written page (between a BEGIN and an END
marker line: the metrics, permissions, reserved-label, platform and where-rules-run tables).

Every generator renders text and hands it here, so `make generate` writes what changed (printing each
file) and `--check` names what is stale the same way for all of them.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

RenderFn = Callable[[argparse.Namespace], dict[str, str]]
STALE = "run `make generate`, review the diff and commit it"


def write_or_check(files: Mapping[Path, str], *, check: bool) -> int:
    """Write each file whose text differs from what is on disk (printing it), or with `check` write
    nothing and print each stale or missing one: 0 current (or written), 1 stale."""
    changed = [path for path, text in files.items() if _current(path) != text]
    if check:
        for path in changed:
            print(f"stale: {path} ({STALE})", file=sys.stderr)
        return 1 if changed else 0
    for path in changed:
        path.parent.mkdir(parents=True, exist_ok=True)  # optional/ rules live a level down
        path.write_text(files[path], encoding="utf-8")
        print(f"wrote {path}")
    return 0


def replace_between(text: str, begin: str, end: str, body: str, missing: str) -> str:
    """`text` with what lies between its `begin` and `end` marker lines replaced by `body` (which ends
    with a newline); LookupError(`missing`) when the page lacks the markers."""
    pattern = re.compile(re.escape(begin) + r"\n.*?" + re.escape(end), re.S)
    if not pattern.search(text):
        raise LookupError(missing)
    return pattern.sub(lambda _m: f"{begin}\n{body}{end}", text)


def refresh(page: Path, renderer: Callable[[str], str], *, check: bool) -> int:
    """Rewrites `page` through `renderer` (which replaces its generated sections), or with `check` only
    says whether it is stale: 0 current (or written), 1 stale, 2 markers missing (the renderer's
    LookupError, printed)."""
    try:
        fresh = renderer(page.read_text(encoding="utf-8"))
    except LookupError as exc:
        print(f"{page}: {exc}", file=sys.stderr)
        return 2
    return write_or_check({page: fresh}, check=check)


def generator_main(
    prog: str,
    description: str | None,
    default_out: Path,
    render: RenderFn,
    argv: Sequence[str] | None = None,
    add_arguments: Callable[[argparse.ArgumentParser], None] | None = None,
) -> int:
    """The command line of a generator of whole files (`--out`, `--check`): render {file name: text}
    from the parsed arguments, then write or check them in `--out`."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--out", type=Path, default=default_out, help=f"directory (default: {default_out})")
    parser.add_argument("--check", action="store_true", help="exit 1 if the files in --out are stale")
    if add_arguments is not None:
        add_arguments(parser)
    args = parser.parse_args(argv)
    files = render(args)
    return write_or_check({args.out / name: text for name, text in files.items()}, check=args.check)


def _current(path: Path) -> str | None:
    return path.read_text(encoding="utf-8") if path.exists() else None
