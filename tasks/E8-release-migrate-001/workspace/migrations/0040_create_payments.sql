-- 0040: payments ledger
CREATE TABLE payments (
    id          BIGSERIAL PRIMARY KEY,
    invoice_id  BIGINT NOT NULL REFERENCES invoices (id),
    amount_cents BIGINT NOT NULL,
    received_at TIMESTAMPTZ NOT NULL
);
