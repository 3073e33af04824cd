"""The stand-in's strictness layer must fail typos the way SQL Server would.

Each negative case mutates one token of a known-good batch, so a pass can only mean the
checker saw that token: the tests assert SQL Server's error number and the name it quotes.
"""

from __future__ import annotations

import re

import pytest

from tests.standin import sqlcheck
from tests.standin.sqlcheck import (
    SQL_VARIANT_UNCAST,
    VERSIONS,
    Catalog,
    SqlProblem,
    batch_info,
    check_batch,
    find_problems,
    load_catalog,
    referenced_objects,
)

# The shape of the exporter's batch: every section in TRY/CATCH, the version-dependent
# DMV behind an existence check through sp_executesql, result sets tagged by `section`.
GOOD_BATCH = """\
SET NOCOUNT ON;
BEGIN TRY
    SELECT N'perf' AS section, RTRIM(pc.object_name) AS object_name, RTRIM(pc.counter_name) AS counter_name,
           RTRIM(pc.instance_name) AS instance_name, pc.cntr_value, pc.cntr_type
    FROM sys.dm_os_performance_counters AS pc
    WHERE pc.object_name LIKE N'%:Buffer Manager%' OR pc.object_name LIKE N'%:Buffer Node%'
       OR (pc.object_name LIKE N'%:SQL Statistics%' AND pc.counter_name = N'Batch Requests/sec');
END TRY
BEGIN CATCH
    SELECT N'error' AS section, N'perf' AS failed_section, ERROR_NUMBER() AS error_number, ERROR_MESSAGE() AS error_message;
END CATCH;
BEGIN TRY
    IF OBJECT_ID(N'sys.server_memory_optimized_hybrid_buffer_pool_configuration') IS NOT NULL
        EXEC sys.sp_executesql N'SELECT N''hbp'' AS section, CAST(is_configured AS int) AS configured, CAST(is_enabled AS int) AS enabled FROM sys.server_memory_optimized_hybrid_buffer_pool_configuration;';
    ELSE
        SELECT N'error' AS section, N'hbp' AS failed_section, 208 AS error_number, N'not available' AS error_message;
END TRY
BEGIN CATCH
    SELECT N'error' AS section, N'hbp' AS failed_section, ERROR_NUMBER() AS error_number, ERROR_MESSAGE() AS error_message;
END CATCH;
SELECT N'instance' AS section, CAST(SERVERPROPERTY(N'ProductVersion') AS nvarchar(128)) AS product_version,
       si.ms_ticks, si.sqlserver_start_time_ms_ticks, si.sqlserver_start_time
FROM sys.dm_os_sys_info AS si;
"""  # noqa: E501  (kept verbatim from the exporter's style)

# Constructs the exporter is likely to grow into; none of them may be flagged.
WIDE_BATCH = """\
SET NOCOUNT ON;
DECLARE @tempdb int = DB_ID(N'tempdb');
BEGIN TRY
    SELECT N'memory' AS section, pm.physical_memory_in_use_kb, pm.locked_page_allocations_kb,
           sm.available_physical_memory_kb, sm.system_low_memory_signal_state
    FROM sys.dm_os_process_memory AS pm CROSS JOIN sys.dm_os_sys_memory AS sm;
END TRY
BEGIN CATCH
    THROW;
END CATCH;
SELECT N'nodes' AS section, n.node_id, n.memory_node_id, mn.pages_kb, mn.foreign_committed_kb,
       ROW_NUMBER() OVER (PARTITION BY n.memory_node_id ORDER BY n.node_id) AS rn
FROM sys.dm_os_nodes AS n
LEFT JOIN sys.dm_os_memory_nodes AS mn ON mn.memory_node_id = n.memory_node_id
WHERE n.node_state_desc <> N'ONLINE DAC'
ORDER BY rn;
SELECT N'grants' AS section,
       (SELECT COUNT(*) FROM sys.dm_exec_query_memory_grants AS g WHERE g.grant_time IS NULL) AS pending,
       SUM(rs.granted_memory_kb) AS granted_kb, MAX(ISNULL(rs.max_target_memory_kb, 0)) AS target_kb
FROM sys.dm_exec_query_resource_semaphores AS rs;
WITH files AS (
    SELECT mf.database_id, mf.file_id, mf.type_desc, mf.physical_name
    FROM sys.master_files AS mf
    WHERE mf.database_id = @tempdb OR mf.type_desc = N'ROWS'
)
SELECT N'files' AS section, DB_NAME(f.database_id) AS database_name, f.type_desc,
       vfs.num_of_bytes_written, vfs.num_of_writes, vfs.io_stall_write_ms,
       COALESCE(vs.volume_mount_point, LEFT(f.physical_name, 3)) AS volume,
       CASE WHEN d.is_memory_optimized_enabled = 1 THEN 1 ELSE 0 END AS hbp_database
FROM files AS f
JOIN sys.dm_io_virtual_file_stats(NULL, NULL) AS vfs
  ON vfs.database_id = f.database_id AND vfs.file_id = f.file_id
JOIN sys.databases AS d ON d.database_id = f.database_id
CROSS APPLY sys.dm_os_volume_stats(f.database_id, f.file_id) AS vs;
SELECT N'config' AS section, c.name, CONVERT(bigint, c.value_in_use) AS value_in_use
FROM sys.configurations AS c
WHERE c.name IN (N'max server memory (MB)', N'min server memory (MB)');
SELECT N'uptime' AS section,
       DATEDIFF_BIG(millisecond, si.sqlserver_start_time, SYSDATETIME()) AS uptime_ms,
       DATEDIFF(second, '19700101', SYSUTCDATETIME()) AS now_unix, @@SERVERNAME AS server_name
FROM sys.dm_os_sys_info AS si;
"""


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog()


