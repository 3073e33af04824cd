-- Step 2 of init.sh (as sa): point every tempdb file at TEMPDB_DIR, the mount point of the tempdb named
-- volume, and report how many files tempdb still has elsewhere. MODIFY FILE only changes the catalog
-- (sys.master_files); tempdb is re-created there at the next start, so init.sh restarts SQL Server
-- while the count is above 0. Running it again once the files have moved changes nothing.
SET NOCOUNT ON;
DECLARE @dir nvarchar(260) = N'$(TEMPDB_DIR)/';
DECLARE @sql nvarchar(max);
SELECT @sql = STRING_AGG(
    CAST(N'ALTER DATABASE tempdb MODIFY FILE (NAME = ' + QUOTENAME(mf.name) + N', FILENAME = N'''
        + REPLACE(@dir + RIGHT(mf.physical_name, CHARINDEX(N'/', REVERSE(mf.physical_name)) - 1), N'''', N'''''')
        + N''');' AS nvarchar(max)),
    NCHAR(10))
FROM sys.master_files AS mf
WHERE mf.database_id = 2 AND LEFT(mf.physical_name, LEN(@dir)) <> @dir;
IF @sql IS NOT NULL
    EXEC sys.sp_executesql @sql;
SELECT CONCAT(N'pending=', COUNT(*))
FROM tempdb.sys.database_files AS df
WHERE LEFT(df.physical_name, LEN(@dir)) <> @dir;
GO
