"""A minimal stdio MCP server ("tickets") for the live probe tests: newline-delimited JSON-RPC."""

import json
import sys

TOOLS = [
    {"name": "get_ticket", "description": "Get one ticket by id.",
     "inputSchema": {"type": "object", "properties": {"ticket_id": {"type": "string"}}, "required": ["ticket_id"]}},
]

for line in sys.stdin:
    msg = json.loads(line)
    if msg.get("id") is None:
        continue  # notifications need no answer
    method = msg.get("method")
    if method == "initialize":
        result = {"protocolVersion": msg["params"].get("protocolVersion", "2025-06-18"),
                  "capabilities": {"tools": {}}, "serverInfo": {"name": "tickets", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": TOOLS}
    elif method == "tools/call":
        ticket = msg["params"]["arguments"].get("ticket_id")
        result = {"content": [{"type": "text", "text": f"ticket {ticket} status=open owner=ops"}], "isError": False}
    else:
        result = {}
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}) + "\n")
    sys.stdout.flush()