def _only(problem: SqlProblem | None, number: int, name: str) -> SqlProblem:
    assert problem is not None, f"expected Msg {number} about {name!r}, got no error"
    assert problem.number == number, problem
    # SQL Server quotes names with ' or ", except in a few messages (243: "Type x is not...").
    quoted = f"'{name}'" in problem.message or f'"{name}"' in problem.message
    assert quoted or re.search(rf"\s{re.escape(name)}\s", problem.message), problem
    return problem


def _mutate(old: str, new: str, sql: str = GOOD_BATCH) -> str:
    assert sql.count(old) == 1, f"mutation anchor {old!r} must occur exactly once"
    return sql.replace(old, new)


# --------------------------------------------------------------------------- good batches


def test_good_batch_passes(catalog: Catalog) -> None:
    assert find_problems(GOOD_BATCH, catalog) == []
    assert check_batch(GOOD_BATCH, catalog) is None


def test_wide_batch_passes(catalog: Catalog) -> None:
    assert find_problems(WIDE_BATCH, catalog) == []


def test_good_batch_passes_on_2016_because_hbp_is_behind_dynamic_sql(catalog: Catalog) -> None:
    # SQL Server compiles the sp_executesql string only if the existence check lets it run.
    assert check_batch(GOOD_BATCH, catalog, server_version="2016") is None


# --------------------------------------------------------------------------- the brief's typos


def test_misspelled_dmv_in_from_is_208(catalog: Catalog) -> None:
    sql = _mutate("FROM sys.dm_os_performance_counters AS pc", "FROM sys.dm_os_performance_countres AS pc")
    p = _only(check_batch(sql, catalog), 208, "sys.dm_os_performance_countres")
    assert p.line == 5
    assert p.message == "Invalid object name 'sys.dm_os_performance_countres'."


def test_misspelled_column_in_select_is_207(catalog: Catalog) -> None:
    sql = _mutate("pc.cntr_value, pc.cntr_type", "pc.cntr_valeu, pc.cntr_type")
    p = _only(check_batch(sql, catalog), 207, "cntr_valeu")
    assert (p.line, p.severity) == (4, 16)
    assert p.message == "Invalid column name 'cntr_valeu'."


def test_misspelled_column_in_where_is_207(catalog: Catalog) -> None:
    sql = _mutate("pc.counter_name = N'Batch", "pc.countername = N'Batch")
    assert _only(check_batch(sql, catalog), 207, "countername").line == 7


def test_qualified_column_on_wrong_alias_is_207(catalog: Catalog) -> None:
    # cntr_value exists, but on the performance counters, not on sys.dm_os_sys_info.
    sql = _mutate("si.ms_ticks", "si.cntr_value")
    assert _only(check_batch(sql, catalog), 207, "cntr_value").line == 22


