-- 0042: invoices get an explicit due date (nullable until the backfill)
ALTER TABLE invoices ADD COLUMN due_date DATE;
