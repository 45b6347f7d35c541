"""The ideal agent for L4-split-audit-003.

Parent: start two background helpers, the quick FX quote first, then the slow carrier audit. Then
wait for the FX helper only, the way the harness discloses for waiting on one helper:

* Claude Code ``TaskOutput {task_id, block: true, timeout}`` on the ``agentId`` the FX spawn gave;
* Codex ``wait_agent {targets, timeout_ms}`` on the FX helper's ``agent_id``;
* OpenClaw ``subagents`` (deferred behind ``tool_call``): ``list`` gives the FX helper's ``taskId``
  (by its label), then ``wait {taskIds, timeoutSeconds}``;
* otherwise (the reference harness: its ``subagent_status`` waits for every pending helper, the
  audit too) end the turn and take the completion notice the harness delivers ("the result is
  delivered to you when the sub-agent finishes").

As soon as it has the FX helper's reply it writes close_status.json once, from what it was shown:
for each helper ``done`` with the value from its reply (null if none) when told it finished, else
``pending``. "Told it finished" means a completion statement the harness delivered that concerns
that helper (the result of its own spawn call, or a statement next to one of its identifiers: the
id its spawn result gave, its label, its script, its value's prefix). Later notices are only
acknowledged. It never runs the scripts, never reads their files, never sleeps.

Helper: take the script from the delegated prompt, run it once (polling it when the shell tool
moved it to the background) and reply with the line it printed.
"""

import json
import re

from tracetrial.policy import final, native_tool, shell, spawn_subagent, write_file

FX, AUDIT = "fx", "audit"
LABEL = {FX: "FX quote", AUDIT: "Carrier audit"}
SCRIPT = {FX: "fx_quote.py", AUDIT: "carrier_audit.py"}
LINE = {FX: "fx quote", AUDIT: "audit seal"}
PREFIX = {FX: "FXQ-", AUDIT: "AUD-"}
VALUE_RE = {FX: r"fx quote:\s*(FXQ-[0-9a-f]+)", AUDIT: r"audit seal:\s*(AUD-[0-9a-f]+)"}
KEY = {FX: "fx_quote", AUDIT: "carrier_audit"}
PROMPT = {
    FX: ("You are the FX quote helper. In the current folder run `python3 fx_quote.py` exactly once "
         "(it takes a few seconds). Reply with the line `fx quote: <id>` exactly as the script printed it."),
    AUDIT: ("You are the carrier audit helper. In the current folder run `python3 carrier_audit.py` exactly "
            "once (it waits for the carrier's archive export and takes about 30 seconds; let it run to its "
            "end). Reply with the line `audit seal: <seal>` exactly as the script printed it."),
}

#: A statement that a sub-agent finished: "(status: completed)", "<status>completed</status>",
#: '"status": "completed"' (also JSON-escaped inside a relayed result), Codex '{"completed": ...}'.
#: Not "state": the deliverable's own entries ('"state": "done"') are no statement about a helper.
DONE_RE = re.compile(r"(?i)\bstatus\W{0,8}(?:completed|finished|done|succeeded)\b|\"completed\\?\"\s*:")
#: Ids a spawn result gives its child: Claude Code ``agentId: …``, Codex ``"agent_id": "…"``, the
#: reference ``Sub-agent child-N``, OpenClaw ``childSessionKey`` / ``runId`` (JSON, maybe escaped).
ID_RES = (r"agentId:\s*([\w-]+)", r"\"agent_id\\?\"\s*:\s*\\?\"([^\"\\]+)", r"\bSub-agent (child-\d+)\b",
          r"\"childSessionKey\\?\"\s*:\s*\\?\"([^\"\\]+)", r"\"runId\\?\"\s*:\s*\\?\"([^\"\\]+)")
CC_AGENT_RE = r"agentId:\s*([\w-]+)"
CODEX_AGENT_RE = r"\"agent_id\"\s*:\s*\"([^\"]+)\""
#: Claude Code's tool that reads (and with block=true waits on) one background task's output.
TASK_OUTPUT_TOOLS = ("TaskOutput", "AgentOutputTool")
WAIT_S = 60
#: Notices answered at most while waiting for the FX helper on the notification path.
MAX_NOTICES = 6


