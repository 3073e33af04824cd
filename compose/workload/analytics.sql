-- Analytic side of the demo workload: full scans of a table several times larger than the buffer pool
-- (page life expectancy falls), with hash aggregates, a sort and a hash join whose memory grants are
-- capped at 1% (MAX_GRANT_PERCENT), so they spill to tempdb on every run: tempdb writes climb, and with
-- them the endurance pool the exporter config puts on tempdb's volume.
SET NOCOUNT ON;
-- Revenue per customer: 200,000 groups in a hash aggregate that does not fit its grant.
SELECT TOP (20) o.customer_id, COUNT_BIG(*) AS orders, SUM(o.amount) AS revenue
FROM dbo.orders AS o
GROUP BY o.customer_id
ORDER BY revenue DESC
OPTION (HASH GROUP, MAX_GRANT_PERCENT = 1, MAXDOP 2);
GO
-- Top three orders per product: a window over the whole table, sorted in tempdb.
SELECT COUNT_BIG(*) AS top_orders
FROM (
    SELECT o.order_id, ROW_NUMBER() OVER (PARTITION BY o.product_id ORDER BY o.amount DESC, o.order_date) AS rn
    FROM dbo.orders AS o
) AS ranked
WHERE ranked.rn <= 3
OPTION (MAX_GRANT_PERCENT = 1, MAXDOP 2);
GO
-- Orders above their customer's average: the table hash-joined to an aggregate of itself.
SELECT COUNT_BIG(*) AS above_average
FROM dbo.orders AS o
INNER JOIN (
    SELECT a.customer_id, AVG(a.amount) AS avg_amount FROM dbo.orders AS a GROUP BY a.customer_id
) AS c ON c.customer_id = o.customer_id
WHERE o.amount > c.avg_amount
OPTION (HASH JOIN, HASH GROUP, MAX_GRANT_PERCENT = 1, MAXDOP 2);
GO
