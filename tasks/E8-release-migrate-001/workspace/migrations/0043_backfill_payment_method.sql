-- 0043: every payment records how it was made (legacy rows: 'transfer')
ALTER TABLE payments ADD COLUMN method TEXT;
UPDATE payments SET method = 'transfer' WHERE method IS NULL;
ALTER TABLE payments ALTER COLUMN method SET NOT NULL;
