"""The metric families collectors build: plain series that stay out of prometheus_client's objects until
someone asks for its Samples.

A scrape makes some 300 series and throws them away once written. prometheus_client's families check
the metric name on every construction and wrap every value in a Sample named tuple; both cost more than
the value itself (docs/performance.md, 2026-11-26). The exposition writer (exposition.py) reads the
series directly; `samples` still answers as a prometheus_client Metric does, for generate_latest and for
tests.

`TargetFamily`, what FamilyBuilder makes, goes one step further (issue 38): a target exports the same
series scrape after scrape, with names, label names and constant labels fixed, so each series is kept
as its finished line prefix `name{labels} `, looked up once per series in a cache per constant-label
set; the exposition is then the prefix and the number. The merged labels dict a Sample needs is built
only when `series` or `samples` is read.
"""

from __future__ import annotations

import math

from prometheus_client.metrics_core import Metric
from prometheus_client.samples import Sample

from .text import Unsupported, series_prefix

Labels = dict[str, str]

# Names come from the code, so each is checked once per process (bounded all the same: a cleared cache
# only costs the checks again).
_checked: set[str] = set()
_CHECKED_MAX = 4096

# Line prefixes kept over all targets: one per series and constant-label set. When full, new series are
# written without being kept (nothing is evicted, so a fleet larger than the cache does not thrash: the
# series cached first stay cached). About 250 bytes each: 200,000 is some 50 MB at most, a 2,000-target
# process of typical instances with per-target labels (300 series each) uses 600,000 and keeps a third.
PREFIX_CACHE_MAX = 200_000
# Constant-label sets (targets' `labels:`) with a cache of their own; beyond it a set shares nothing.
CONST_SETS_MAX = 10_000
# Family shapes kept per constant-label set, one per metric name: names come from the code.
SHAPES_MAX = 4096


class SeriesFamily(Metric):
    """One gauge or counter family; `series` holds (labels, value) in the order they were added.

    The labels dicts may be shared between series (a target's constant labels): nothing mutates them,
    and `samples` hands out copies.
    """

    def __init__(self, name: str, documentation: str, kind: str) -> None:
        self._start(name, documentation, kind)
        self.series: list[tuple[Labels, float]] = []

    def _start(self, name: str, documentation: str, kind: str) -> None:
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

    @property
    def samples(self) -> list[Sample]:  # type: ignore[override]  # Metric's is a plain list attribute
        return [Sample(self.sample_name, dict(labels), value) for labels, value in self.series]


MISSING: str | None = "\0not cached"  # a sentinel that is never a prefix: a cached None means "cannot write"


class PrefixCache:
    """`name{labels} ` by (sample name, the series' own label pairs), for one constant-label set."""

    _size = 0  # entries over every cache, read and written without a lock: an approximate bound

    def __init__(self, const: Labels) -> None:
        self.const = const
        self.lines: dict[tuple[object, ...], str | None] = {}  # None: the writer cannot write it
        self.shapes: dict[str, FamilyShape] = {}  # by the name the collector gives

    def shape(self, name: str, documentation: str, kind: str) -> FamilyShape:
        """The shape of a family by the name the collector gives (made the first time)."""
        shape = self.shapes.get(name)
        if shape is None or shape.type != kind or shape.documentation != documentation:
            shape = FamilyShape(name, documentation, kind, self)
            if len(self.shapes) < SHAPES_MAX:
                self.shapes[name] = shape
        return shape

    def make(self, key: tuple[object, ...], sample_name: str, labels: Labels | None) -> str | None:
        """The prefix of a series not seen yet; None if the writer cannot write it (an odd label name or
        value: the exposition then goes to generate_latest, which names the problem)."""
        try:
            merged = {**self.const, **labels} if labels else self.const
            prefix: str | None = series_prefix(sample_name, merged)
        except Unsupported:
            prefix = None
        if PrefixCache._size < PREFIX_CACHE_MAX:
            PrefixCache._size += 1
            self.lines[key] = prefix
        return prefix


_caches: dict[tuple[tuple[str, str], ...], PrefixCache] = {}


def prefix_cache(const: Labels) -> PrefixCache:
    """The cache of targets with these constant labels (one for every target without any)."""
    key = tuple(const.items())
    cache = _caches.get(key)
    if cache is None:
        cache = PrefixCache(const)
        if len(_caches) < CONST_SETS_MAX:
            _caches[key] = cache
    return cache


class FamilyShape:
    """What every probe's family of one name shares: name, type, HELP, the prefix of its series without
    labels of their own, and (once written) its header lines. Made once per constant-label set."""

    __slots__ = ("bare", "documentation", "header", "low", "name", "sample_name", "type")

    def __init__(self, name: str, documentation: str, kind: str, cache: PrefixCache) -> None:
        family = SeriesFamily(name.removesuffix("_total") if kind == "counter" else name, documentation, kind)
        self.name = family.name
        self.documentation = documentation
        self.type = kind
        self.sample_name = family.sample_name
        key = (self.sample_name,)
        bare = cache.lines.get(key, MISSING)
        self.bare = cache.make(key, self.sample_name, None) if bare is MISSING else bare
        # Below it a reading is impossible: 0 for counters and `_bytes` gauges (FamilyBuilder checks).
        self.low = 0.0 if kind == "counter" or name.endswith("_bytes") else -math.inf
        self.header: tuple[str, str] | None = None  # the writer's, set on first use


class TargetFamily(SeriesFamily):
    """A family of one target's series, kept as (line prefix or None, cache key, value): the key is the
    sample name and the series' own label pairs, () for a series without labels of its own. A probe
    makes some 120 of these, so all they hold of their own is the list."""

    def __init__(self, shape: FamilyShape, const: Labels) -> None:  # no super().__init__: nothing to check
        self.shape = shape
        self.const = const
        self.entries: list[tuple[str | None, tuple[object, ...], float]] = []

    # Read by prometheus_client and merge_families: the shape's.
    name = property(lambda self: self.shape.name)
    documentation = property(lambda self: self.shape.documentation)
    type = property(lambda self: self.shape.type)
    sample_name = property(lambda self: self.shape.sample_name)
    unit = ""

    @property
    def series(self) -> list[tuple[Labels, float]]:  # type: ignore[override]  # a plain list in SeriesFamily
        const = self.const
        return [
            ({**const, **dict(key[1:])} if key else const, value)  # type: ignore[arg-type]  # (name, value) pairs
            for _, key, value in self.entries
        ]


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
