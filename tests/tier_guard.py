"""A test of the unit tier fails if it starts a process or opens a socket, so `-m unit` (and `make
test-fast`) means what tests/tiers.py says. conftest.py registers this plugin for every run.

Python's audit hooks see every socket bind/connect and every process started from Python, in any thread.
An event is recorded, not refused: a test that expects a failure to connect must not pass for that.
The promtool runs started ahead in the background (tests/background.py) overlap unit tests on purpose;
their thread's events are not the unit test's.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Generator

import pytest

from tests.background import THREAD_PREFIX

WATCHED = frozenset(
    {
        "socket.bind",
        "socket.connect",
        "subprocess.Popen",
        "os.system",
        "os.posix_spawn",
        "os.exec",
        "os.fork",
        "os.forkpty",
    }
)

_seen: list[str] | None = None  # set while a unit test runs


def _audit(event: str, args: tuple[object, ...]) -> None:
    if _seen is None or event not in WATCHED:
        return
    if not threading.current_thread().name.startswith(THREAD_PREFIX):
        _seen.append(f"{event}{_short(args)}")


def _short(args: tuple[object, ...]) -> str:
    text = repr(args)
    return text if len(text) <= 200 else text[:200] + "...)"


def pytest_configure(config: pytest.Config) -> None:
    sys.addaudithook(_audit)  # cannot be removed; it does nothing outside a unit test


def _watch(item: pytest.Item) -> Generator[None, object, object]:
    global _seen
    if item.get_closest_marker("unit") is None:
        return (yield)
    _seen = []
    try:
        result = yield
    finally:
        seen, _seen = _seen, None
    if seen:
        raise pytest.fail.Exception(
            f"{item.nodeid} is in the unit tier but did {', '.join(seen[:3])}; give its module or fixture "
            "its tier (tests/tiers.py: move its module into tests/integration/ or mark the test)",
            pytrace=False,
        )
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, object, object]:
    return (yield from _watch(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    return (yield from _watch(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(
    item: pytest.Item, nextitem: pytest.Item | None
) -> Generator[None, object, object]:
    return (yield from _watch(item))
