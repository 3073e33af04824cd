"""Which spec keys a jsonnet `_config` can change without Python: found by perturbing the spec.

The rules and dashboards are rendered in Python from the typed spec (alerts/spec.py). A key is
*transparent* when the outputs carry its value only verbatim: as a JSON number equal to it, or inside a
string as `number()` (or the string itself) prints it. Then jsonnet can rebuild the outputs for any value
by putting `_config`'s value where the spec's was. A key whose value is parsed, scaled, compared or
reworded on its way out (a duration turned into seconds, a ratio into a percentage, a window that picks a
rule group) is *refused*: the jsonnet mixin asserts it keeps the shipped value.

How a key is classified: render with the key set to a token value that appears nowhere in the shipped
outputs, find where the token lands, and check that putting the shipped value back in those places gives
the shipped outputs exactly. Then all transparent keys are set to tokens at once (a second, different
set) and the template filled with those must equal Python's render: two keys in one string, and a value
that changes structure, are caught there. What this cannot see is a comparison in a generator that some
value other than the three tried would cross; docs/mixin.md says so.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import yaml
from pydantic import BaseModel

from alerts import generate as rules
from alerts.spec import Spec, duration_seconds, number
from dashboards import generate as dashboards

Path_ = tuple[str, ...]
ATTEMPTS = 8  # token values rendered per key before it is refused (a render takes about 0.3 s)
# The outputs a jsonnet mixin gives (mixtool's layout): every rule file and every dashboard, parsed.
# The opt-in smartctl_exporter rules rewrite the selector's job matcher (not a verbatim copy): sites that
# want them take them from `make mixin`.
LEFT_TO_MAKE_MIXIN = frozenset({"optional/mssql.smartctl-exporter.rules.yml"})


def outputs(spec: Spec) -> dict[str, Any]:
    """{"rules/<file>": parsed YAML, "dashboards/<file>": parsed JSON} as `make mixin` writes them."""
    out: dict[str, Any] = {
        f"rules/{n}": yaml.safe_load(t) for n, t in rules.render(spec).items() if n not in LEFT_TO_MAKE_MIXIN
    }
    for name, text in dashboards.render(spec).items():
        if name.endswith(".json"):
            out[f"dashboards/{name}"] = json.loads(text)
    return out


def leaves(model: BaseModel, prefix: Path_ = ()) -> Iterator[tuple[Path_, Any]]:
    """(path as the YAML spells it, value) of every setting; a mapping or list that is a value rather
    than a section (alert_labels, evaluators, coverage_tiers) is one leaf."""
    for name, info in type(model).model_fields.items():
        value = getattr(model, name)
        path = (*prefix, info.alias or name)
        if isinstance(value, BaseModel):
            yield from leaves(value, path)
        else:
            yield path, value


def dotted(path: Path_) -> str:
    return ".".join(path)


def with_value(raw: dict[str, Any], path: Path_, value: Any) -> dict[str, Any]:
    copy = json.loads(json.dumps(raw))
    node = copy
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return copy


def token_text(value: Any) -> str:
    return value if isinstance(value, str) else number(value)


def _candidates(value: Any, round_: int) -> Iterator[Any]:
    """Values of the key's own type near its shipped one (so that orderings between keys still hold),
    stepped by primes so that their text is unlike the outputs'; `round_` gives a second, different set."""
    primes = [n for n in range(101, 4000) if all(n % d for d in range(2, int(n**0.5) + 1))][round_::2]
    if isinstance(value, bool):
        return
    if isinstance(value, int):
        for p in primes:
            yield value + p
            if value - p > 0:
                yield value - p
    elif isinstance(value, float):
        for p in primes:
            yield round(value * (1 - p / 1e5), 9)
            yield round(value * (1 + p / 1e5), 9)
    elif isinstance(value, str):
        match = re.fullmatch(r"(\d+)(ms|s|m|h|d|w|y)", value)
        if match:  # a Duration: the token must stay one, in whole seconds near the shipped value
            seconds = int(duration_seconds(value))
            for p in primes:
                yield f"{seconds + p}s"
                if seconds - p > 0:
                    yield f"{seconds - p}s"
        else:
            matcher = re.fullmatch(r'(\w+(?:=~|!=|!~|=))"[^"]*"', value)  # a selector: keep it one
            for p in primes:
                yield f'{matcher.group(1)}"zqtok{p}x"' if matcher else f"zqtok{p}x"


@dataclass
class Probe:
    spec: Spec
    shipped: dict[str, Any] = field(init=False)
    blob: str = field(init=False)
    used: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.shipped = outputs(self.spec)
        self.blob = json.dumps(self.shipped) + json.dumps(self.spec.raw)

    def token(self, path: Path_, value: Any, round_: int) -> tuple[Any, dict[str, Any]] | None:
        """A value for `path` that validates and is unique, with its outputs; None if no candidate is."""
        tried = 0
        for candidate in _candidates(value, round_):
            text = token_text(candidate)
            if tried == ATTEMPTS:
                return None
            if text in self.blob or any(text in u or u in text for u in self.used):
                continue
            tried += 1
            try:
                out = outputs(Spec.parse(with_value(self.spec.raw, path, candidate)))
            except ValueError:  # refused by the spec (SpecError) or by a generator
                continue
            self.used.add(text)
            return candidate, out
        return None


Hole = tuple[Path_]  # a place where a key's value goes


