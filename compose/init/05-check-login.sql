-- Step 5 of init.sh (as sa): docs/permissions.md "Checking it", impersonating the exporter's login, and
-- the least-privilege promise: the login is in no server role. Fails init (THROW) if anything is off.
SET NOCOUNT ON;
EXECUTE AS LOGIN = N'$(MONITOR_LOGIN)';
DECLARE @perf_rows int = (SELECT COUNT(*) FROM sys.dm_os_performance_counters);
-- The hidden resource database (32767) has I/O counters but is never in sys.master_files; the exporter
-- leaves it out too.
DECLARE @io_files int = (
    SELECT COUNT(*) FROM sys.dm_io_virtual_file_stats(NULL, NULL) AS vfs WHERE vfs.database_id <> 32767
);
DECLARE @named_files int = (SELECT COUNT(*) FROM sys.master_files);
DECLARE @start_ticks bigint = (SELECT si.sqlserver_start_time_ms_ticks FROM sys.dm_os_sys_info AS si);
-- Both views answer one row on every 2019+ server: a denial raises an error here (sqlcmd -b stops init),
-- and no row at all is treated as a failure too.
DECLARE @hbp_rows int = (
    SELECT COUNT(*) FROM sys.server_memory_optimized_hybrid_buffer_pool_configuration
);
DECLARE @bpe_rows int = (SELECT COUNT(*) FROM sys.dm_os_buffer_pool_extension_configuration);
REVERT;
DECLARE @roles int = (
    SELECT COUNT(*)
    FROM sys.server_role_members AS rm
    INNER JOIN sys.server_principals AS p ON p.principal_id = rm.member_principal_id
    WHERE p.name = N'$(MONITOR_LOGIN)'
);
SELECT CONCAT(
    N'perf_rows=', @perf_rows, N' io_files=', @io_files, N' named_files=', @named_files,
    N' start_ticks=', @start_ticks, N' hbp_rows=', @hbp_rows, N' bpe_rows=', @bpe_rows,
    N' server_roles=', @roles
);
IF @perf_rows = 0 OR @named_files < @io_files OR @start_ticks IS NULL OR @hbp_rows = 0 OR @bpe_rows = 0
    THROW 50000, N'The exporter login cannot read everything the exporter needs: see docs/permissions.md.', 1;
IF @roles > 0
    THROW 50001, N'The exporter login is a member of a server role; it needs none.', 1;
GO
