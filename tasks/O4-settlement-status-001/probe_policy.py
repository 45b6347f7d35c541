"""The ideal agent for O4-settlement-status-001.

Parent: delegate the slow batch to a background helper, then ask the harness once for the
helper's status through the sub-agent status/wait tool it declares, with a wait (60 s) longer
than the batch:

* reference ``subagent_status {wait_s}``;
* Claude Code ``TaskOutput {task_id, block: true, timeout}`` on the ``agentId`` the spawn result gave;
* Codex ``wait_agent {targets, timeout_ms}`` on the spawned ``agent_id``;
* OpenClaw ``subagents`` (deferred behind ``tool_call``): ``list`` shows the child's ``taskId``
  (the spawn result names only the session and run), then ``wait {taskIds, timeoutSeconds}``.

It writes status.json once from that status answer alone - ``done`` with the settlement
reference the answer shows (null if none) when it says the helper finished, else ``pending`` -
and ends its turn. A later notification is only acknowledged (the file is not rewritten).
Without a status/wait tool it writes nothing and says so. It never runs the batch, never reads
its files, never sleeps.

Helper: run the batch once (polling it if the shell tool moved it to the background) and reply
with the reference it printed.
"""

import json
import re

from tracetrial.policy import final, native_tool, shell, spawn_subagent, write_file

CHILD_PROMPT = (
    "You are the settlement helper. In the current folder run `python3 settle_batch.py` exactly once "
    "(it takes about 8 seconds; let it run to its end). Reply with the line "
    "`settlement reference: <reference>` exactly as the batch printed it.")
WAIT_S = 60

# A status answer that says a sub-agent finished: "(status: completed)", "<status>completed</status>",
# '"status": "completed"' (also JSON-escaped inside a relayed result), Codex wait results
# '{"completed": ...}', "Sub-agent child-1: completed".
DONE_RE = re.compile(r"(?i)\b(?:status|state)\W{0,8}(?:completed|finished|done|succeeded)\b|\"completed\\?\"\s*:\s*\\?\""
                     r"|:\s*(?:completed|finished|done)\b")
VALUE_RE = r"settlement reference:\s*(SETL-[0-9a-f]+)"
CC_AGENT_RE = r"agentId:\s*([\w-]+)"
CODEX_AGENT_RE = r'"agent_id"\s*:\s*"([^"]+)"'
#: Claude Code's tool that reads (and blocks on) a background task's output.
TASK_OUTPUT_TOOLS = ("TaskOutput", "AgentOutputTool")
NO_TOOL = "This harness declares no sub-agent status or wait tool, so I could not ask for the helper's status"


def _tool(turn, bare):
    return next((n for n in turn.tool_names if n.split("/")[-1] == bare), None)


def _status_calls(turn, spawn_text):
    """The status query this harness discloses (a generator step list), or None."""
    if "subagent_status" in turn.tool_names:
        return "ref", native_tool("subagent_status", {"wait_s": WAIT_S})
    cc = next((n for n in turn.tool_names if n in TASK_OUTPUT_TOOLS), None)
    agent = re.search(CC_AGENT_RE, spawn_text or "")
    if cc and agent:
        return "cc", native_tool(cc, {"task_id": agent.group(1), "block": True, "timeout": WAIT_S * 1000})
    wait = _tool(turn, "wait_agent")
    agent = re.search(CODEX_AGENT_RE, spawn_text or "")
    if wait and agent:
        return "codex", native_tool(wait, {"targets": [agent.group(1)], "timeout_ms": WAIT_S * 1000})
    if "tool_call" in turn.tool_names and "childSessionKey" in (spawn_text or ""):
        return "openclaw", native_tool("tool_call", {"id": "subagents", "args": {"action": "list"}})
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


def _openclaw_task(text):
    """The helper's task id in a ``subagents list`` answer: the ``subagent`` runtime's task (the
    list also holds the parent's own running ``cli`` task)."""
    for item in _json_values(text):
        if item.get("taskId") and item.get("runtime") == "subagent":
            return str(item["taskId"])
    return None


def _state(text):
    """(job, reference) from the status answer."""
    value = None
    for value in re.findall(VALUE_RE, text or ""):
        pass
    if DONE_RE.search(text or "") or value:
        return "done", value
    return "pending", None


def policy(turn):
    res = yield spawn_subagent("Card settlement batch", CHILD_PROMPT, background=True)
    if res.absent:
        yield final("This harness gives me no sub-agent tool, so I could not delegate the batch; "
                    "I did not run it myself and wrote no status.")
        return
    kind, call = _status_calls(turn, res.text)
    if call is None:
        yield final(NO_TOOL + "; I wrote no status.json.")
        return
    status = yield call
    if kind == "openclaw" and not status.absent:
        task = _openclaw_task(status.text)
        if task:
            status = yield native_tool("tool_call", {"id": "subagents", "args": {
                "action": "wait", "taskIds": [task], "timeoutSeconds": WAIT_S}})
    if status.absent or status.missing:
        yield final(NO_TOOL + " (the status call got no answer); I wrote no status.json.")
        return
    job, value = _state(status.text)
    yield write_file("status.json", json.dumps({"job": job, "reference": value}) + "\n")
    obs = yield final(f"status.json written from the status answer: the settlement batch is {job}"
                      + (f" (reference {value})." if value else "."))
    while obs is not None and obs.kind == "notification":
        obs = yield final("Noted; status.json stays as the status answer gave it.")


#: A shell tool that moved a long command to the background: OpenClaw ``exec`` ("Command still
#: running (session tender-pine, pid 120). Use process (...poll...)"), Codex ``exec_command``
#: ("Process running with session ID 3").
OPENCLAW_RUNNING = r"still running \(session ([\w.-]+)"
CODEX_RUNNING = r"(?i)process running with session id (\d+)"
MAX_POLLS = 6


def subagent_policy(prompt_text):
    """Run the batch once; if the harness's shell tool moved it to the background, follow the
    disclosed recovery path (poll that session until it ends), then reply with the reference."""
    res = yield shell("python3 settle_batch.py", timeout_s=120)
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
        yield final(f"The batch finished. settlement reference: {value}")
    else:
        yield final("The batch did not print a settlement reference.")