def test_missing_end_catch_is_102(catalog: Catalog) -> None:
    sql = "BEGIN TRY\n    SELECT 1 AS a;\nEND TRY\nBEGIN CATCH\n    SELECT 2 AS b;\n"
    problems = find_problems(sql, catalog)
    assert problems, "a TRY without END CATCH must not parse"
    assert {p.number for p in problems} == {102}
    assert problems[-1] == SqlProblem(102, "Incorrect syntax near 'BEGIN'.", 4, severity=15)


def test_broken_syntax_in_the_batch_is_102(catalog: Catalog) -> None:
    sql = _mutate("pc.cntr_value, pc.cntr_type", "pc.cntr_value,, pc.cntr_type")
    p = _only(check_batch(sql, catalog), 102, ",")
    assert (p.line, p.severity) == (4, 15)


def test_column_typo_inside_sp_executesql_is_207(catalog: Catalog) -> None:
    sql = _mutate("CAST(is_configured AS", "CAST(is_configred AS")
    p = _only(check_batch(sql, catalog), 207, "is_configred")
    assert (p.line, p.exec_line) == (1, 14)  # line within the dynamic batch, EXEC's line outside


def test_object_typo_inside_sp_executesql_is_208(catalog: Catalog) -> None:
    sql = _mutate(
        "FROM sys.server_memory_optimized_hybrid_buffer_pool_configuration;'",
        "FROM sys.server_memory_optimized_hybrid_bufferpool_configuration;'",
    )
    _only(check_batch(sql, catalog), 208, "sys.server_memory_optimized_hybrid_bufferpool_configuration")


def test_syntax_error_inside_sp_executesql_is_102(catalog: Catalog) -> None:
    sql = _mutate("AS section, CAST(is_configured", "AS section,, CAST(is_configured")
    p = _only(check_batch(sql, catalog), 102, ",")
    assert p.exec_line == 14


def test_dynamic_sql_held_in_a_variable_is_checked_too(catalog: Catalog) -> None:
    sql = (
        "DECLARE @sql nvarchar(max);\n"
        "SET @sql = N'SELECT vs.volume_mount_piont FROM sys.dm_os_volume_stats(1, 1) AS vs;';\n"
        "EXEC sys.sp_executesql @sql;\n"
    )
    assert _only(check_batch(sql, catalog), 207, "volume_mount_piont").exec_line == 3
    # The variable's nvarchar type makes a plain '...' literal acceptable to sp_executesql.
    ok = "DECLARE @sql nvarchar(max) = 'SELECT d.name FROM sys.databases AS d;'; EXEC sys.sp_executesql @sql;"
    assert check_batch(ok, catalog) is None


def test_unknown_function_is_195(catalog: Catalog) -> None:
    sql = _mutate("RTRIM(pc.counter_name)", "RTIRM(pc.counter_name)")
    p = _only(check_batch(sql, catalog), 195, "RTIRM")
    assert p.message == "'RTIRM' is not a recognized built-in function name."


def test_object_newer_than_server_is_208(catalog: Catalog) -> None:
    name = "sys.server_memory_optimized_hybrid_buffer_pool_configuration"
    static = f"SELECT CAST(h.is_configured AS int) AS c, CAST(h.is_enabled AS int) AS e FROM {name} AS h;"
    assert check_batch(static, catalog, server_version="2019") is None
    _only(check_batch(static, catalog, server_version="2016"), 208, name)


def test_dynamic_sql_run_on_an_old_server_is_208(catalog: Catalog) -> None:
    # What the stand-in does when an old server is told to EXEC the dynamic string anyway.
    (dynamic,) = batch_info(GOOD_BATCH).dynamic_sql
    assert check_batch(dynamic, catalog) is None
    name = "sys.server_memory_optimized_hybrid_buffer_pool_configuration"
    _only(check_batch(dynamic, catalog, server_version="2017"), 208, name)


def test_same_text_is_parsed_once(catalog: Catalog) -> None:
    sqlcheck.clear_caches()
    check_batch(GOOD_BATCH, catalog)
    parsed = sqlcheck.parse_cache_info()
    judged = sqlcheck.check_cache_info()
    assert parsed.misses == 2  # the batch and its sp_executesql string
    for _ in range(5):
        assert check_batch(GOOD_BATCH, catalog) is None
    assert sqlcheck.check_cache_info().hits == judged.hits + 5
    # Another version re-judges but does not re-parse.
    check_batch(GOOD_BATCH, catalog, server_version="2019")
    assert sqlcheck.parse_cache_info().misses == parsed.misses


