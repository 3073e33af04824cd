-- Step 3 of init.sh (as sa): the exporter's login, as docs/permissions.md creates it for SQL Server 2022
-- ("SQL Server 2022 and later"): no database user, no role, two server permissions. On later runs the
-- password follows compose/.env, and is left alone when it has not changed. tests/integration/test_compose.py
-- checks the login's options and grants against the doc.
USE master;
GO
IF SUSER_ID(N'$(MONITOR_LOGIN)') IS NULL
    CREATE LOGIN [$(MONITOR_LOGIN)]
        WITH PASSWORD = N'$(MONITOR_PASSWORD_SQL)',
             DEFAULT_DATABASE = [master],
             CHECK_POLICY = ON,
             CHECK_EXPIRATION = OFF;
ELSE IF PWDCOMPARE(
    N'$(MONITOR_PASSWORD_SQL)',
    (SELECT sl.password_hash FROM sys.sql_logins AS sl WHERE sl.name = N'$(MONITOR_LOGIN)')
) = 0
    ALTER LOGIN [$(MONITOR_LOGIN)] WITH PASSWORD = N'$(MONITOR_PASSWORD_SQL)';
GO
GRANT VIEW SERVER PERFORMANCE STATE TO [$(MONITOR_LOGIN)];
GRANT VIEW ANY DEFINITION TO [$(MONITOR_LOGIN)];
GO
