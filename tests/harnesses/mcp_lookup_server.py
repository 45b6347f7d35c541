"""A tiny stdio MCP server (stdlib only) used to capture real MCP round trips.

One tool, ``lookup {key}``, answering ``value-of-<key>``; ``key == "boom"``
returns an MCP error result. Newline-delimited JSON-RPC 2.0 on stdin/stdout.
"""

from __future__ import annotations

import json
import sys

TOOLS = [
    {
        "name": "lookup",
        "description": "Look up the value stored under a key.",
        "inputSchema": {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]},
    }
]


def handle(msg: dict) -> dict | None:
    method, mid = msg.get("method"), msg.get("id")
    if mid is None:
        return None  # a notification
    if method == "initialize":
        version = (msg.get("params") or {}).get("protocolVersion") or "2025-06-18"
        result = {
            "protocolVersion": version,
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "lookup", "version": "1.0.0"},
        }
    elif method == "tools/list":
        result = {"tools": TOOLS}
    elif method == "tools/call":
        key = ((msg.get("params") or {}).get("arguments") or {}).get("key", "")
        if key == "boom":
            result = {"content": [{"type": "text", "text": f"lookup failed: no key {key!r}"}], "isError": True}
        else:
            result = {"content": [{"type": "text", "text": f"value-of-{key}"}], "isError": False}
    elif method == "ping":
        result = {}
    else:
        return {"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": f"unknown method {method}"}}
    return {"jsonrpc": "2.0", "id": mid, "result": result}


def main() -> None:
    for line in sys.stdin:
        if not line.strip():
            continue
        reply = handle(json.loads(line))
        if reply is not None:
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
