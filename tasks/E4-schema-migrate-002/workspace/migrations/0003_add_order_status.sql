-- 0003: order status, set by the warehouse
ALTER TABLE orders ADD COLUMN status TEXT NOT NULL DEFAULT 'placed'
    CHECK (status IN ('placed', 'paid', 'shipped', 'cancelled'));
