"""The pieces of the text format (0.0.4) the writer and the collectors' families share: a series' line
prefix `name{labels} ` and a value as prometheus_client's `floatToGoString` writes it.

Both must equal what `generate_latest` writes byte for byte (tests/unit/test_exposition.py); anything they do
not handle raises `Unsupported`, and the writer hands the whole body to `generate_latest`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from prometheus_client.utils import floatToGoString

# The legacy character sets: a name outside them is escaped by generate_latest, and we leave that to it.
METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_CACHE_MAX = 4096
_label_names_ok: dict[str, bool] = {}


class Unsupported(Exception):
    """A family or series this writer does not handle; generate_latest writes the body instead."""


def number(value: float) -> str:
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


def series_prefix(sample_name: str, labels: Mapping[str, object]) -> str:
    """`name{labels} ` (labels sorted by name, values escaped), or `name ` without labels."""
    if not labels:
        return sample_name + " "
    return f"{sample_name}{{{label_text(labels)}}} "


def label_text(labels: Mapping[str, object]) -> str:
    parts = []
    for name in sorted(labels):
        if not label_name_ok(name):
            raise Unsupported
        value = labels[name]
        if type(value) is not str:
            raise Unsupported  # generate_latest would fail on it; let it say so
        if "\\" in value or "\n" in value or '"' in value:
            value = value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")
        parts.append(f'{name}="{value}"')
    return ",".join(parts)


def label_name_ok(name: str) -> bool:
    ok = _label_names_ok.get(name)
    if ok is None:
        # Names starting with "__" are reserved; generate_latest escapes them.
        ok = _LABEL_NAME.fullmatch(name) is not None and not name.startswith("__")
        if len(_label_names_ok) >= _CACHE_MAX:
            _label_names_ok.clear()
        _label_names_ok[name] = ok
    return ok
