"""list_invoices of the carrier billing portal (the Python escape hatch).

The month's listing is a pure function of the run value ``listing_seed`` (rule 14): 3-4 pages of
4-7 invoices, each with a unique id, an issue date, a shipment reference, an amount in euro cents
and a status (``open``, ``paid`` or ``disputed``, a disputed one with its reason), and an opaque
cursor for every page after the first. It is built on the first call and stored in the business
state (one ``transition`` ledger record whose ``new`` is the listing); every call answers from
the stored listing, and each page served is appended to ``served`` (a ``transition`` record per
request, ``new`` the page exactly as answered, ``request_seq`` the request it answered).

A call without a cursor (or with ``null``) gets page 1; a call with the cursor of page k gets
page k; any other cursor is a business error (``INVALID_CURSOR``). The answer's structuredContent
is the page: its invoices and ``next_cursor`` (the cursor of the following page, ``null`` on the
last). Its text content says only which page it is, so the records and the way to the next page
exist only in the structured result.

At least one invoice is disputed on page 1 and at least one on a later page, so neither the
totals nor the disputed ids can be had from the first page alone.
"""

from __future__ import annotations

import base64
import random
from typing import Any

from tracetrial.policy import Call, Reply

CARRIER = "Nordhavn Linjefart A/S"
MONTH = "2026-11"
CURRENCY = "EUR"
STATUSES = ("open", "paid", "disputed")
REASONS = ("weight discrepancy", "duplicate charge", "fuel surcharge not agreed", "delivery not confirmed",
           "demurrage disputed")


def _cursor(rng: random.Random) -> str:
    """An opaque cursor: 18 random bytes in URL-safe base64 (24 characters, may hold - and _)."""
    return "nlf1." + base64.urlsafe_b64encode(rng.getrandbits(144).to_bytes(18, "big")).decode("ascii")


def build_listing(seed: str) -> dict[str, Any]:
    """The month's listing: ``{carrier, month, currency, pages: [{invoices, cursor}]}`` where a
    page's ``cursor`` is the one that fetches it (``None`` for page 1)."""
    rng = random.Random(f"freightbills:{seed}")
    sizes = [rng.randrange(4, 8) for _ in range(rng.randrange(3, 5))]
    total = sum(sizes)
    days = sorted(rng.randrange(1, 31) for _ in range(total))
    ids: set[str] = set()
    invoices: list[dict[str, Any]] = []
    for day in days:
        inv_id = ""
        while not inv_id or inv_id in ids:
            inv_id = f"NLF-2611-{rng.randrange(10000, 100000)}"
        ids.add(inv_id)
        invoices.append({"invoice_id": inv_id, "issued": f"{MONTH}-{day:02d}",
                         "shipment": f"SHP-{rng.randrange(1000000, 10000000)}",
                         "amount_cents": rng.randrange(15000, 2500000),
                         "status": rng.choices(STATUSES, weights=(5, 3, 2))[0]})
    # one disputed invoice on page 1 and one on a later page, at least
    first, later = rng.randrange(sizes[0]), rng.randrange(sizes[0], total)
    for i in (first, later):
        invoices[i]["status"] = "disputed"
    for inv in invoices:
        if inv["status"] == "disputed":
            inv["dispute_reason"] = rng.choice(REASONS)
    pages, start = [], 0
    for n, size in enumerate(sizes):
        pages.append({"cursor": None if n == 0 else _cursor(rng), "invoices": invoices[start:start + size]})
        start += size
    return {"carrier": CARRIER, "month": MONTH, "currency": CURRENCY, "pages": pages}


def page_of(listing: dict[str, Any], n: int) -> dict[str, Any]:
    """Page ``n`` (1-based) as served: the listing's header, the page's invoices and the cursor of
    the next page (``None`` on the last)."""
    pages = listing["pages"]
    return {"carrier": listing["carrier"], "month": listing["month"], "currency": listing["currency"],
            "page": n, "pages": len(pages), "invoices": pages[n - 1]["invoices"],
            "next_cursor": pages[n]["cursor"] if n < len(pages) else None}


def list_invoices(call: Call) -> Reply:
    listing = call.state.get("listing")
    if listing is None:
        listing = build_listing(str(call.values["listing_seed"]))
        call.set(("listing",), listing)
    cursor = call.args.get("cursor")
    pages = listing["pages"]
    n = next((i + 1 for i, p in enumerate(pages) if p["cursor"] == cursor), None)
    if n is None:
        return Reply(error={"code": "INVALID_CURSOR", "message": f"unknown cursor {cursor!r}: pass the "
                            "next_cursor of the previous page exactly as received, or no cursor for page 1"})
    page = page_of(listing, n)
    call.append(("served",), page)  # the ledger's record of exactly what this request was answered
    more = ("; the invoice records and the cursor of the next page are in the structured result"
            if n < len(pages) else " (the last page); its invoice records are in the structured result")
    text = f"{CARRIER} invoices for {MONTH}: page {n} of {len(pages)}{more}."
    return Reply(result=page, text=text)
