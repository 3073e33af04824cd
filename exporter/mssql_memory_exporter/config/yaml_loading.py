"""Reading a YAML file as the config loaders want it: duplicate keys refused, errors with line and column."""

from __future__ import annotations

from typing import Any

import yaml

from .errors import ConfigError


class UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML keeps the last of two equal keys; two targets with one name would silently merge."""

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


def read_yaml(path: str) -> Any:
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config file: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: config file is not valid UTF-8") from None
    try:
        return yaml.load(text, Loader=UniqueKeyLoader)  # a SafeLoader subclass: no arbitrary objects
    except yaml.YAMLError as exc:
        raise yaml_error(path, exc) from None
