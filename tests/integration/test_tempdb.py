"""The stand-in's tempdb model (issue 17): files that autogrow together, a log that grows alone, space
specs it refuses. What the tempdb collectors export from it is tested in their own modules
(tests/unit/test_collector_tempdb_files.py, _tempdb_usage.py, _tempdb_log.py); the figures both sides use are
worked out in tests/tempdb_figures.py.
"""

from __future__ import annotations

import pytest

from tests.standin.tempdb import SpaceSpec, TempdbModel
from tests.tempdb_figures import PAGE, pages


def model(free_mb: float, first_holds_mb: float) -> TempdbModel:
    """Two 1,000 MB data files growing by 100 MB on one volume; the first holds `first_holds_mb` (user
    objects), the second 10 MB."""

    def spec(held: float) -> SpaceSpec:
        return SpaceSpec.parse({"growth_mb": 100, "usage": {"user_objects": held}}, "test")

    files = [
        (1, "/t/tempdev.mdf", 0, pages(1000), spec(first_holds_mb)),
        (3, "/t/temp2.ndf", 0, pages(1000), spec(10)),
    ]
    return TempdbModel(files, {"/t": {"total_gb": 10, "free_gb": free_mb / 1000}})


def test_the_stand_in_grows_every_data_file_at_once_or_none():
    """SQL Server grows all of tempdb's data files together (AUTOGROW_ALL_FILES, 2016 on), and the rules'
    growth room counts the volume's free space in whole such events: the stand-in must grow the same way."""
    # The first file needs 1,250 MB: three growths of both files (1,300 MB each), 600 MB of the volume.
    first, second = model(free_mb=1000, first_holds_mb=1250).space(now=10, since=0)
    assert first.size_pages == second.size_pages == pages(1000) + 3 * pages(100)
    assert first.unallocated_pages == pages(1000) + 3 * pages(100) - pages(1250)
    # 250 MB free: one growth (200 MB) fits, the second does not, so neither file takes its half of it.
    first, second = model(free_mb=250, first_holds_mb=1250).space(now=10, since=0)
    assert first.size_pages == second.size_pages == pages(1000) + pages(100)
    assert first.unallocated_pages == 0  # full: 1,250 MB wanted, 1,100 MB held
    assert first.held["user_objects"] == pages(1000) + pages(100)
    # 150 MB free: less than one growth of both files, although one file's step would fit.
    first, second = model(free_mb=150, first_holds_mb=1250).space(now=10, since=0)
    assert first.size_pages == second.size_pages == pages(1000)


# --------------------------------------------------------------------------- tempdb's log


def log_model(free_mb: float, log_used: object, max_mb: float | None = None) -> TempdbModel:
    """A 100 MB log growing by 20 MB (up to `max_mb`) on a volume with `free_mb` free, beside one 1,000 MB
    data file holding 10 MB."""
    spec = {"type": 1, "growth_mb": 20, "log_used": log_used, "log_reuse_wait": "ACTIVE_TRANSACTION"}
    if max_mb is not None:
        spec["max_size_mb"] = max_mb
    files = [
        (1, "/t/tempdev.mdf", 0, pages(1000), SpaceSpec.parse({"usage": {"user_objects": 10}}, "data")),
        (2, "/t/templog.ldf", 1, pages(100), SpaceSpec.parse(spec, "log")),
    ]
    return TempdbModel(files, {"/t": {"total_gb": 10, "free_gb": free_mb / 1000}})


def test_the_stand_in_log_grows_alone_never_shrinks_and_is_full_where_it_cannot_grow():
    def log(m: TempdbModel, now: float) -> tuple[int, int]:
        (f,) = [f for f in m.space(now=now, since=0) if f.file_id == 2]
        return f.size_pages, f.log_used_pages

    # 150 MB from t=100 (a big transaction), 10 MB again from t=200: the log grew by three 20 MB steps
    # (160 MB), keeps them after the transaction ends, and took them from the volume; the data file did
    # not grow.
    m = log_model(free_mb=1000, log_used={"mb": 10, "steps": [[100, 150], [200, 10]]})
    assert log(m, 50) == (pages(100), pages(10))
    assert log(m, 150) == (pages(100) + 3 * pages(20), pages(150))
    assert log(m, 300) == (pages(100) + 3 * pages(20), pages(10))
    assert m.volume_bytes("/t/templog.ldf", now=300, since=0) == (10 * 10**9, 10**9 - 3 * pages(20) * PAGE)
    data = [f for f in m.space(now=300, since=0) if f.file_id == 1]
    assert data[0].size_pages == pages(1000)
    # 50 MB free: two steps fit (40 MB), the third does not; the log is full at 140 MB.
    m = log_model(free_mb=50, log_used={"mb": 10, "steps": [[100, 150]]})
    assert log(m, 150) == (pages(100) + 2 * pages(20), pages(100) + 2 * pages(20))
    # A 130 MB maximum: one whole step and one cut short at the maximum, whatever the volume has.
    m = log_model(free_mb=1000, log_used={"mb": 10, "steps": [[100, 150]]}, max_mb=130)
    assert log(m, 150) == (pages(130), pages(130))
    assert m.log_reuse_wait == "ACTIVE_TRANSACTION"


def test_the_stand_in_refuses_log_usage_on_a_data_file_and_data_usage_on_the_log():
    with pytest.raises(ValueError, match="log_used"):
        SpaceSpec.parse({"type": 0, "log_used": 10}, "data")
    with pytest.raises(ValueError, match="usage is for data files"):
        SpaceSpec.parse({"type": 1, "usage": {"user_objects": 10}}, "log")
    with pytest.raises(ValueError, match="log_reuse_wait"):
        SpaceSpec.parse({"type": 1, "log_reuse_wait": "ACTIVE_TRANSACTIONS"}, "log")