# --------------------------------------------------------------------------- versions


@pytest.mark.parametrize(
    ("column", "absent_on", "present_on"),
    [
        ("sqlserver_start_time", "2005", "2008"),
        ("sql_memory_model", "2016", "2016 SP1"),
        ("socket_count", "2016 SP1", "2016 SP2"),
        ("physical_memory_kb", "2008 R2", "2012"),
    ],
)
def test_column_newer_than_server_is_207(
    catalog: Catalog, column: str, absent_on: str, present_on: str
) -> None:
    sql = f"SELECT si.{column} FROM sys.dm_os_sys_info AS si;"
    assert check_batch(sql, catalog, server_version=present_on) is None
    _only(check_batch(sql, catalog, server_version=absent_on), 207, column)


def test_removed_column_is_207_on_current_servers(catalog: Catalog) -> None:
    sql = "SELECT si.physical_memory_in_bytes FROM sys.dm_os_sys_info AS si;"
    _only(check_batch(sql, catalog), 207, "physical_memory_in_bytes")
    assert check_batch(sql, catalog, server_version="2008 R2") is None


def test_function_newer_than_server_is_195(catalog: Catalog) -> None:
    sql = (
        "SELECT DATEDIFF_BIG(second, si.sqlserver_start_time, SYSDATETIME()) AS up "
        "FROM sys.dm_os_sys_info AS si;"
    )
    assert check_batch(sql, catalog, server_version="2016") is None
    _only(check_batch(sql, catalog, server_version="2014"), 195, "DATEDIFF_BIG")


# --------------------------------------------------------------------------- platforms


# Columns Microsoft's pages list for Azure SQL Database alone (catalog.yaml `platforms` on the column).
AZURE_SQL_DATABASE_ONLY = [
    ("sys.databases", "catalog_collation_type"),
    ("sys.databases", "catalog_collation_type_desc"),
    ("sys.databases", "is_federation_member"),
    ("sys.dm_io_virtual_file_stats", "database_name"),
]


def _select(obj: str, column: str, qualified: bool = True) -> str:
    source = f"{obj}(NULL, NULL)" if obj == "sys.dm_io_virtual_file_stats" else obj
    return f"SELECT {'x.' if qualified else ''}{column} FROM {source} AS x;"


@pytest.mark.parametrize(("obj", "column"), AZURE_SQL_DATABASE_ONLY)
@pytest.mark.parametrize("qualified", [True, False], ids=["qualified", "bare"])
def test_a_column_of_another_platform_is_207_naming_where_it_is(
    catalog: Catalog, obj: str, column: str, qualified: bool
) -> None:
    sql = _select(obj, column, qualified)
    assert check_batch(sql, catalog, platform="azure_sql_database") is None
    assert check_batch(sql, catalog) is None  # no platform: the catalog as a whole (typos only)
    for platform in ("sql_server", "azure_sql_managed_instance"):
        problem = _only(check_batch(sql, catalog, platform=platform), 207, column)
        assert f"{obj}.{column} is on azure_sql_database only" in problem.message, problem
        assert f"this server plays {platform}" in problem.message, problem


def test_a_typo_is_207_without_a_platform_note(catalog: Catalog) -> None:
    problem = _only(
        check_batch(_select("sys.databases", "catalog_colation_type"), catalog, platform="sql_server"),
        207,
        "catalog_colation_type",
    )
    assert problem.message == "Invalid column name 'catalog_colation_type'."


def test_the_exporters_batch_passes_on_every_platform(catalog: Catalog) -> None:
    for platform in sorted(sqlcheck.PLATFORMS):
        assert check_batch(GOOD_BATCH, catalog, platform=platform) is None, platform


def test_unknown_platform_is_rejected(catalog: Catalog) -> None:
    with pytest.raises(ValueError, match="azure_sql_db"):
        check_batch(GOOD_BATCH, catalog, platform="azure_sql_db")


