-- Writer side of the demo workload: each batch updates 2,000 rows spread evenly over the whole table
-- (from a random offset, one row every rows-in-table / 2,000). About 32 rows of 250 bytes share a page
-- and these are thousands of rows apart, so every updated row dirties its own page, most of them read
-- from disk first. The analytic scans evict the dirty pages before an automatic checkpoint comes round,
-- so the lazy writer must write them. Why a separate loop: the OLTP loops dirty one page per iteration
-- behind some twenty lookups, which can stay under the 20 lazy writes/s that MSSQLMemoryPressure needs.
-- workload.sh runs this file in a loop; `GO 10` sends the batch 10 times.
SET NOCOUNT ON;
DECLARE @rows bigint = 2000;
DECLARE @max_id bigint = (SELECT MAX(m.order_id) FROM dbo.orders AS m);
DECLARE @stride bigint = CASE WHEN @max_id > @rows THEN @max_id / @rows ELSE 1 END;
DECLARE @offset bigint = 1 + ABS(CHECKSUM(NEWID())) % @stride;
WITH numbers AS (
    SELECT TOP (@rows) ROW_NUMBER() OVER (ORDER BY (SELECT NULL)) - 1 AS i
    FROM sys.all_columns AS a CROSS JOIN sys.all_columns AS b
)
UPDATE o
SET o.amount = CASE WHEN o.amount < 9000000 THEN o.amount + 0.01 ELSE 0 END
FROM dbo.orders AS o
INNER JOIN numbers AS n ON o.order_id = @offset + n.i * @stride;
GO 10
