"""The os_memory collector (sys.dm_os_sys_memory, sys.dm_os_process_memory): its facts, from the
stand-in's rows in process."""

from __future__ import annotations

import pytest
from mssql_memory_exporter.collectors import os_memory
from mssql_memory_exporter.collectors.base import ScrapeContext
from mssql_memory_exporter.metrics.builder import FamilyBuilder, ImpossibleValue

from tests.conftest import exposition, samples_of, value
from tests.offline import results_for, samples_offline

KIB = 1024
GIB = 1024**3


def test_kb_columns_become_bytes_and_percent_a_ratio():
    got = samples_offline("healthy-oltp", os_memory.COLLECTOR)
    assert value(got, "mssql_os_physical_memory_bytes") == 25165824 * KIB == 24 * GIB
    assert value(got, "mssql_os_available_physical_memory_bytes") == 6 * GIB
    assert value(got, "mssql_process_physical_memory_bytes") == 17170432 * KIB
    assert value(got, "mssql_process_memory_utilization_ratio") == 1.0


def test_a_non_number_fails_the_collector():
    results = results_for("healthy-oltp")
    result = results[os_memory.PROCESS_TAG]
    at = result.index("memory_utilization_percentage")
    result.raw = [tuple(float("nan") if i == at else v for i, v in enumerate(result.raw[0]))]
    with pytest.raises(ImpossibleValue, match="memory_utilization_percentage"):
        os_memory.collect(results, ScrapeContext(now=0.0, workload="oltp", memo={}), FamilyBuilder({}))


def test_the_memory_state_is_a_state_set_of_five_fixed_series():
    got = samples_offline("healthy-oltp", os_memory.COLLECTOR)
    states = {
        dict(labels)["state"]: v for (name, labels), v in got.items() if name == "mssql_os_memory_state"
    }
    assert states == {"high": 1, "steady": 0, "low": 0, "transitioning": 0, "other": 0}


def test_an_unknown_memory_state_text_is_other_not_a_new_series():
    results = results_for("healthy-oltp")
    result = results[os_memory.SYS_TAG]
    at = result.index("system_memory_state_desc")
    result.raw = [tuple("Memory is fine, thanks" if i == at else v for i, v in enumerate(result.raw[0]))]
    out = FamilyBuilder({})
    os_memory.collect(results, ScrapeContext(now=0.0, workload="oltp", memo={}), out)
    got = samples_of(exposition(out.families()))
    assert value(got, "mssql_os_memory_state", state="other") == 1
    assert len([k for k in got if k[0] == "mssql_os_memory_state"]) == 5
