"""Every test's tier, from where its module lives and what it uses; assigned at collection (conftest.py).

- unit: in-process Python only; starts no process, opens no socket (tests/tier_guard.py checks that).
- integration: real parts in one test: the stand-in over TDS through FreeTDS, HTTP servers on real
  sockets, the exporter or a script as a subprocess, a fake smartctl.
- promtool: runs Prometheus' own tools (promtool, amtool, systemd-analyze) or the Prometheus build.
- e2e: a stack of real programs (Prometheus, Alertmanager, the exporter, stand-ins) over time.
- slow (besides a tier): every e2e and promtool test, property tests asking for more than hypothesis'
  default 100 examples, and tests marked `@pytest.mark.slow`; left out of `make test-fast`.

A module's tier is its directory: tests/unit/, tests/integration/, tests/promtool/, tests/e2e/. A module
anywhere else (a new one dropped in tests/) is unit: the guard then fails any of its tests that opens a
socket or starts a process, naming the test, so a misplaced module is loud, never silently skipped.
A test is raised above its module's tier by what it uses: a stand-in, socket or process fixture makes it
integration, a promtool/Prometheus release parameter or `tools.needs` makes it promtool. A single test
whose tier differs from its module's carries the tier's mark itself (`@pytest.mark.integration`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import pytest

from tests.tools import Versioned

TIERS = ("unit", "integration", "promtool", "e2e")  # in rising order: a test takes the highest that applies
SLOW = "slow"
DEFAULT_TIER = "unit"  # outside the tier directories: checked by tier_guard, so a wrong default fails loudly

# Fixtures that start a stand-in, a server on a socket or a process (conftest.py and the test modules).
INTEGRATION_FIXTURES = frozenset(
    {
        "standin",
        "standin_parses_the_batch",
        "server",
        "tls_server",
        "tls_standin",
        "running",
        "serve",
        "exporter",
        "launch",
        "backend",
        "fake",
        "http_probe",
        "kdc",
        "windows_standin",
        "stack",
    }
)

# What `assign` gave every collected test, before `-m` deselected any (tests/unit/test_tiers.py reads it).
ASSIGNED: dict[str, Assignment] = {}


@dataclass(frozen=True)
class Assignment:
    module: str
    tiers: tuple[str, ...]
    slow: bool
    fixtures: frozenset[str]
    prometheus_release: bool


def directory_tier(item: pytest.Item) -> str | None:
    """The tier its module's directory names (tests/<tier>/...), or None outside them."""
    return next((part for part in reversed(item.path.parent.parts) if part in TIERS), None)


def own_tier(item: pytest.Item) -> str | None:
    """A tier mark on the test function itself (the few tests whose tier differs from their module's)."""
    function = getattr(item, "function", None)
    marks = [m.name for m in getattr(function, "pytestmark", ()) if m.name in TIERS]
    if len(marks) > 1:
        raise pytest.UsageError(f"{item.nodeid} is marked with several tiers: {marks}")
    return marks[0] if marks else None


def uses_a_prometheus_release(item: pytest.Item) -> bool:
    params = getattr(getattr(item, "callspec", None), "params", {})
    if any(isinstance(v, Versioned) for v in params.values()):
        return True
    return bool(getattr(getattr(item, "function", None), "needs_tools", False))


def tier_of(item: pytest.Item) -> str:
    tier = own_tier(item) or directory_tier(item) or DEFAULT_TIER
    if INTEGRATION_FIXTURES & set(getattr(item, "fixturenames", ())):
        tier = _higher(tier, "integration")
    if uses_a_prometheus_release(item):
        tier = _higher(tier, "promtool")
    return tier


# Property tests that ask hypothesis for more examples than its default of 100 run for seconds each.
PROPERTY_EXAMPLES_SLOW_ABOVE = 100


def is_slow(item: pytest.Item, tier: str) -> bool:
    if tier in ("e2e", "promtool") or item.get_closest_marker(SLOW) is not None:
        return True
    return property_examples(item) > PROPERTY_EXAMPLES_SLOW_ABOVE


def property_examples(item: pytest.Item) -> int:
    """How many examples a hypothesis test asks for (0 for other tests)."""
    function = getattr(item, "function", None)
    if not getattr(function, "is_hypothesis_test", False):
        return 0
    settings = getattr(function, "_hypothesis_internal_use_settings", None)
    return settings.max_examples if settings is not None else PROPERTY_EXAMPLES_SLOW_ABOVE


def _higher(a: str, b: str) -> str:
    return max(a, b, key=TIERS.index)


def assign(items: Iterable[pytest.Item]) -> None:
    """Mark every item with its tier, and slow where it is."""
    ASSIGNED.clear()
    for item in items:
        tier, own = tier_of(item), own_tier(item)
        if own is None:
            item.add_marker(tier)
        elif own != tier:
            raise pytest.UsageError(f"{item.nodeid} is marked {own} but what it uses makes it {tier}")
        slow = is_slow(item, tier)
        if slow and item.get_closest_marker(SLOW) is None:
            item.add_marker(SLOW)
        ASSIGNED[item.nodeid] = Assignment(
            module=item.path.stem,
            tiers=tuple(m.name for m in item.iter_markers() if m.name in TIERS),
            slow=slow,
            fixtures=frozenset(getattr(item, "fixturenames", ())),
            prometheus_release=uses_a_prometheus_release(item),
        )
