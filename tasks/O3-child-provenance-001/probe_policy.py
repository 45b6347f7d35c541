"""The ideal agent for O3-child-provenance-001.

Parent: stamp once itself, delegate the child stamp to a foreground helper and take the
child's token from the helper's result (on Codex, whose children run asynchronously, it waits
for the helper with ``wait_agent`` when the spawn result carries no token), then write
summary.json from what it was shown. It never runs ``stamp.py child`` itself.

Helper: run ``python3 stamp.py child`` once and reply with the token it printed.
"""

import json

from tracetrial.policy import final, native_tool, shell, spawn_subagent, write_file

TOKEN_RE = r"stamp token:\s*(ST-[0-9a-f]+)"
CHILD_PROMPT = ("You are the stamp helper. In the current folder run `python3 stamp.py child` exactly once and "
                "reply with the line `stamp token: <token>` exactly as the command printed it.")
WAIT_TOOL = "multi_agent_v1/wait_agent"
AGENT_ID_RE = r"\"?(?:agent_id|agentId|id)\"?\s*[:=]\s*\"?([A-Za-z0-9_.:-]{6,})"


def policy(turn):
    mine = yield shell("python3 stamp.py parent")
    parent_token = mine.find(TOKEN_RE)
    sub = yield spawn_subagent("Child provenance stamp", CHILD_PROMPT)
    if sub.absent:
        yield write_file("summary.json", json.dumps({"parent_token": parent_token, "child_token": None}) + "\n")
        yield final("This harness gives me no sub-agent tool, so the child stamp could not be made; "
                    "summary.json has child_token null.")
        return
    child_token = sub.find(TOKEN_RE)
    if child_token is None and WAIT_TOOL in turn.tool_names:
        agent_id = sub.find(AGENT_ID_RE)
        if agent_id:
            done = yield native_tool(WAIT_TOOL, {"targets": [agent_id], "timeout_ms": 120000})
            child_token = done.find(TOKEN_RE)
    yield write_file("summary.json", json.dumps({"parent_token": parent_token, "child_token": child_token}) + "\n")
    yield final(f"summary.json written (parent {parent_token}, child {child_token}).")


def subagent_policy(prompt_text):
    res = yield shell("python3 stamp.py child")
    token = res.find(TOKEN_RE)
    yield final(f"stamp token: {token}" if token else "stamp.py printed no token.")
