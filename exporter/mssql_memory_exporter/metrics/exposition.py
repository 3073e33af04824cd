"""The Prometheus text format (0.0.4) for the families a scrape returns, written directly.

prometheus_client's `generate_latest` checks and escapes every metric and label name again for every
sample of every scrape: 0.62 ms for a typical target, as long as all the collectors together (measured
by replaying a scrape; docs/performance.md, finding 5). Our names are fixed in the code, so here each
name is checked once per process and the per-sample work is the label values and the number. The
output is byte for byte what `generate_latest` writes (tests hold it to that); a family outside the
plain gauge/counter/info shape (histograms, timestamps, exemplars, OpenMetrics-only samples, names that
would need escaping) sends the whole body to `generate_latest`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from .families import SeriesFamily

# What render() writes, announced as such whatever prometheus_client's CONTENT_TYPE_LATEST says (0.26
# announces version=1.0.0, a format whose quoted UTF-8 names this writer never produces; the fallback's
# generate_latest escapes names to the legacy set, i.e. writes 0.0.4 too).
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# The legacy character sets: a name outside them is escaped by generate_latest, and we leave that to it.
_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
# Exposition type, and the suffix every sample of the family carries, per family type.
_SIMPLE = {
    "gauge": ("gauge", ""),
    "counter": ("counter", "_total"),
    "info": ("gauge", "_info"),
    "unknown": ("untyped", ""),
}
# Bounded: names and help texts come from the code, but a scenario with ever-new help texts must not grow
# the process without limit.
_CACHE_MAX = 4096

# Series lines by (sample name, label pairs): one entry per series a target exports, over every target.
# Clearing when full only costs the label text again, so a fleet larger than this stays correct.
_PREFIX_CACHE_MAX = 50_000

_headers: dict[tuple[str, str, str], tuple[str, str] | None] = {}
_prefixes: dict[tuple[object, ...], str] = {}
_label_names_ok: dict[str, bool] = {}


class _Unsupported(Exception):
    """A family this writer does not handle; generate_latest writes the body instead."""


def render(families: Iterable[Metric]) -> bytes:
    """The exposition of `families`, in order, as `generate_latest` of a registry holding them writes it."""
    families = list(families)
    try:
        return "".join(_lines(families)).encode("utf-8")
    except (_Unsupported, TypeError):  # TypeError: an unhashable label value; generate_latest names it
        return _fallback(families)


def _lines(families: list[Metric]) -> list[str]:
    # A list and local names rather than a generator: this loop runs for every series of every scrape.
    out: list[str] = []
    append = out.append
    prefixes = _prefixes
    for family in families:
        header, sample_name = _header(family)
        append(header)
        if type(family) is SeriesFamily:
            # The collectors' own families: plain (labels, value) pairs, nothing else to check.
            bare = sample_name + " "
            for labels, value in family.series:
                if labels:
                    line = prefixes.get((sample_name, *labels.items())) or _series_prefix(sample_name, labels)
                else:
                    line = bare
                append(line + _number(value))
            continue
        for sample in family.samples:
            if (
                sample.name != sample_name
                or sample.timestamp is not None
                or sample.exemplar is not None
                or sample.native_histogram is not None
            ):
                raise _Unsupported
            append(_series_prefix(sample_name, sample.labels) if sample.labels else sample_name + " ")
            append(_number(sample.value))
    return out


def _series_prefix(sample_name: str, labels: dict[str, str]) -> str:
    """`name{labels} ` of one series. A target exports the same series scrape after scrape, so the text
    is kept per (name, labels): sorting and escaping the labels cost more than the rest of the line."""
    key = (sample_name, *labels.items())
    try:
        text = _prefixes.get(key)
    except TypeError:  # an unhashable label value: generate_latest will say what is wrong with it
        raise _Unsupported from None
    if text is None:
        text = f"{sample_name}{{{_label_text(labels)}}} "
        if len(_prefixes) >= _PREFIX_CACHE_MAX:
            _prefixes.clear()
        _prefixes[key] = text
    return text


def _number(value: float) -> str:
    """The value as floatToGoString writes it, without its conversions for a float (every value ours
    are): Python's repr, except that Go's exponent starts at seven digits before the point."""
    if type(value) is int:
        value = float(value)  # what floatToGoString does first
    if type(value) is float:
        text = repr(value)
        dot = text.find(".")
        if 0 <= dot <= 6 or (dot > 6 and value < 0):
            return text + "\n"
        if dot > 6:
            digits = text[:dot] + text[dot + 1 :]
            return f"{(digits[0] + '.' + digits[1:]).rstrip('0').rstrip('.')}e+{dot - 1:02d}\n"
    return floatToGoString(value) + "\n"  # inf, nan, exponents, ints, anything else


def _header(family: Metric) -> tuple[str, str]:
    key = (family.name, family.type, family.documentation)
    cached = _headers.get(key, False)
    if cached is False:
        cached = _make_header(*key)
        if len(_headers) >= _CACHE_MAX:
            _headers.clear()
        _headers[key] = cached
    if not isinstance(cached, tuple):  # None: a family the fast path does not write
        raise _Unsupported
    return cached


def _make_header(name: str, family_type: str, doc: str) -> tuple[str, str] | None:
    simple = _SIMPLE.get(family_type)
    if simple is None:
        return None
    shown_type, suffix = simple
    sample_name = name + suffix
    if _METRIC_NAME.fullmatch(sample_name) is None:
        return None
    help_text = doc.replace("\\", r"\\").replace("\n", r"\n")
    return f"# HELP {sample_name} {help_text}\n# TYPE {sample_name} {shown_type}\n", sample_name


def _label_text(labels: dict[str, str]) -> str:
    parts = []
    for name in sorted(labels):
        if not _label_name_ok(name):
            raise _Unsupported
        value = labels[name]
        if type(value) is not str:
            raise _Unsupported  # generate_latest would fail on it; let it say so
        if "\\" in value or "\n" in value or '"' in value:
            value = value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")
        parts.append(f'{name}="{value}"')
    return ",".join(parts)


def _label_name_ok(name: str) -> bool:
    ok = _label_names_ok.get(name)
    if ok is None:
        # Names starting with "__" are reserved; generate_latest escapes them.
        ok = _LABEL_NAME.fullmatch(name) is not None and not name.startswith("__")
        if len(_label_names_ok) >= _CACHE_MAX:
            _label_names_ok.clear()
        _label_names_ok[name] = ok
    return ok


class _Fixed(Collector):
    def __init__(self, families: list[Metric]) -> None:
        self._families = families

    def collect(self) -> Iterator[Metric]:
        yield from self._families


def _fallback(families: list[Metric]) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Fixed(families))
    return generate_latest(registry)
