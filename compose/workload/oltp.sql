-- OLTP side of the demo workload: point lookups, a customer's latest orders through the nonclustered
-- index (key lookups to random pages), and a small update that dirties a random page. workload.sh runs
-- this file in a loop; `GO 200` sends the batch 200 times, each time as a separate batch request.
SET NOCOUNT ON;
DECLARE @max_id bigint = (SELECT MAX(m.order_id) FROM dbo.orders AS m);
DECLARE @order_id bigint = 1 + ABS(CHECKSUM(NEWID())) % @max_id;
DECLARE @customer_id int = 1 + ABS(CHECKSUM(NEWID())) % 200000;
SELECT o.order_id, o.amount, o.status FROM dbo.orders AS o WHERE o.order_id = @order_id;
SELECT TOP (20) o.order_id, o.order_date, o.amount
FROM dbo.orders AS o
WHERE o.customer_id = @customer_id
ORDER BY o.order_date DESC;
UPDATE dbo.orders SET amount = amount + 0.01, status = (status + 1) % 5 WHERE order_id = @order_id;
GO 200
