"""Targets named by `instance:` go through SQL Server Browser (UDP 1434) before the TDS login.

The Browser stand-in binds UDP 1434 on 127.0.0.1, as the drivers only ever ask that port.
"""

from __future__ import annotations

import socket
import time

import pytest

from tests.conftest import scrape, value
from tests.standin.browser import BROWSER_PORT, BrowserStandIn, svr_resp
from tests.timeouts import SLACK_SECONDS


def _can_bind_browser_port() -> bool:
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.bind(("127.0.0.1", BROWSER_PORT))
    except OSError:
        return False
    finally:
        probe.close()
    return True


pytestmark = pytest.mark.skipif(
    not _can_bind_browser_port(), reason="UDP 1434 on 127.0.0.1 is taken or needs privileges here"
)


def _instance_config(s, name: str, **overrides: object):
    return s.config(port=None, instance=name, **overrides)


def test_svr_resp_layout():
    packet = svr_resp("HOST", "SQL2019", "15.0.2000.5", 14330)
    body = b"ServerName;HOST;InstanceName;SQL2019;IsClustered;No;Version;15.0.2000.5;tcp;14330;;"
    assert packet == bytes([0x05]) + len(body).to_bytes(2, "little") + body


def test_named_instance_is_found_through_the_browser(standin, scraper_for, driver):
    s = standin("named-instance-padded")
    with BrowserStandIn({"SQL2019": s.port}) as browser:
        config = _instance_config(s, "sql2019", driver=driver)
        assert config.targets["standin"].instance == "sql2019"
        got = scrape(scraper_for(config), config)
    assert value(got, "mssql_up") == 1
    assert value(got, "mssql_page_life_expectancy_seconds") > 0
    assert [n.upper() for n in browser.requests] == ["SQL2019"]


def test_silent_browser_is_down_within_the_timeout_then_recovers(standin, scraper_for, caplog):
    s = standin("named-instance-padded")
    config = _instance_config(s, "SQL2019", login_timeout_seconds=2)
    scraper = scraper_for(config)
    with BrowserStandIn({"SQL2019": s.port}, silent=True) as browser:
        started = time.monotonic()
        got = scrape(scraper, config, timeout=4)
        elapsed = time.monotonic() - started
    assert value(got, "mssql_up") == 0
    assert elapsed < 4 + SLACK_SECONDS, f"a silent Browser held the scrape for {elapsed:.1f} s"
    assert browser.requests, "the driver never asked the Browser"
    assert any(r.getMessage() == "scrape failed" for r in caplog.records)
    # FreeTDS asks a silent Browser 16 times, a second apart, whatever the login timeout (measured
    # with 1.3.17); until it gives up, the target's worker is busy and scrapes report it down.
    with BrowserStandIn({"SQL2019": s.port}):
        ups = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and ups[-1:] != [1]:
            ups.append(value(scrape(scraper, config, timeout=4), "mssql_up"))
    assert ups[-1] == 1, f"never recovered: {ups}"