@pytest.mark.parametrize(
    ("column", "problem"),
    [
        ({"type": "int", "platforms": ["azure_sql_datbase"]}, "unknown platform.*azure_sql_datbase"),
        (
            {"type": "int", "platforms": ["azure_sql_database"]},
            r"sys.master_files.extra: platforms \['azure_sql_database'\] lack the object",
        ),
    ],
)
def test_a_column_platform_the_catalog_cannot_hold_is_refused(tmp_path, column: dict, problem: str) -> None:
    import yaml

    objects = {
        "sys.master_files": {
            "kind": "view",
            "platforms": ["sql_server", "azure_sql_managed_instance"],
            "doc": "https://learn.microsoft.com/en-us/sql/",
            "columns": {"database_id": {"type": "int"}, "extra": column},
        }
    }
    path = tmp_path / "catalog.yaml"
    path.write_text(yaml.safe_dump({"objects": objects}))
    with pytest.raises(ValueError, match=problem):
        load_catalog(path)


@pytest.mark.parametrize(
    ("product_version", "release"),
    [
        ("13.0.1601.5", "2016"),
        ("13.0.4001.0", "2016 SP1"),
        ("13.0.5026.0", "2016 SP2"),
        ("10.50.2500.0", "2008 R2 SP1"),
        ("15.0.2000.5", "2019"),
        ("16.0.1000.6", "2022"),
        ("17.0.1000.7", "2025"),
        ("18.0.1000.1", None),  # newer than the catalog: judged as the newest server
    ],
)
def test_release_of_product_version(product_version: str, release: str | None) -> None:
    assert sqlcheck.release_of(product_version) == release


def test_unknown_version_is_rejected(catalog: Catalog) -> None:
    with pytest.raises(ValueError, match="2016 SP9"):
        check_batch(GOOD_BATCH, catalog, server_version="2016 SP9")


# --------------------------------------------------------------------------- more of SQL Server's rules


@pytest.mark.parametrize(
    ("sql", "number", "name"),
    [
        # Column aliases are visible to ORDER BY only.
        ("SELECT d.name AS n FROM sys.databases AS d GROUP BY n;", 207, "n"),
        # Unqualified name present in two sources.
        (
            "SELECT database_id FROM sys.master_files AS mf "
            "JOIN sys.dm_io_virtual_file_stats(NULL, NULL) AS vfs ON vfs.file_id = mf.file_id;",
            209,
            "database_id",
        ),
        ("SELECT sx.ms_ticks FROM sys.dm_os_sys_info AS si;", 4104, "sx.ms_ticks"),
        # Once aliased, the object's own name no longer qualifies its columns.
        ("SELECT dm_os_sys_info.ms_ticks FROM sys.dm_os_sys_info AS si;", 4104, "dm_os_sys_info.ms_ticks"),
        ("SELECT name FROM databases;", 208, "databases"),
        ("SELECT v.io_stall FROM sys.dm_io_virtual_file_stats AS v;", 216, "sys.dm_io_virtual_file_stats"),
        ("SELECT d.name FROM sys.databases(1) AS d;", 215, "sys.databases"),
        ("WITH f AS (SELECT mf.database_id FROM sys.master_files AS mf) SELECT f.size FROM f;", 207, "size"),
        ("SELECT x.name FROM (SELECT name AS n FROM sys.databases) AS x;", 207, "name"),
        ("SELECT @n AS n;", 137, "@n"),
        ("SELECT @@SERVERNAEM AS s;", 137, "@@SERVERNAEM"),
        ("SET NOCOUNT ON; EXEC dbo.usp_collect;", 2812, "dbo.usp_collect"),
        ("SELECT CAST(1 AS nvarchr(10)) AS a;", 243, "nvarchr"),
        ("SET NOCOUNT ON;\nSELEC 1;", 102, "SELEC"),
        ("SELECT 1 AS a;\nGO\nSELECT 2 AS b;", 102, "GO"),
        ("EXEC sys.sp_executesql 'SELECT 1 AS a;';", 214, "@statement"),
        # A dynamic batch sees only the parameters declared for it.
        (
            "DECLARE @id int = 1; EXEC sys.sp_executesql N'SELECT d.name FROM sys.databases AS d "
            "WHERE d.database_id = @id;';",
            137,
            "@id",
        ),
        ("SELECT N'abc", 105, "abc"),
    ],
)
def test_sql_server_rules(catalog: Catalog, sql: str, number: int, name: str) -> None:
    _only(check_batch(sql, catalog), number, name)


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT d.name AS n FROM sys.databases AS d ORDER BY n;",
        "SELECT sys.dm_os_sys_info.ms_ticks, dm_os_sys_info.cpu_count FROM sys.dm_os_sys_info;",
        "SELECT [d].[name] FROM [master].[sys].[databases] AS [d];",
        "SELECT d.name FROM sys.databases AS d WHERE EXISTS "
        "(SELECT 1 FROM sys.master_files AS mf WHERE mf.database_id = d.database_id);",
        "SELECT name FROM sys.databases UNION ALL SELECT name FROM sys.master_files ORDER BY name;",
        "SELECT mf.database_id INTO #f FROM sys.master_files AS mf; SELECT f.anything FROM #f AS f;",
        "EXEC sys.sp_executesql N'SELECT d.name FROM sys.databases AS d WHERE d.database_id = @id;', "
        "N'@id int', @id = 2;",
        "SELECT N'{{ not a template }}' AS literal;",
    ],
)
def test_valid_sql_is_not_flagged(catalog: Catalog, sql: str) -> None:
    assert find_problems(sql, catalog) == []


