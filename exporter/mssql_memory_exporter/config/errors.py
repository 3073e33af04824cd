"""Config errors: one line per problem, `<file>: <dotted.field.path>: <what is wrong>`, and the rewording
of pydantic's messages into that form (YAML types named as the operator wrote them)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pydantic import (
    ValidationError,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

# Never names the variable (see AuthModule._env_is_set).
ENV_UNSET_MESSAGE = "the environment variable it names is not set or is empty"
INLINE_PASSWORD_MESSAGE = "inline passwords are not allowed; use password_env or password_file"


class ConfigError(Exception):
    """A configuration problem; `str()` is one line per problem, never a secret."""

    def __init__(self, lines: list[str] | str) -> None:
        self.lines = [lines] if isinstance(lines, str) else list(lines)
        super().__init__("\n".join(self.lines))


class LoadAbandoned(Exception):
    """Loading was given up on request (the exporter is stopping); nothing was loaded."""


def unexpected_error(source: str, exc: BaseException) -> ConfigError:
    """A failure no check foresaw (a library's own exception), as one config error line: its type and the
    first line of its message, cut short, so a log line stays one line and an operator has a lead."""
    message = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
    detail = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    return ConfigError(f"{source}: cannot be loaded: {detail}")


class ReloadRefused(Exception):
    """A new config refused while serving (app/reload.py raises it, the web's `POST /-/reload` answers it);
    `lines` are the start-up error lines, safe to log and answer."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        super().__init__("\n".join(lines))


class CredentialError(ConfigError):
    """A password source that could not be read at connect time (names the source, never the value)."""


class DriverError(ConfigError):
    """No installed ODBC driver satisfies a target's `driver` / `encryption` choice."""


def error_at(loc: tuple[str | int, ...], message: str) -> ValidationError:
    """A validation error pinned to a field, for checks that span fields. Raised from inside a
    validator, pydantic prefixes the location of the enclosing model, so the report stays dotted."""
    # The message goes in as context, not as the template, so braces in user-supplied names stay literal.
    error = PydanticCustomError("config", "{message}", {"message": message})
    detail = InitErrorDetails(type=error, loc=loc, input=None)
    return ValidationError.from_exception_data("config", [detail])


_SHOULD = re.compile(r"^(Input|String|Value|Dictionary|List|Number) should (?:be )?")
_GENERIC_TYPES = {
    "model_type": "must be a mapping (key: value)",
    "dict_type": "must be a mapping (key: value)",
}


# Type checks are strict (no "1433" for a port, no `true` for a number, no "yes" for a boolean): the error
# names what YAML made of the value, since that is what the operator must change.
_STRICT_TYPES = {
    "int_type": "an integer",
    "float_type": "a number",
    "bool_type": "true or false",
    "string_type": "a string",
}


def yaml_type(value: Any) -> str:
    """What YAML made of a value, for an error message. Strings are not echoed: a misplaced secret
    could be one."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, int):
        return f"an integer ({value})"
    if isinstance(value, float):
        return f"a number ({value!r})"
    if isinstance(value, str):
        return "a string (quoted in YAML, or not a plain number or true/false)"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list | tuple):
        return "a list"
    return type(value).__name__


def _describe(error: Mapping[str, Any]) -> str:
    """pydantic's wording ("Input should be ...") rephrased for someone editing a YAML file."""
    kind = error["type"]
    if kind in _STRICT_TYPES:
        return f"expected {_STRICT_TYPES[kind]}, got {yaml_type(error.get('input'))}"
    loc = error["loc"]
    if kind == "extra_forbidden":
        return INLINE_PASSWORD_MESSAGE if loc and loc[-1] == "password" else "unknown key"
    if kind == "missing":
        return "is required"
    if kind in _GENERIC_TYPES:
        return _GENERIC_TYPES[kind]
    message = str(error["msg"]).removeprefix("Value error, ").removeprefix("Assertion failed, ")
    match = _SHOULD.match(message)
    if match:
        verb = "must be " if "be " in match.group(0) else "must "
        message = verb + message[match.end() :]
    return message


def _error_line(source: str, error: Mapping[str, Any]) -> str:
    parts = [str(part) for part in error["loc"]]
    what = _describe(error)
    if parts and parts[-1] == "[key]":
        # pydantic's marker for an invalid mapping key; the key itself is already the previous part.
        parts.pop()
        what = f"invalid key: {what}"
    return f"{source}: {'.'.join(parts)}: {what}" if parts else f"{source}: {what}"


def to_config_error(source: str, exc: ValidationError) -> ConfigError:
    # Inputs are kept only for the type errors, where yaml_type shows a string's type but never its text.
    errors = [
        error if error["type"] in _STRICT_TYPES else {k: v for k, v in error.items() if k != "input"}
        for error in exc.errors(include_url=False, include_input=True)
    ]
    return ConfigError([_error_line(source, error) for error in errors])
