"""Control characters in logged values (issue 36, item 6): quoted as Go's logfmt encoder quotes them, never
written raw (ESC would drive the reader's terminal, NUL and DEL confuse log shippers)."""

from __future__ import annotations

import logging

import pytest
from mssql_memory_exporter.app.logsetup import LogfmtFormatter, format_logfmt_value


@pytest.mark.parametrize(
    ("value", "logged"),
    [
        ("/-/healthy", "/-/healthy"),
        ("/\x1b[2J", '"/\\u001b[2J"'),
        ("a\x00b", '"a\\u0000b"'),
        ("del\x7f", '"del\\u007f"'),
        ("c1\x9b", '"c1\\u009b"'),
        ("line\u2028sep", '"line\\u2028sep"'),
        ("tag\U000e0001", '"tag\\U000e0001"'),
        ('quote " and \\ and\nnewline\ttab\r', '"quote \\" and \\\\ and\\nnewline\\ttab\\r"'),
        ("naïve ünïcode", '"naïve ünïcode"'),  # printable: kept as it is, quoted for the space
    ],
)
def test_values_are_quoted_as_logfmt_does(value: str, logged: str):
    assert format_logfmt_value(value) == logged


def test_a_logged_line_has_no_control_character():
    record = logging.LogRecord("web", logging.DEBUG, __file__, 1, "request", None, None)
    record.path = "/\x1b]0;owned\x07\x00\x7f"
    line = LogfmtFormatter().format(record)
    assert not any(ord(ch) < 0x20 or 0x7F <= ord(ch) < 0xA0 for ch in line), repr(line)
    assert 'path="/\\u001b]0;owned\\u0007\\u0000\\u007f"' in line
