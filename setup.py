"""Only a build hook: the wheel records the git commit it was built from (see build_info.py).
Everything else about the package is in pyproject.toml."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
PACKAGE = "mssql_memory_exporter"


def git_revision() -> str | None:
    try:
        result = subprocess.run(
            ["git", "-C", str(HERE), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    commit = result.stdout.strip()
    return commit if result.returncode == 0 and re.fullmatch(r"[0-9a-f]{7,64}", commit) else None


class BuildPyWithRevision(build_py):
    """Writes REVISION into the built package when building in a git work tree; a REVISION already in
    the source (the Dockerfile writes one: its build context has no .git) is copied as package data."""

    def run(self) -> None:
        super().run()
        commit = git_revision()
        if commit is not None:
            target = Path(self.build_lib) / PACKAGE / "REVISION"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(commit + "\n", encoding="ascii")


setup(cmdclass={"build_py": BuildPyWithRevision})