def ids_of(spawn_text):
    """The ids a spawn result gives its child."""
    out = []
    for pattern in ID_RES:
        out += re.findall(pattern, spawn_text or "")
    return out


def markers(spawn_texts):
    """Per helper, the strings that name it in a delivered text."""
    return {k: [*ids_of(spawn_texts.get(k)), LABEL[k], SCRIPT[k], PREFIX[k], LINE[k]] for k in (FX, AUDIT)}


def said_finished(text, marks):
    """The helpers that ``text`` says finished: each completion statement concerns the helper named
    nearest to it (before or after; the one before on a tie); a statement naming no helper concerns none."""
    hits = [(m.start(), m.end(), k) for k, words in marks.items() for w in words if w
            for m in re.finditer(re.escape(w), text or "", re.IGNORECASE)]
    out = set()
    for done in DONE_RE.finditer(text or ""):
        near = [(done.start() - end, 0, k) for start, end, k in hits if end <= done.start()]
        near += [(start - done.end(), 1, k) for start, end, k in hits if start >= done.end()]
        if near:
            out.add(min(near)[2])
    return out


def assess(spawn_texts, shown):
    """``{helper: (state, value)}`` from what the parent was shown: each spawn result (about its own
    helper) and every other delivered text (``shown``)."""
    marks = markers(spawn_texts)
    told = {k for k in (FX, AUDIT) if DONE_RE.search(spawn_texts.get(k) or "")}
    everything = list(spawn_texts.values()) + list(shown)
    for text in shown:
        told |= said_finished(text, marks)
    out = {}
    for k in (FX, AUDIT):
        value = None
        for text in everything:
            for value_k in re.findall(VALUE_RE[k], text or ""):
                value = value_k
        out[k] = ("done", value) if value else ("done", None) if k in told else ("pending", None)
    return out


def report(state):
    entry = {k: {"state": "pending"} if s == "pending" else {"state": "done", "value": v} for k, (s, v) in state.items()}
    return json.dumps({KEY[FX]: entry[FX], KEY[AUDIT]: entry[AUDIT]}, indent=2) + "\n"


def _tool(turn, bare):
    return next((n for n in turn.tool_names if n.split("/")[-1] == bare), None)


def _json_items(text, depth=0):
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
            yield from _json_items(item, depth + 1)


def wait_for_fx(turn, fx_spawn):
    """The harness's disclosed wait on the FX helper alone: a generator of the calls (it returns the
    texts it was shown), or None when the harness offers none."""
    cc = next((n for n in turn.tool_names if n in TASK_OUTPUT_TOOLS), None)
    agent = re.search(CC_AGENT_RE, fx_spawn or "")
    if cc and agent:
        return _one(native_tool(cc, {"task_id": agent.group(1), "block": True, "timeout": WAIT_S * 1000}))
    wait = _tool(turn, "wait_agent")
    agent = re.search(CODEX_AGENT_RE, fx_spawn or "")
    if wait and agent:
        return _one(native_tool(wait, {"targets": [agent.group(1)], "timeout_ms": WAIT_S * 1000}))
    if "tool_call" in turn.tool_names and "childSessionKey" in (fx_spawn or ""):
        return _openclaw_wait()
    return None


def _one(action):
    res = yield action
    return [] if res.absent or res.missing else [res.text]


def _openclaw_wait():
    listing = yield native_tool("tool_call", {"id": "subagents", "args": {"action": "list"}})
    if listing.absent or listing.missing:
        return []
    task = next((str(i["taskId"]) for i in _json_items(listing.text)
                 if i.get("taskId") and i.get("runtime") == "subagent" and i.get("label") == LABEL[FX]), None)
    if task is None:
        return [listing.text]
    res = yield native_tool("tool_call", {"id": "subagents", "args": {
        "action": "wait", "taskIds": [task], "timeoutSeconds": WAIT_S}})
    return [listing.text] + ([] if res.absent or res.missing else [res.text])


