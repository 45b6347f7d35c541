"""The ideal agent for O4-ingest-progress-002.

Parent: delegate the slow ingest (~25 s) to a background helper, then ask the harness once for the
helper's status, right away and without waiting, through the sub-agent status tool it declares:

* reference ``subagent_status {wait_s: 0}``;
* Claude Code ``TaskOutput {task_id, block: false}`` on the ``agentId`` the spawn result gave;
* Codex ``wait_agent {targets, timeout_ms}`` on the spawned ``agent_id``, with the shortest wait
  its schema accepts (``min 10000``: still well inside the ingest);
* OpenClaw ``subagents {action: list}`` (deferred behind ``tool_call``; declared directly by 2026.6.9):
  the helper's entry (the
  ``subagent`` runtime's task) gives its state.

It writes progress.json once from that status answer alone - ``running`` (reference null) when it
says pending/running, ``done`` with the ingest reference the answer shows (null if none) when it
says the helper finished - and ends its turn. A later notification is only acknowledged (the file
is not rewritten). Without a status tool it writes nothing and says so. It never runs the ingest,
never reads its files, never sleeps.

Helper: run the ingest once (polling it if the shell tool moved it to the background) and reply
with the reference it printed.
"""

import json
import re

from tracetrial.policy import final, native_tool, shell, spawn_subagent, write_file

CHILD_PROMPT = (
    "You are the ingest helper. In the current folder run `python3 ingest.py` exactly once "
    "(it takes about 25 seconds; let it run to its end). Reply with the line "
    "`ingest reference: <reference>` exactly as the ingest printed it.")
#: Codex's wait_agent declares "min 10000" for timeout_ms: its shortest status query.
CODEX_MIN_WAIT_MS = 10000

# A status answer that says a sub-agent finished: "(status: completed)", "<status>completed</status>",
# '"status": "completed"' (also JSON-escaped inside a relayed result), Codex wait results
# '{"completed": ...}', "Sub-agent child-1: completed".
DONE_RE = re.compile(r"(?i)\b(?:status|state)\W{0,8}(?:completed|finished|done|succeeded)\b|\"completed\\?\"\s*:\s*\\?\""
                     r"|:\s*(?:completed|finished|done)\b")
VALUE_RE = r"ingest reference:\s*(INGS-[0-9a-f]+)"
CC_AGENT_RE = r"agentId:\s*([\w-]+)"
CODEX_AGENT_RE = r'"agent_id"\s*:\s*"([^"]+)"'
#: Claude Code's tool that reads (or, with block=true, waits on) a background task's output.
TASK_OUTPUT_TOOLS = ("TaskOutput", "AgentOutputTool")
NO_TOOL = "This harness declares no sub-agent status tool, so I could not ask for the helper's status"


def _tool(turn, bare):
    return next((n for n in turn.tool_names if n.split("/")[-1] == bare), None)


def _status_call(turn, spawn_text):
    """The immediate status query this harness discloses: ``(kind, action)`` or ``(None, None)``."""
    if "subagent_status" in turn.tool_names:
        return "ref", native_tool("subagent_status", {"wait_s": 0})
    cc = next((n for n in turn.tool_names if n in TASK_OUTPUT_TOOLS), None)
    agent = re.search(CC_AGENT_RE, spawn_text or "")
    if cc and agent:
        return "cc", native_tool(cc, {"task_id": agent.group(1), "block": False})
    wait = _tool(turn, "wait_agent")
    agent = re.search(CODEX_AGENT_RE, spawn_text or "")
    if wait and agent:
        return "codex", native_tool(wait, {"targets": [agent.group(1)], "timeout_ms": CODEX_MIN_WAIT_MS})
    if "tool_call" in turn.tool_names and "childSessionKey" in (spawn_text or ""):
        return "openclaw", native_tool("tool_call", {"id": "subagents", "args": {"action": "list"}})
    if "subagents" in turn.tool_names and "childSessionKey" in (spawn_text or ""):
        # OpenClaw 2026.6.9 declares subagents directly (``list`` only): the same one look
        return "openclaw", native_tool("subagents", {"action": "list"})
    return None, None


def _json_values(text, depth=0):
    """Every dict inside ``text`` parsed as JSON, following strings that are JSON again (OpenClaw
    relays a tool's result as JSON whose text block is JSON)."""
    if depth > 4 or not isinstance(text, str) or not text.lstrip().startswith(("{", "[")):
        return
    try:
        stack = [json.loads(text)]
    except ValueError:
        return
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            yield item
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str):
            yield from _json_values(item, depth + 1)


def _openclaw_helper(text):
    """The helper's entry in a ``subagents list`` answer (the ``subagent`` runtime's task; the list
    also holds the parent's own running ``cli`` task), as JSON text, or None."""
    for item in _json_values(text):
        if item.get("taskId") and item.get("runtime") == "subagent":
            return json.dumps(item)
    return None


def _state(text):
    """(job, reference) from the status answer."""
    value = None
    for value in re.findall(VALUE_RE, text or ""):
        pass
    if DONE_RE.search(text or "") or value:
        return "done", value
    return "running", None


def policy(turn):
    res = yield spawn_subagent("Event ingest", CHILD_PROMPT, background=True)
    if res.absent:
        yield final("This harness gives me no sub-agent tool, so I could not delegate the ingest; "
                    "I did not run it myself and wrote no progress.")
        return
    kind, call = _status_call(turn, res.text)
    if call is None:
        yield final(NO_TOOL + "; I wrote no progress.json.")
        return
    status = yield call
    if status.absent or status.missing:
        yield final(NO_TOOL + " (the status call got no answer); I wrote no progress.json.")
        return
    text = status.text or ""
    if kind == "openclaw":
        text = _openclaw_helper(text) or text
    job, value = _state(text)
    yield write_file("progress.json", json.dumps({"job": job, "reference": value}) + "\n")
    obs = yield final(f"progress.json written from the status answer: the ingest is {job}"
                      + (f" (reference {value})." if value else "."))
    while obs is not None and obs.kind == "notification":
        obs = yield final("Noted; progress.json stays as the status answer gave it.")


#: A shell tool that moved a long command to the background: OpenClaw ``exec`` ("Command still
#: running (session tender-pine, pid 120). Use process (...poll...)"), Codex ``exec_command``
#: ("Process running with session ID 3").
OPENCLAW_RUNNING = r"still running \(session ([\w.-]+)"
CODEX_RUNNING = r"(?i)process running with session id (\d+)"
MAX_POLLS = 6


def subagent_policy(prompt_text):
    """Run the ingest once; if the harness's shell tool moved it to the background, follow the
    disclosed recovery path (poll that session until it ends), then reply with the reference."""
    res = yield shell("python3 ingest.py", timeout_s=120)
    text = res.text or ""
    oc, cx = re.search(OPENCLAW_RUNNING, text), re.search(CODEX_RUNNING, text)
    for _ in range(MAX_POLLS):
        if re.search(VALUE_RE, text) or not (oc or cx):
            break
        if oc:
            res = yield native_tool("process", {"action": "poll", "sessionId": oc.group(1), "timeout": 30000})
        else:
            res = yield native_tool("write_stdin", {"session_id": int(cx.group(1)), "chars": "",
                                                    "yield_time_ms": 30000})
        if res.absent or res.missing:
            break
        text += "\n" + (res.text or "")
    value = None
    for value in re.findall(VALUE_RE, text):
        pass
    if value:
        yield final(f"The ingest finished. ingest reference: {value}")
    else:
        yield final("The ingest did not print an ingest reference.")
