-- 0041: customers get a sales region
ALTER TABLE customers ADD COLUMN region TEXT;
