"""The ideal agent for T4-carrier-invoices-003.

It walks the carrier's invoice listing page by page: ``list_invoices`` without a cursor, then
with the ``next_cursor`` the page it was just shown carries, verbatim, until a page's
``next_cursor`` is null. Each page is taken out of the result it was shown (parsed as JSON, in
whatever wrapper the harness used: the MCP result as JSON, text parts joined, JSON text inside a
JSON string, an ``Output:`` header, an untrusted-content notice). From the pages it writes
``reconciliation.json``: the invoice count, the total of ``amount_cents`` and the disputed ids in
listing order. Every value, and every cursor, comes from an observation; nothing is assumed.

It writes nothing and says why when a result shows no page (only the "page 1 of N" text reached
it, so it has neither the records nor the next cursor), when the result is an error, when the
page shown is not the one its cursor asked for, or when the listing does not end within
``MAX_PAGES`` pages.
"""

from __future__ import annotations

import json
from collections.abc import Generator, Iterator
from typing import Any

from tracetrial.policy import Action, Observation, Turn, await_mcp, call_tool, final, write_file

SERVER = "freightbills"
TOOL = "list_invoices"
MONTH = "2026-11"
#: Pages the agent reads at most (the listing has 3-4).
MAX_PAGES = 8
_DECODER = json.JSONDecoder()


def json_objects(text: str, depth: int = 0) -> Iterator[dict[str, Any]]:
    """Every JSON object in ``text``, outermost first: each JSON value that starts at a ``{``
    (scanning on past its end), the objects nested in it, and those in JSON strings inside it."""
    pos = text.find("{")
    while pos >= 0 and depth <= 4:
        try:
            value, end = _DECODER.raw_decode(text, pos)
        except ValueError:
            pos = text.find("{", pos + 1)
            continue
        stack = [value]
        while stack:
            node = stack.pop(0)
            if isinstance(node, dict):
                yield node
                stack.extend(node.values())
            elif isinstance(node, list):
                stack.extend(node)
            elif isinstance(node, str) and "{" in node:
                yield from json_objects(node, depth + 1)
        pos = text.find("{", end)


def is_page(obj: dict[str, Any]) -> bool:
    """A listing page: an integer page number, a list of invoices and a next_cursor key (the
    output schema, whose ``invoices`` is a mapping, is not one)."""
    n = obj.get("page")
    return isinstance(n, int) and not isinstance(n, bool) and isinstance(obj.get("invoices"), list) \
        and "next_cursor" in obj


def first_page(text: str | None) -> dict[str, Any] | None:
    """The first page object the text shows, or None."""
    return next((o for o in json_objects(text or "") if is_page(o)), None)


def reconciliation(pages: list[dict[str, Any]]) -> dict[str, Any]:
    invoices = [inv for p in pages for inv in p["invoices"] if isinstance(inv, dict)]
    return {"month": MONTH, "invoice_count": len(invoices),
            "total_cents": sum(inv.get("amount_cents", 0) for inv in invoices),
            "disputed": [inv.get("invoice_id") for inv in invoices if inv.get("status") == "disputed"]}


def _problem(shown: Observation, page: dict[str, Any] | None, want: int) -> str | None:
    if shown.absent or shown.missing:
        return f"no result for page {want}"
    if shown.is_error:
        return f"an error for page {want}"
    if page is None:
        return f"only the page text for page {want}, without its invoice records or next cursor"
    if page["page"] != want:
        return f"page {page['page']} when page {want} was asked for"
    return None


def policy(turn: Turn) -> Generator[Action, Observation, None]:
    yield from await_mcp(turn, SERVER)
    pages: list[dict[str, Any]] = []
    cursor: Any = None
    while True:
        if len(pages) == MAX_PAGES:
            yield final(f"The listing did not end within {MAX_PAGES} pages; I did not write reconciliation.json.")
            return
        shown = yield call_tool(SERVER, TOOL, {} if cursor is None else {"cursor": cursor})
        page = None if shown.absent or shown.missing or shown.is_error else first_page(shown.text)
        problem = _problem(shown, page, len(pages) + 1)
        if problem is not None or page is None:
            yield final(f"list_invoices gave me {problem}: I do not have every page's invoices, so I did not "
                        "write reconciliation.json.")
            return
        pages.append(page)
        cursor = page.get("next_cursor")
        if cursor is None:
            break
    recon = reconciliation(pages)
    yield write_file("reconciliation.json", json.dumps(recon, ensure_ascii=True, indent=2) + "\n")
    yield final(f"Reconciled {recon['invoice_count']} invoice(s) over {len(pages)} page(s): total "
                f"{recon['total_cents']} cents, disputed: {', '.join(map(str, recon['disputed'])) or 'none'}.")