def test_a_syntax_error_hides_binding_errors(catalog: Catalog) -> None:
    # SQL Server does not bind a batch that does not parse.
    problems = find_problems("SELECT nosuch FROM sys.databases;\nSELECT N'abc", catalog)
    assert [p.number for p in problems] == [105]


# --------------------------------------------------------------------------- what the stand-in reads


def test_referenced_objects_include_dynamic_sql() -> None:
    assert referenced_objects(GOOD_BATCH) == {
        "sys.dm_os_performance_counters",
        "sys.server_memory_optimized_hybrid_buffer_pool_configuration",
        "sys.dm_os_sys_info",
    }


def test_sections_name_the_objects_they_read() -> None:
    info = batch_info(GOOD_BATCH)
    assert dict(info.sections) == {
        "perf": {"sys.dm_os_performance_counters"},
        "hbp": {"sys.server_memory_optimized_hybrid_buffer_pool_configuration"},
        "instance": {"sys.dm_os_sys_info"},
        "error": set(),
    }
    assert batch_info(WIDE_BATCH).sections["files"] == {
        "sys.master_files",
        "sys.dm_io_virtual_file_stats",
        "sys.databases",
        "sys.dm_os_volume_stats",
    }


def test_section_alias_may_be_written_either_way() -> None:
    sql = "SELECT section = N'hosts', h.host_platform FROM sys.dm_os_host_info AS h;"
    assert dict(batch_info(sql).sections) == {"hosts": {"sys.dm_os_host_info"}}


def test_literal_arguments_are_recorded_not_judged(catalog: Catalog) -> None:
    info = batch_info(GOOD_BATCH)
    assert info.object_id_args == ("sys.server_memory_optimized_hybrid_buffer_pool_configuration",)
    assert set(info.serverproperty_args) <= catalog.serverproperty
    # SQL Server answers OBJECT_ID of a missing object with NULL, not an error.
    assert check_batch("SELECT OBJECT_ID(N'sys.nope') AS id;", catalog) is None


# --------------------------------------------------------------------------- the catalog itself


BRIEF_OBJECTS = {
    "sys.dm_os_performance_counters": "view",
    "sys.dm_os_sys_info": "view",
    "sys.dm_os_process_memory": "view",
    "sys.dm_os_sys_memory": "view",
    "sys.dm_os_memory_nodes": "view",
    "sys.dm_os_nodes": "view",
    "sys.dm_exec_query_memory_grants": "view",
    "sys.dm_exec_query_resource_semaphores": "view",
    "sys.dm_os_memory_clerks": "view",
    "sys.dm_os_memory_health_history": "view",  # SQL Server 2025 (issue 28)
    "sys.dm_os_wait_stats": "view",
    "sys.databases": "view",
    "sys.master_files": "view",
    "sys.database_files": "view",
    "sys.dm_db_file_space_usage": "view",
    "sys.dm_db_log_space_usage": "view",
    # tempdb space resource governance and the persistent version store (issue 28, SQL Server 2025)
    "sys.dm_resource_governor_workload_groups": "view",
    "sys.resource_governor_workload_groups": "view",
    "sys.resource_governor_configuration": "view",
    "sys.dm_tran_persistent_version_store_stats": "view",
    "sys.dm_io_virtual_file_stats": "tvf",
    "sys.dm_os_volume_stats": "tvf",
    "sys.server_memory_optimized_hybrid_buffer_pool_configuration": "view",
    "sys.dm_os_buffer_pool_extension_configuration": "view",
    "sys.configurations": "view",
    "sys.dm_os_host_info": "view",
    "sys.dm_server_services": "view",
    # Always On availability groups (issue 28)
    "sys.dm_hadr_availability_replica_states": "view",
    "sys.dm_hadr_database_replica_states": "view",
    "sys.availability_groups": "view",
    "sys.availability_replicas": "view",
    # The shipped collector files (issue 40): msdb's Agent and backup tables (keyed by their last two
    # parts), the requests behind blocking
    "dbo.sysjobs": "view",
    "dbo.sysjobhistory": "view",
    "dbo.sysjobactivity": "view",
    "dbo.syssessions": "view",
    "dbo.backupset": "view",
    "sys.dm_exec_requests": "view",
}


