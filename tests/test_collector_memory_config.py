"""The memory_config collector (sys.configurations, the memory model of sys.dm_os_sys_info, the commit
figures): its facts, from the stand-in's rows in process."""

from __future__ import annotations

import pytest
from mssql_memory_exporter.collectors import memory_config
from mssql_memory_exporter.collectors.base import ScrapeContext, SectionResult
from mssql_memory_exporter.metrics.builder import FamilyBuilder

from tests.conftest import exposition, samples_of, value
from tests.offline import results_for, samples_offline

MIB = 1024 * 1024
GIB = 1024**3


def test_the_setting_in_mb_and_the_commit_figures_become_bytes():
    got = samples_offline("healthy-oltp", memory_config.COLLECTOR)
    assert value(got, "mssql_memory_committed_bytes") == 16 * GIB
    # the setting is in MB
    assert value(got, "mssql_config_max_server_memory_bytes") == 16384 * MIB == 16 * GIB
    assert value(got, "mssql_config_min_server_memory_bytes") == 0
    assert value(got, "mssql_memory_model_info", model="CONVENTIONAL") == 1


def test_a_missing_setting_fails_the_collector():
    results = results_for("healthy-oltp")
    results[memory_config.CONFIG_TAG].raw = results[memory_config.CONFIG_TAG].raw[:1]
    with pytest.raises(Exception, match="server memory"):
        memory_config.collect(results, ScrapeContext(now=0.0, workload="oltp", memo={}), FamilyBuilder({}))


def test_the_unlimited_default_max_server_memory_is_exported_as_it_is():
    results = results_for("healthy-oltp")
    result = results[memory_config.CONFIG_TAG]
    name, at = result.index("name"), result.index("value_in_use")
    result.raw = [
        tuple(
            2147483647 if i == at and row[name] == "max server memory (MB)" else v for i, v in enumerate(row)
        )
        for row in result.raw
    ]
    out = FamilyBuilder({})
    memory_config.collect(results, ScrapeContext(now=0.0, workload="oltp", memo={}), out)
    got = samples_of(exposition(out.families()))
    assert value(got, "mssql_config_max_server_memory_bytes") == 2147483647 * MIB


def test_the_model_section_is_guarded_by_a_column_check():
    section = next(s for s in memory_config.SECTIONS if s.tag == memory_config.MODEL_TAG)
    assert section.optional and section.requires_columns == (("sys.dm_os_sys_info", "sql_memory_model_desc"),)
    assert isinstance(results_for("sql2016-rtm")[memory_config.MODEL_TAG], SectionResult)
    assert results_for("sql2016-rtm")[memory_config.MODEL_TAG].unavailable
    assert not results_for("healthy-oltp")[memory_config.MODEL_TAG].unavailable
