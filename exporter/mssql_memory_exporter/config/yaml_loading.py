"""Reading a YAML file as the config loaders want it: duplicate keys refused, errors with line and column."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import yaml

from .errors import ConfigError, LoadAbandoned
from .secret_file import SecretFileError, read_regular_file

# Ten thousand targets take about 2 MB of YAML; a file far larger was not meant as this config.
MAX_CONFIG_BYTES = 32 << 20


Cancelled = Callable[[], bool]


class UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML keeps the last of two equal keys; two targets with one name would silently merge.

    Reading is also abandoned when `cancelled()` turns true: PyYAML is pure Python here, and ten
    thousand targets take seconds to parse on a busy machine; a stopping exporter must not wait for
    that (issue 36). It is asked at each node, which costs far less than composing the node."""

    cancelled: Cancelled | None = None

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        if self.cancelled is not None and self.cancelled():
            raise LoadAbandoned("config reading abandoned")
        return super().compose_node(parent, index)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            try:
                duplicate = key in seen
                seen.add(key)
            except TypeError:
                continue  # unhashable: the base class reports it with its position
            if duplicate:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}", key_node.start_mark
                )
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_timestamp(self, node: yaml.Node) -> Any:
        # An unquoted 2023-02-30 looks like a date to YAML, and the base class lets datetime's ValueError
        # escape; report it like any other YAML error, with its position.
        try:
            assert isinstance(node, yaml.ScalarNode)  # the resolver tags only scalars as timestamps
            return super().construct_yaml_timestamp(node)
        except ValueError as exc:
            raise yaml.constructor.ConstructorError(
                None, None, f"invalid date: {exc}", node.start_mark
            ) from None


UniqueKeyLoader.add_constructor("tag:yaml.org,2002:timestamp", UniqueKeyLoader.construct_yaml_timestamp)


def yaml_error(path: str, exc: yaml.YAMLError) -> ConfigError:
    # str(exc) would quote a snippet of the offending line, which may be next to a secret; keep to
    # the position and the parser's description.
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    problem = getattr(exc, "problem", None) or "invalid YAML"
    context = getattr(exc, "context", None)
    detail = f"{context}: {problem}" if context else problem
    return ConfigError(f"{path}: {where}invalid YAML: {detail}")


def read_yaml(path: str, cancelled: Cancelled | None = None) -> Any:
    """The YAML at `path`, or a ConfigError naming the problem: a config file is read like a secret
    (secret_file.read_regular_file), so a FIFO, a device or a runaway file cannot block or exhaust a
    reload, and every way the YAML library can fail becomes one line."""
    try:
        content, _info = read_regular_file(path, MAX_CONFIG_BYTES, "a config")
    except SecretFileError as exc:
        reason = str(exc)
        reason = "it" + reason[len(path) :] if reason.startswith(f"{path} ") else reason
        raise ConfigError(f"{path}: cannot read config file: {reason}") from None
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: config file is not valid UTF-8") from None
    loader = UniqueKeyLoader(text)  # a SafeLoader subclass: no arbitrary objects
    loader.cancelled = cancelled
    try:
        return loader.get_single_data()
    except yaml.YAMLError as exc:
        raise yaml_error(path, exc) from None
    except RecursionError:
        # PyYAML composes nodes recursively: some thousands of nested mappings exhaust the stack.
        raise ConfigError(f"{path}: invalid YAML: nested too deeply for the parser") from None
    except ValueError as exc:
        # A constructor outside the timestamp one above: int() of a 5000-digit number is refused by
        # Python's integer string limit. Its own words never quote the value; other ValueErrors might.
        detail = "an integer with too many digits" if "digits" in str(exc) else "a value it cannot convert"
        raise ConfigError(f"{path}: invalid YAML: {detail}") from None
    finally:
        loader.dispose()


NOT_UTF8 = "which is not valid UTF-8 (a \\u escape of half a pair?)"


def surrogate_errors(data: Any, source: str) -> list[str]:
    """One line per string (key or value) holding a lone surrogate, with its dotted path. YAML's "\ud800"
    escape makes one, and no UTF-8 encoder takes it: the exposition (or connection string) of every
    probe carrying it would fail, so each probe answered 500 while --config.check called the file valid
    (issue 36). Checked on the YAML as read, so every field is covered, keys included."""
    errors: list[str] = []
    seen: set[int] = set()  # anchors and aliases share objects; each is looked at once
    stack: list[tuple[tuple[str, ...], Any]] = [((), data)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, str):
            found = _surrogate(value)
            if found is not None:
                where = ".".join(path) or "(top level)"
                errors.append(f"{source}: {where}: contains a lone surrogate ({found}), {NOT_UTF8}")
            continue
        if not isinstance(value, dict | list) or id(value) in seen:
            continue
        seen.add(id(value))
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in items:
            found = _surrogate(key) if isinstance(key, str) else None
            name = ascii(key) if found is not None else str(key)
            if found is not None:
                where = ".".join((*path, name))
                errors.append(f"{source}: {where}: the key contains a lone surrogate ({found}), {NOT_UTF8}")
            stack.append(((*path, name), item))
    return sorted(errors)


def _surrogate(text: str) -> str | None:
    for index, char in enumerate(text):
        if 0xD800 <= ord(char) <= 0xDFFF:
            return f"U+{ord(char):04X} at position {index + 1}"
    return None
