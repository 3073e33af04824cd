-- Step 1 of init.sh (as sa): cap the buffer pool. The container's MSSQL_MEMORY_LIMIT_MB caps the whole
-- process; max server memory caps the buffer pool inside it, well below the demo database, so pages are
-- evicted all the time: page life expectancy falls, the lazy writer works, spills go to tempdb.
SET NOCOUNT ON;
EXEC sys.sp_configure N'show advanced options', 1;
RECONFIGURE;
EXEC sys.sp_configure N'max server memory (MB)', $(MAX_SERVER_MEMORY_MB);
RECONFIGURE;
GO
