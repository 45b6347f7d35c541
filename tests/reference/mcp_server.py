"""A small real MCP stdio server (official SDK) for the reference harness's tests.

Every call is appended, with the arguments exactly as they arrived, to the
JSONL file named by ``$TT_TEST_MCP_LEDGER`` — the test's independent evidence
of what the server received.

Tools: ``submit(order)`` (structured result with a receipt id), ``fail(code)``
(``isError`` result with structured error content), ``slow(seconds)``, ``summary()`` (a text
summary whose exact values are only in ``structuredContent``); with ``$TT_TEST_MCP_LONG_NAMES``
also two long-named ``reserve_…_lane`` tools and ``orders_create`` / ``orders.create``.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp_types import CallToolResult, TextContent

server = MCPServer("shop")


def _ledger(tool: str, arguments: dict[str, Any]) -> None:
    path = os.environ.get("TT_TEST_MCP_LEDGER")
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"tool": tool, "arguments": arguments}) + "\n")


@server.tool(description="Submit an order; returns a receipt.")
def submit(order: dict[str, Any]) -> dict[str, Any]:
    _ledger("submit", {"order": order})
    receipt = "RCPT-" + hashlib.sha256(json.dumps(order, sort_keys=True).encode()).hexdigest()[:8].upper()
    return {"accepted": True, "receipt_id": receipt, "items": len(order.get("items", []))}


@server.tool(description="Always fails with a structured error.")
def fail(code: str) -> CallToolResult:
    _ledger("fail", {"code": code})
    return CallToolResult(content=[TextContent(type="text", text=f"quota exceeded ({code})")],
                          structured_content={"error_code": code, "retryable": False}, is_error=True)


@server.tool(description="Sleep, then answer.")
def slow(seconds: float) -> str:
    _ledger("slow", {"seconds": seconds})
    time.sleep(seconds)
    return "slept"


@server.tool(description="Totals of the day: a summary line; the exact figures are structured.")
def summary() -> CallToolResult:
    _ledger("summary", {})
    return CallToolResult(content=[TextContent(type="text", text="3 batches settled (figures attached)")],
                          structured_content={"batches": [{"id": "B-1", "amount": "1043.17"},
                                                          {"id": "B-2", "amount": "88.02"}]})


LONG = "reserve_inventory_for_the_outbound_shipment_on_the_{}_lane"

if os.environ.get("TT_TEST_MCP_LONG_NAMES"):
    # Names a Chat Completions function name cannot hold as they are: two long names that share
    # their first 64 characters once prefixed (``mcp__shop__…``), and a dotted name whose fitted
    # form (``.`` -> ``_``) is another tool's real name.
    for lane in ("priority_express", "priority_standard"):
        def reserve(sku: str, lane: str = lane) -> dict[str, Any]:
            _ledger(LONG.format(lane), {"sku": sku})
            return {"reserved": sku, "lane": lane}

        server.tool(name=LONG.format(lane), description=f"Reserve stock on the {lane.replace('_', ' ')} lane.")(
            reserve)

    @server.tool(name="orders_create", description="Create a draft order.")
    def orders_create(ref: str) -> dict[str, Any]:
        _ledger("orders_create", {"ref": ref})
        return {"draft": ref}

    @server.tool(name="orders.create", description="Create and submit an order.")
    def orders_dot_create(ref: str) -> dict[str, Any]:
        _ledger("orders.create", {"ref": ref})
        return {"submitted": ref}


if __name__ == "__main__":
    server.run("stdio")
