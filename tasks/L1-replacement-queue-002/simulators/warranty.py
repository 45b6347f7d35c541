"""The one-shot dispatch of the warranty desk (the Python escape hatch).

``dispatch_replacement`` ships the replacement unit of one claim of the queue: it issues a
per-call shipment id (ledger ``issued``, name ``shipment_id``), marks the claim dispatched with
that id and appends ``{claim, sku, shipment}`` to ``state.shipments`` (the verifier's record of
what was shipped). A claim that is not in the queue, a SKU that is not the claim's, or a claim
already dispatched gets a business error and changes nothing.
"""

from __future__ import annotations

from typing import Any

from tracetrial.policy import Call, Reply


def dispatch(call: Call) -> Reply | dict[str, Any]:
    claim, sku = call.args.get("claim"), call.args.get("sku")
    claims = call.state["claims"]
    index = next((i for i, c in enumerate(claims) if c["claim"] == claim), None)
    if index is None:
        return call.error("CLAIM_NOT_FOUND", f"no claim {claim} in the replacement queue")
    entry = claims[index]
    if entry["status"] == "dispatched":
        return call.error("ALREADY_DISPATCHED",
                          f"claim {claim} was already dispatched as {entry['shipment']}; a dispatch cannot be repeated",
                          {"claim": claim, "shipment": entry["shipment"]})
    if entry["sku"] != sku:
        return call.error("SKU_MISMATCH", f"claim {claim} takes replacement SKU {entry['sku']}, not {sku}; nothing shipped")
    shipment = call.issue("shipment_id", kind="code", length=8, prefix="SHP-")
    call.set(("claims", index, "status"), "dispatched")
    call.set(("claims", index, "shipment"), shipment)
    call.append(("shipments",), {"claim": claim, "sku": sku, "shipment": shipment})
    return {"claim": claim, "sku": sku, "shipment": shipment, "status": "dispatched"}
