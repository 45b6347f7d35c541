-- 0040: speed up the daily order report
CREATE INDEX idx_orders_created ON orders (created_at);
