"""The metric family every collector builds: a gauge or counter whose series stay plain (labels, value)
pairs until someone asks for prometheus_client Samples.

A scrape makes some 200 series and throws them away once written. prometheus_client's families check
the metric name on every construction and wrap every value in a Sample named tuple; both cost more than
the value itself (docs/performance.md, 2026-11-26). The exposition writer (exposition.py) reads `series`
directly; `samples` still answers as a prometheus_client Metric does, for generate_latest and for tests.
"""

from __future__ import annotations

from prometheus_client.metrics_core import Metric
from prometheus_client.samples import Sample

Labels = dict[str, str]

# Names come from the code, so each is checked once per process (bounded all the same: a cleared cache
# only costs the checks again).
_checked: set[str] = set()
_CHECKED_MAX = 4096


class SeriesFamily(Metric):
    """One gauge or counter family; `series` holds (labels, value) in the order they were added.

    The labels dicts may be shared between series (a target's constant labels): nothing mutates them,
    and `samples` hands out copies.
    """

    def __init__(self, name: str, documentation: str, kind: str) -> None:
        if kind not in ("gauge", "counter"):
            raise ValueError(f"a series family is a gauge or a counter, not {kind!r}")
        if name not in _checked:
            check_name(name)
            if len(_checked) >= _CHECKED_MAX:
                _checked.clear()
            _checked.add(name)
        # Metric.__init__ is skipped on purpose: it would check the name again and set `samples`.
        self.name = name
        self.documentation = documentation
        self.unit = ""
        self.type = kind
        # What prometheus_client names a counter's samples: the family name plus _total.
        self.sample_name = name + "_total" if kind == "counter" else name
        self.series: list[tuple[Labels, float]] = []

    @property
    def samples(self) -> list[Sample]:  # type: ignore[override]  # Metric's is a plain list attribute
        return [Sample(self.sample_name, dict(labels), value) for labels, value in self.series]


def check_name(name: str) -> None:
    """What Metric.__init__ checks on every call, by default: a name is any non-empty UTF-8 text (the
    exposition writer hands one outside Prometheus' classic names to generate_latest, which quotes it).
    prometheus_client's own check is private, so it is written here."""
    if not name:
        raise ValueError("invalid metric name: empty")
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"invalid metric name {name!r}: not UTF-8 text") from None
