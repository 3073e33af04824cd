"""Structured logging in the two formats Prometheus exporters use: logfmt (default) and JSON.

Fields passed as `logger.info("msg", extra={"target": "prod-a"})` become keys of the line, so log
pipelines can filter on them without parsing the message.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any, Literal

__all__ = ["LEVELS", "JsonFormatter", "LogfmtFormatter", "format_logfmt_value", "setup_logging"]

LEVELS: dict[str, int] = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warn": logging.WARNING,
    "error": logging.ERROR,
}
_LEVEL_NAMES = {logging.DEBUG: "debug", logging.INFO: "info", logging.WARNING: "warn", logging.ERROR: "error"}

LogFormat = Literal["logfmt", "json"]

# Attributes every LogRecord has; whatever else is on a record came from `extra=`.
_STANDARD_ATTRS = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


def _timestamp(record: logging.LogRecord) -> str:
    moment = datetime.fromtimestamp(record.created, tz=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _level(record: logging.LogRecord) -> str:
    if record.levelno >= logging.CRITICAL:
        return "error"
    return _LEVEL_NAMES.get(record.levelno, record.levelname.lower())


def _fields(record: logging.LogRecord, formatter: logging.Formatter) -> dict[str, Any]:
    """The line's keys in a stable order: ts, level, msg, then the caller's extras, then errors."""
    # rstrip: captured warnings end in a newline that would only show up as a trailing "\n".
    message = record.getMessage().rstrip()
    fields: dict[str, Any] = {"ts": _timestamp(record), "level": _level(record), "msg": message}
    for key, value in vars(record).items():
        if key not in _STANDARD_ATTRS and not key.startswith("_"):
            fields[key] = value
    if record.exc_info:
        fields["err"] = formatter.formatException(record.exc_info)
    elif record.exc_text:
        fields["err"] = record.exc_text
    return fields


def format_logfmt_value(value: object) -> str:
    """One logfmt value: bare when it is safe, otherwise double-quoted with escapes."""
    if value is None:
        text = ""
    elif isinstance(value, bool):
        text = "true" if value else "false"
    else:
        text = str(value)
    needs_quotes = text == "" or any(ch in ' "=\\' or not ch.isprintable() for ch in text)
    if not needs_quotes:
        return text
    return (
        '"' + "".join(_ESCAPES.get(ch) or (ch if ch.isprintable() else _code_point(ch)) for ch in text) + '"'
    )


_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _code_point(ch: str) -> str:
    # Any other character that is not printable (ESC, NUL, DEL, C1 controls, U+2028 ...) as its code
    # point, as Go's logfmt encoder writes control characters: a request path or a server's error text
    # can carry them, and written raw they would drive the reader's terminal or split the line.
    return f"\\u{ord(ch):04x}" if ord(ch) <= 0xFFFF else f"\\U{ord(ch):08x}"


def _logfmt_key(key: str) -> str:
    # Keys cannot be quoted in logfmt; anything odd becomes '_' so the line still parses.
    return "".join(ch if ch.isalnum() or ch in "_.-" else "_" for ch in key) or "_"


class LogfmtFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        fields = _fields(record, self)
        return " ".join(f"{_logfmt_key(key)}={format_logfmt_value(value)}" for key, value in fields.items())


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        # default=str: an extra that JSON cannot encode is logged as its text rather than lost.
        return json.dumps(_fields(record, self), default=str, ensure_ascii=False, separators=(",", ":"))


class _ExporterHandler(logging.StreamHandler):
    """Marks the handler this module installed, so a second setup replaces it but leaves others."""


def setup_logging(level: str, fmt: str) -> None:
    """Send all logging to stderr at `level` (debug|info|warn|error) in `fmt` (logfmt|json)."""
    if level not in LEVELS:
        raise ValueError(f"unknown log level {level!r}; use one of {', '.join(LEVELS)}")
    formatters: dict[str, type[logging.Formatter]] = {"logfmt": LogfmtFormatter, "json": JsonFormatter}
    if fmt not in formatters:
        raise ValueError(f"unknown log format {fmt!r}; use logfmt or json")
    handler = _ExporterHandler(sys.stderr)
    handler.setFormatter(formatters[fmt]())
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _ExporterHandler)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(LEVELS[level])
    # Python warnings (deprecations in dependencies) then arrive in the same format.
    logging.captureWarnings(True)
