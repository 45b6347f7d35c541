-- 0041: look payments up by invoice
CREATE INDEX payments_invoice_id_idx ON payments (invoice_id);