def template(data: Any, tokens: dict[str, Path_], numbers: dict[float, Path_]) -> Any:
    """`data` with each token replaced by a hole: a string becomes a list of parts (str or hole), a
    number equal to a numeric token becomes a hole."""
    if isinstance(data, dict):  # a key may carry a value too (a column named after the rate window)
        return {template(k, tokens, numbers): template(v, tokens, numbers) for k, v in data.items()}
    if isinstance(data, list):
        return [template(v, tokens, numbers) for v in data]
    if isinstance(data, str) and tokens:
        pattern = "|".join(re.escape(t) for t in sorted(tokens, key=len, reverse=True))
        parts = re.split(f"({pattern})", data)
        if len(parts) == 1:
            return data
        return Parts((tokens[p],) if i % 2 else p for i, p in enumerate(parts) if p != "" or i % 2)
    if isinstance(data, int | float) and not isinstance(data, bool) and data in numbers:
        return (numbers[data],)
    return data


class Parts(tuple[Any, ...]):
    """A string with holes: str pieces and (path,) holes (a tuple: it may be a mapping's key)."""


def fill(tmpl: Any, values: dict[Path_, Any]) -> Any:
    """What jsonnet computes: the template with each hole given its key's value."""
    if isinstance(tmpl, Parts):
        return "".join(p if isinstance(p, str) else token_text(values[p[0]]) for p in tmpl)
    if isinstance(tmpl, tuple):
        return values[tmpl[0]]
    if isinstance(tmpl, dict):
        return {fill(k, values): fill(v, values) for k, v in tmpl.items()}
    if isinstance(tmpl, list):
        return [fill(v, values) for v in tmpl]
    return tmpl


@dataclass
class Verdict:
    transparent: list[Path_]  # changed in the outputs by substitution (or not read by them at all)
    refused: list[Path_]  # transformed on the way out: the jsonnet keeps the shipped value
    template: Any  # the outputs with a hole for every transparent key


# Not leaves a token can stand for: a mapping or list value. alert_labels is merged into every alert's
# labels by the emitter itself; the others are refused.
WHOLE = {("alert_labels",)}
# A datasource uid changes the dashboards' structure (no Data source variable): the jsonnet does what
# `pinned` does here, and classify() checks that this gives Python's dashboards.
DATASOURCE = ("grafana", "datasource_uid")
DS_REF = {"type": "prometheus", "uid": "${datasource}"}
DS_LINK_PARAM = "var-datasource=${datasource}&"


def pinned(node: Any, uid: str) -> Any:
    """A dashboard with its Data source variable replaced by the datasource `uid` (the model of the
    jsonnet's `pin`)."""
    if node == DS_REF:
        return {"type": "prometheus", "uid": uid}
    if isinstance(node, dict):
        out = {k: pinned(v, uid) for k, v in node.items()}
        if isinstance(node.get("templating"), dict):
            out["templating"] = {
                **out["templating"],
                "list": [v for v in out["templating"]["list"] if v.get("type") != "datasource"],
            }
        return out
    if isinstance(node, list):
        return [pinned(v, uid) for v in node]
    if isinstance(node, str):
        return node.replace(DS_LINK_PARAM, "")
    return node


def pins_like_python(probe: Probe) -> bool:
    found = probe.token(DATASOURCE, "", 0)
    if found is None:
        return False
    uid, out = found
    return all(
        out[name] == (pinned(data, uid) if name.startswith("dashboards/") else data)
        for name, data in probe.shipped.items()
    )


def classify(spec: Spec) -> Verdict:
    probe = Probe(spec)
    defaults = dict(leaves(spec))
    transparent: list[Path_] = []
    refused: list[Path_] = []
    first: dict[Path_, Any] = {}
    for path, value in defaults.items():
        if path in WHOLE:
            continue
        if path == DATASOURCE:
            (transparent if pins_like_python(probe) else refused).append(path)
            continue
        found = probe.token(path, value, 0) if isinstance(value, int | float | str) else None
        if found is None:
            refused.append(path)
            continue
        tok, out = found
        text = token_text(tok)
        tmpl = template(out, {text: path}, {float(tok): path} if not isinstance(tok, str) else {})
        if fill(tmpl, defaults) == probe.shipped and fill(tmpl, {path: tok}) == out:
            transparent.append(path)
            first[path] = tok
        else:
            refused.append(path)
    # All transparent keys at once, then a second set of tokens: the template must predict Python.
    raw = spec.raw
    for path, tok in first.items():
        raw = with_value(raw, path, tok)
    out = outputs(Spec.parse(raw))
    tokens = {token_text(tok): p for p, tok in first.items()}
    numbers = {float(tok): p for p, tok in first.items() if not isinstance(tok, str)}
    tmpl = template(out, tokens, numbers)
    if fill(tmpl, defaults) != probe.shipped:
        raise AssertionError("the combined template does not give the shipped outputs back")
    raw = spec.raw
    second: dict[Path_, Any] = {}
    for path in transparent:
        if path == DATASOURCE:
            continue
        found = probe.token(path, defaults[path], 1)
        if found is None:
            raise AssertionError(f"{dotted(path)}: no second token")
        second[path] = found[0]
        raw = with_value(raw, path, second[path])
    if fill(tmpl, {**defaults, **second}) != outputs(Spec.parse(raw)):
        raise AssertionError("the template does not predict Python's outputs for a second set of values")
    return Verdict(transparent, refused, tmpl)
