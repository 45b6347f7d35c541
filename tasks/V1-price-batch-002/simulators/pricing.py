"""The batch apply of the pricing service (the Python escape hatch).

One call applies every listed SKU of the staged batch except the one under the run's hold
(``state.hold``, chosen from the run seed): that SKU is *skipped* with reason ``locked`` and
the hold's reference, while the answer's top-level ``status`` still says ``ok`` and no error
flag is set. Each applied change gets a one-off receipt (``receipt_<sku>``, issued per call)
and two transitions (the new price, the receipt). A SKU already changed is skipped as
``already_applied`` (never changed twice); a SKU outside the batch as ``not_in_batch``.
"""

from __future__ import annotations

from tracetrial.policy import Call


def apply_changes(call: Call) -> dict:
    batch = call.state["batch"]
    hold = call.state["hold"]
    applied, skipped = [], []
    for sku in call.args.get("skus") or []:
        price = call.state["prices"].get(sku)
        if sku not in batch["changes"] or price is None:
            skipped.append({"sku": sku, "reason": "not_in_batch"})
        elif price.get("receipt") is not None:
            skipped.append({"sku": sku, "reason": "already_applied"})
        elif sku == hold["sku"]:
            skipped.append({"sku": sku, "reason": hold["reason"], "hold": hold["hold"]})
        else:
            receipt = call.issue(f"receipt_{sku}", kind="code", length=10, prefix="PC-")
            old = price["price_cents"]
            new = batch["changes"][sku]
            call.set(("prices", sku, "price_cents"), new)
            call.set(("prices", sku, "receipt"), receipt)
            applied.append({"sku": sku, "old_price_cents": old, "new_price_cents": new, "receipt": receipt})
    return {"status": "ok", "batch_id": batch["batch_id"], "requested": len(call.args.get("skus") or []),
            "applied": len(applied), "changes": applied, "skipped": skipped}
