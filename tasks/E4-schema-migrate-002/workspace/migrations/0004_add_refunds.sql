-- 0004: refunds against paid orders (new in this release)
CREATE TABLE refunds (
    id            BIGSERIAL PRIMARY KEY,
    order_id      BIGINT NOT NULL REFERENCES orders (id),
    amount_cents  BIGINT NOT NULL CHECK (amount_cents > 0),
    reason        TEXT NOT NULL,
    refunded_at   TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX refunds_order_idx ON refunds (order_id);
