-- Step 4 of init.sh (as sa): the demo database, generated rows in one table several times larger than
-- the buffer pool (DEMO_ROWS rows of about 250 bytes: 12 million rows are about 3 GB). Loads in batches
-- and resumes where it stopped, so an interrupted first run just continues.
SET NOCOUNT ON;
IF DB_ID(N'$(DEMO_DATABASE)') IS NULL
    CREATE DATABASE [$(DEMO_DATABASE)]
        ON PRIMARY (NAME = N'$(DEMO_DATABASE)', FILENAME = N'/var/opt/mssql/data/$(DEMO_DATABASE).mdf',
                    SIZE = 512MB, FILEGROWTH = 512MB)
        LOG ON (NAME = N'$(DEMO_DATABASE)_log', FILENAME = N'/var/opt/mssql/data/$(DEMO_DATABASE)_log.ldf',
                SIZE = 256MB, FILEGROWTH = 256MB);
GO
ALTER DATABASE [$(DEMO_DATABASE)] SET RECOVERY SIMPLE;
-- Automatic checkpoints instead of indirect ones (the default since 2016): fewer dirty pages are flushed
-- in the background, so more of them are written by the lazy writer when the small buffer pool evicts.
ALTER DATABASE [$(DEMO_DATABASE)] SET TARGET_RECOVERY_TIME = 0 SECONDS;
GO
USE [$(DEMO_DATABASE)];
GO
IF OBJECT_ID(N'dbo.orders', N'U') IS NULL
    CREATE TABLE dbo.orders (
        order_id bigint NOT NULL CONSTRAINT pk_orders PRIMARY KEY CLUSTERED,
        customer_id int NOT NULL,
        product_id int NOT NULL,
        order_date datetime2(0) NOT NULL,
        amount decimal(9, 2) NOT NULL,
        status tinyint NOT NULL,
        note char(200) NOT NULL
    );
GO
DECLARE @target bigint = $(DEMO_ROWS);
DECLARE @batch bigint = 500000;
DECLARE @done bigint = ISNULL((SELECT MAX(o.order_id) FROM dbo.orders AS o), 0);
DECLARE @rows bigint;
WHILE @done < @target
BEGIN
    SET @rows = CASE WHEN @target - @done < @batch THEN @target - @done ELSE @batch END;
    WITH numbers AS (
        SELECT TOP (@rows) ROW_NUMBER() OVER (ORDER BY (SELECT NULL)) AS i
        FROM sys.all_columns AS a CROSS JOIN sys.all_columns AS b
    )
    INSERT INTO dbo.orders WITH (TABLOCK) (order_id, customer_id, product_id, order_date, amount, status, note)
    SELECT
        @done + n.i,
        1 + (@done + n.i) * 7919 % 200000,
        1 + (@done + n.i) * 104729 % 5000,
        DATEADD(MINUTE, -CAST((@done + n.i) % 1051200 AS int), CAST('2026-01-01T00:00:00' AS datetime2(0))),
        CAST((@done + n.i) * 2654435761 % 100000 AS decimal(9, 2)) / 100,
        CAST((@done + n.i) % 5 AS tinyint),
        CONCAT('order ', @done + n.i)
    FROM numbers AS n;
    SET @done = @done + @@ROWCOUNT;
    CHECKPOINT;
    RAISERROR (N'%I64d of %I64d rows', 0, 1, @done, @target) WITH NOWAIT;
END;
GO
IF NOT EXISTS (
    SELECT 1 FROM sys.indexes WHERE object_id = OBJECT_ID(N'dbo.orders') AND name = N'ix_orders_customer'
)
    CREATE INDEX ix_orders_customer ON dbo.orders (customer_id) INCLUDE (order_date);
GO
