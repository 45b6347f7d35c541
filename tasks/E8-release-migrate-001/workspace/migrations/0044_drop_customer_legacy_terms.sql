-- 0044: payment terms moved to contracts in 0037; the legacy column goes
ALTER TABLE customers DROP COLUMN legacy_terms;
