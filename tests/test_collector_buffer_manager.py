"""The buffer_manager collector (perf object Buffer Manager): its facts, from perf rows in process."""

from __future__ import annotations

import pytest
from mssql_memory_exporter.collectors import buffer_manager
from mssql_memory_exporter.collectors.base import ScrapeContext, SectionResult
from mssql_memory_exporter.collectors.perfcounters import CounterKind
from mssql_memory_exporter.metrics.builder import FamilyBuilder, MissingData

from tests.conftest import exposition
from tests.offline import (
    NamedTarget,
    perf_result,
)

BM = "SQLServer:Buffer Manager"
CNTR_TYPE = {CounterKind.GAUGE: 65792, CounterKind.CUMULATIVE: 272696576}


def buffer_manager_rows(**replace: tuple[str, int, int] | None) -> list[tuple[str, str, str, int, int]]:
    """Every Buffer Manager counter a server reports, at value 1; `replace` (by counter) swaps a row for
    (counter name as sent, value, cntr_type), or drops it with None."""
    rows = []
    for spec in buffer_manager.METRICS:
        counter, value, cntr_type = spec.counter, 1, CNTR_TYPE[spec.kind]
        if spec.counter in replace:
            if replace[spec.counter] is None:
                continue
            counter, value, cntr_type = replace[spec.counter]  # type: ignore[misc]
        rows.append((BM, counter, "", value, cntr_type))
    return rows


def run_buffer_manager(results: dict[str, SectionResult]) -> str:
    out = FamilyBuilder({})
    buffer_manager.collect(results, ScrapeContext(0.0, "oltp", {}, target=NamedTarget()), out)
    return exposition(out.families())


def test_hit_ratio_is_value_over_base_and_absent_when_base_is_zero():
    text = run_buffer_manager(
        perf_result(
            *buffer_manager_rows(),
            (BM, "Buffer cache hit ratio", "", 930, 537003264),
            (BM, "Buffer cache hit ratio base", "", 1000, 1073939712),
        )
    )
    assert "mssql_buffer_cache_hit_ratio 0.93" in text
    text = run_buffer_manager(
        perf_result(
            *buffer_manager_rows(),
            (BM, "Buffer cache hit ratio", "", 0, 537003264),
            (BM, "Buffer cache hit ratio base", "", 0, 1073939712),
        )
    )
    assert "mssql_buffer_cache_hit_ratio" not in text


def test_required_counter_typed_against_its_name_fails_the_collector():
    # A server reporting lazy writes as a raw gauge: exporting it as *_total would break rate(), and
    # skipping it would leave a hole behind collector_success 1.
    rows = buffer_manager_rows(**{"Lazy writes/sec": ("Lazy writes/sec", 17, 65792)})
    with pytest.raises(MissingData, match=r"'Lazy writes/sec' has type gauge, expected counter"):
        run_buffer_manager(perf_result(*rows))


def test_optional_counter_typed_against_its_name_is_skipped_with_the_target_logged(caplog):
    rows = buffer_manager_rows(**{"Extension page reads/sec": ("Extension page reads/sec", 17, 65792)})
    text = run_buffer_manager(perf_result(*rows))
    assert "mssql_buffer_pool_extension_page_reads_total" not in text
    assert "mssql_buffer_pool_extension_page_writes_total 1.0" in text
    assert "mssql_lazy_writes_total 1.0" in text
    (warning,) = [r for r in caplog.records if r.getMessage() == "counter type does not match metric"]
    assert warning.target == "prod-a" and warning.counter == "Extension page reads/sec"
    assert (warning.expected, warning.got) == ("counter", "gauge")


def test_optional_counters_may_be_absent():
    rows = buffer_manager_rows(
        **{
            "Extension page reads/sec": None,
            "Extension page writes/sec": None,
            "Extension allocated pages": None,
        }
    )
    text = run_buffer_manager(perf_result(*rows))
    assert "mssql_buffer_pool_extension" not in text and "mssql_page_reads_total 1.0" in text


def test_counter_names_match_case_insensitively():
    rows = buffer_manager_rows(**{"Page lookups/sec": ("Page Lookups/sec", 77, 272696576)})
    text = run_buffer_manager(perf_result(*rows))
    assert "mssql_page_lookups_total 77.0" in text
