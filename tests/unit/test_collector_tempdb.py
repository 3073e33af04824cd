"""The tempdb collector (sys.dm_io_virtual_file_stats per tempdb file): its facts from the stand-in's
rows in process."""

from __future__ import annotations

import pytest

from tests.conftest import scrape, value
from tests.file_figures import MB, TEMPDB_VOLUME, series, total


def test_tempdb_files_on_their_own_volume(offline_standin, scraper_for):
    s = offline_standin("tempdb-separate-volume")
    config = s.config(volume_map={TEMPDB_VOLUME: TEMPDB_VOLUME})
    scraper = scraper_for(config)
    first = scrape(scraper, config)
    assert value(first, "mssql_exporter_collector_success", collector="tempdb") == 1
    s.clock.advance(10)
    second = scrape(scraper, config)
    files = series(second, "mssql_tempdb_file_written_bytes_total")
    assert len(files) == 9  # 8 data files and the log, each its own series
    assert {dict(labels)["volume"] for labels in files} == {TEMPDB_VOLUME}
    assert (
        value(second, "mssql_tempdb_file_written_bytes_total", file="templog", volume=TEMPDB_VOLUME)
        == 0.02 * 20 * MB * 10
    )
    written = total(second, "mssql_tempdb_file_written_bytes_total") - total(
        first, "mssql_tempdb_file_written_bytes_total"
    )
    assert written == pytest.approx(20 * MB * 10, rel=1e-6)
    # Stall times arrive in ms and are exported in seconds: 40 ms per second for 10 s is 0.4 s.
    assert (
        value(second, "mssql_tempdb_file_write_stall_seconds_total", file="tempdev", volume=TEMPDB_VOLUME)
        == 0.4
    )
    reads = value(second, "mssql_tempdb_file_read_bytes_total", file="tempdev", volume=TEMPDB_VOLUME)
    assert (
        value(second, "mssql_tempdb_file_reads_total", file="tempdev", volume=TEMPDB_VOLUME) == reads // 65536
    )
    # Without a map, a Linux file's volume is its directory (SQL Server on Linux reports no mount point).
    assert (
        value(second, "mssql_volume_written_bytes_total", volume="/var/opt/mssql/data", file_type="data") > 0
    )
    assert value(second, "mssql_volume_written_bytes_total", volume=TEMPDB_VOLUME, file_type="log") > 0