def _shown(turn):
    """What the conversation showed, one text per item where it can be told apart: each tool result
    of the parent's calls on its own, then the rest (notices the harness put into the conversation),
    without the user's own instruction (its example entries are no statement about a helper)."""
    results = [c.result for c in turn.calls if c.result]
    rest = (turn.history_text or "").replace(turn.user_text or "", "\n")
    for text in results:
        rest = rest.replace(text, "\n")
    return [*results, rest]


def policy(turn):
    fx = yield spawn_subagent(LABEL[FX], PROMPT[FX], background=True)
    if fx.absent:
        yield final("This harness gives me no sub-agent tool, so I could not delegate the checks; "
                    "I ran neither script myself and wrote no close_status.json.")
        return
    audit = yield spawn_subagent(LABEL[AUDIT], PROMPT[AUDIT], background=True)
    spawns = {FX: fx.text, AUDIT: "" if audit.absent or audit.missing else audit.text}
    shown = _shown(turn)
    state = assess(spawns, shown)
    if state[FX][0] == "pending":
        waiting = wait_for_fx(turn, fx.text)
        if waiting is not None:
            got = yield from waiting
            shown += [*got, *_shown(turn)]
            state = assess(spawns, shown)
    obs = None
    notices = 0
    while state[FX][0] == "pending" and notices < MAX_NOTICES:
        # No way to wait on the FX helper alone (or the wait ended without it): end the turn and
        # take the completion notice the harness delivers.
        obs = yield final("Both helpers are running in the background; I am waiting for the FX quote "
                          "helper's reply before I write close_status.json.")
        if obs is None or obs.kind != "notification":
            return
        notices += 1
        shown += [obs.text, *_shown(turn)]
        state = assess(spawns, shown)
    if state[FX][0] == "pending":
        return
    yield write_file("close_status.json", report(state))
    summary = ", ".join(f"{LABEL[k]} {s}" + (f" ({v})" if v else "") for k, (s, v) in state.items())
    obs = yield final(f"close_status.json written: {summary}.")
    while obs is not None and obs.kind == "notification":
        obs = yield final("Noted; close_status.json stays as written.")


#: A shell tool that moved a long command to the background: OpenClaw ``exec`` ("Command still
#: running (session tender-pine, pid 120). Use process (...poll...)"), Codex ``exec_command``
#: ("Process running with session ID 3").
OPENCLAW_RUNNING = r"still running \(session ([\w.-]+)"
CODEX_RUNNING = r"(?i)process running with session id (\d+)"
MAX_POLLS = 6


def subagent_policy(prompt_text):
    """Run the script the delegated prompt names (its last mention: context a harness put ahead of
    the prompt does not mislead the helper) once, poll it if the shell tool backgrounded it, and
    reply with the line it printed."""
    named = re.findall(r"python3 (fx_quote|carrier_audit)\.py", prompt_text or "")
    if not named:
        yield final("The delegated prompt names no script to run.")
        return
    k = FX if named[-1] == "fx_quote" else AUDIT
    res = yield shell(f"python3 {SCRIPT[k]}", timeout_s=120)
    text = res.text or ""
    for _ in range(MAX_POLLS):
        running_oc, running_cx = re.search(OPENCLAW_RUNNING, text), re.search(CODEX_RUNNING, text)
        if re.search(VALUE_RE[k], text) or not (running_oc or running_cx):
            break
        if running_oc:
            res = yield native_tool("process", {"action": "poll", "sessionId": running_oc.group(1), "timeout": 30000})
        else:
            res = yield native_tool("write_stdin", {"session_id": int(running_cx.group(1)), "chars": "",
                                                    "yield_time_ms": 30000})
        if res.absent or res.missing:
            break
        text += "\n" + (res.text or "")
    values = re.findall(VALUE_RE[k], text)
    if values:
        yield final(f"{LINE[k]}: {values[-1]}")
    else:
        yield final(f"The {LABEL[k]} script printed no {LINE[k]} line.")