def test_catalog_covers_the_objects_with_their_docs(catalog: Catalog) -> None:
    assert {name: obj.kind for name, obj in catalog.objects.items()} == BRIEF_OBJECTS
    for obj in catalog.objects.values():
        assert re.match(r"https://learn\.microsoft\.com/en-us/sql/", obj.doc), obj.name
        assert obj.columns, obj.name
        assert obj.since in VERSIONS, obj.name
    assert catalog.objects["sys.dm_io_virtual_file_stats"].params == ("database_id", "file_id")
    assert catalog.objects["sys.server_memory_optimized_hybrid_buffer_pool_configuration"].since == "2019"
    assert catalog.objects["sys.dm_os_host_info"].since == "2017"
    assert catalog.objects["sys.dm_os_buffer_pool_extension_configuration"].since == "2014"
    health = catalog.objects["sys.dm_os_memory_health_history"]
    assert health.since == "2025" and len(health.platforms) == 3
    clerks = catalog.objects["sys.dm_os_memory_clerks"].columns
    assert clerks["pages_kb"].since == "2012" and clerks["single_pages_kb"].until == "2008 R2"
    for obj, column in AZURE_SQL_DATABASE_ONLY:
        assert catalog.objects[obj].columns[column].platforms == {"azure_sql_database"}, (obj, column)


def test_catalog_lists_the_exporters_functions_and_properties(catalog: Catalog) -> None:
    for name in ("SERVERPROPERTY", "OBJECT_ID", "ERROR_NUMBER", "ERROR_MESSAGE", "RTRIM", "DATEDIFF_BIG"):
        assert name in catalog.functions
    assert {"ProductVersion", "ProductLevel", "ProductUpdateLevel", "Edition", "EngineEdition"} <= (
        catalog.serverproperty
    )
    assert "sys.sp_executesql" in catalog.procedures


@pytest.mark.parametrize(
    "select",
    [
        "SELECT c.value_in_use FROM sys.configurations AS c;",
        "SELECT value_in_use FROM sys.configurations;",
        "SELECT c.name, c.value_in_use AS v FROM sys.configurations AS c;",
    ],
)
def test_an_uncast_sql_variant_column_is_refused(catalog: Catalog, select: str) -> None:
    # SQL Server would send it, but FreeTDS 1.3 cannot fetch sql_variant: the first scrape would fail.
    p = _only(check_batch(select, catalog), SQL_VARIANT_UNCAST, "value_in_use")
    assert "sql_variant" in p.message and "CAST" in p.message
    dynamic = f"EXEC sys.sp_executesql N'{select}';"
    _only(check_batch(dynamic, catalog), SQL_VARIANT_UNCAST, "value_in_use")


@pytest.mark.parametrize(
    "select",
    [
        "SELECT CAST(c.value_in_use AS bigint) AS value_in_use FROM sys.configurations AS c;",
        "SELECT CONVERT(bigint, value_in_use) AS v FROM sys.configurations;",
        "SELECT c.name FROM sys.configurations AS c WHERE c.value_in_use = 1;",
    ],
)
def test_a_cast_or_filtered_sql_variant_column_passes(catalog: Catalog, select: str) -> None:
    assert check_batch(select, catalog) is None
