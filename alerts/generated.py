"""The one entry point of every generator: write the files, or with `--check` say which are stale.

alerts/generate.py, dashboards/generate.py and deploy/prometheusrule.py each render {file name: text}
from the spec; this module owns the command line (`--out`, `--check`), the comparison with what is
committed and the messages, so the three cannot drift apart (they were three copies of one `main`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

RenderFn = Callable[[argparse.Namespace], dict[str, str]]


def generator_main(
    prog: str,
    description: str | None,
    default_out: Path,
    render: RenderFn,
    argv: Sequence[str] | None = None,
    add_arguments: Callable[[argparse.ArgumentParser], None] | None = None,
) -> int:
    """Parse the command line, render, then write the files that changed (printing each) or, with
    `--check`, print each stale or missing file and return 1."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--out", type=Path, default=default_out, help=f"directory (default: {default_out})")
    parser.add_argument("--check", action="store_true", help="exit 1 if the files in --out are stale")
    if add_arguments is not None:
        add_arguments(parser)
    args = parser.parse_args(argv)
    files = render(args)
    changed = [name for name, text in files.items() if _current(args.out / name) != text]
    if args.check:
        for name in changed:
            print(f"stale: {args.out / name} (run `make generate`)", file=sys.stderr)
        return 1 if changed else 0
    args.out.mkdir(parents=True, exist_ok=True)
    for name in changed:
        (args.out / name).parent.mkdir(parents=True, exist_ok=True)  # optional/ rules live a level down
        (args.out / name).write_text(files[name], encoding="utf-8")
        print(f"wrote {args.out / name}")
    return 0


def _current(path: Path) -> str | None:
    return path.read_text(encoding="utf-8") if path.exists() else None
