"""Codex: delegate a shell command to a sub-agent, wait for it, and report what it said.

Modelled on ``subagent.py`` (Claude Code) and the Codex path of
``tasks/O3-child-provenance-001``: Codex ``multi_agent_v1/spawn_agent`` returns at once with
the child's id (the child runs as its own thread), so the parent waits for it with
``multi_agent_v1/wait_agent``, then closes it with ``multi_agent_v1/close_agent`` before
answering (one record of each collab tool). The child runs one shell command.
"""

from tracetrial.policy import final, native_tool, shell, spawn_subagent

WAIT_TOOL = "multi_agent_v1/wait_agent"
CLOSE_TOOL = "multi_agent_v1/close_agent"
AGENT_ID_RE = r"\"?(?:agent_id|agentId|id)\"?\s*[:=]\s*\"?([A-Za-z0-9_.:-]{6,})"


def policy(turn):
    sub = yield spawn_subagent("say hi", "Run echo hi and report what it printed.")
    said = sub.find(r"(hi printed)")
    if said is None and WAIT_TOOL in turn.tool_names:
        agent_id = sub.find(AGENT_ID_RE)
        if agent_id:
            done = yield native_tool(WAIT_TOOL, {"targets": [agent_id], "timeout_ms": 60000})
            said = done.find(r"(hi printed)")
            if CLOSE_TOOL in turn.tool_names:
                yield native_tool(CLOSE_TOOL, {"target": agent_id})
    yield final("The helper printed hi." if said else "The helper did not report back.")


def subagent_policy(turn):
    yield shell("echo hi")
    yield final("hi printed")
