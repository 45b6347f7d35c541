"""Native permission mode: the task's MCP tool is allowed, a writing shell command is not."""

from tracetrial.policy import call_tool, final, shell


def policy(turn):
    yield call_tool("lookup", "lookup", {"key": "alpha"})
    yield call_tool("lookup", "lookup", {"key": "boom"})
    yield shell("touch marker && rm -f other")
    yield final("Done.")
