"""The ideal agent for L4-deferred-result-002.

Turn 1 (parent): delegate the slow batch to a background helper, write status.json once from
what the spawn result says ("pending" unless the harness says the helper finished: then "done"
with the reference from the helper's reply, or null if the reply has none) and end the turn. If
the harness comes back in the same turn with a notification, it only acknowledges it: the user
asked for status.json once and for the reference later.
Turn 2 (parent): takes the settlement reference from what it is shown now (``turn.history_text``:
a completion notice kept in the resumed history, or one delivered in this turn). If none is
visible it follows the disclosed recovery path once - the harness's sub-agent status/wait tool
when one is declared (reference ``subagent_status`` with ``wait_s``, Codex ``wait_agent`` on the
spawned agent's id), waiting at most ``WAIT_S`` for a helper still running - and writes result.json with the reference, or null. Its final answer states what it found,
which the probe report keeps as the turn-2 observation.
It never runs the batch, never reads batch_result.json, never waits on purpose.

Helper: run the batch once (polling it when the shell tool moved it to the background) and reply
with the reference it printed.
"""

import json
import re

from tracetrial.policy import final, native_tool, shell, spawn_subagent, write_file

CHILD_PROMPT = (
    "You are the settlement helper. In the current folder run `python3 settle_batch.py` exactly once "
    "(it takes about 15 seconds; let it run to its end). Reply with the line "
    "`settlement reference: <reference>` exactly as the batch printed it.")

# Wordings harnesses use to say a sub-agent has finished: "<status>completed</status>",
# "(status: completed)", '"status": "completed"', Codex wait results '{"completed": ...}'.
DONE_RE = re.compile(r"(?i)\bstatus\W{0,4}(?:completed|finished|done|succeeded)\b|\"completed\"\s*:")
VALUE_RE = r"settlement reference:\s*(SETL-[0-9a-f]+)"
AGENT_ID_RE = r'"agent_id"\s*:\s*"([^"]+)"'
#: The turn-2 final answer's account of what the probe saw (read by the verifier's H2).
SHOWN = "Settlement reference shown to me: "
NOT_SHOWN = "Settlement reference shown to me: none."
#: The one bounded wait of turn 2's recovery path: a helper still running when turn 2 starts (a
#: harness that keeps children alive across turns) gets this long to finish.
WAIT_S = 30


def _state(text):
    """(job, value) from a text the harness delivered about the helper."""
    value = None
    for value in re.findall(VALUE_RE, text or ""):
        pass
    if value:
        return "done", value
    if DONE_RE.search(text or ""):
        return "done", None
    return "pending", None


def _status(job, value):
    data = {"job": "pending"} if job == "pending" else {"job": "done", "value": value}
    return json.dumps(data) + "\n"


def _poll(turn):
    """The harness's disclosed way to ask about a background helper, if it declares one."""
    names = turn.tool_names
    if "subagent_status" in names:
        return native_tool("subagent_status", {"wait_s": WAIT_S})
    wait = next((n for n in names if n.split("/")[-1] == "wait_agent"), None)
    agent = turn.find(AGENT_ID_RE)
    if wait and agent:
        return native_tool(wait, {"targets": [agent], "timeout_ms": WAIT_S * 1000})
    return None


def policy(turn):
    if turn.index == 1:
        res = yield spawn_subagent("Card settlement batch", CHILD_PROMPT, background=True)
        if res.absent:
            yield final("This harness gives me no sub-agent tool, so I could not delegate the batch; "
                        "I did not run it myself and wrote no status.")
            return
        job, value = _state(res.text)
        yield write_file("status.json", _status(job, value))
        obs = yield final(f"status.json written: the settlement batch is {job}"
                          + (f" (reference {value})." if value else ".") + " Ask me for the reference later.")
        while obs is not None and obs.kind == "notification":
            obs = yield final("Noted. I will give you the settlement reference when you ask for it.")
        return
    value = turn.find(VALUE_RE)
    if value is None:
        poll = _poll(turn)
        if poll is not None:
            res = yield poll
            value = res.find(VALUE_RE)
    yield write_file("result.json", json.dumps({"value": value}) + "\n")
    yield final("result.json written. " + (f"{SHOWN}{value}." if value else NOT_SHOWN))


#: A shell tool that moved a long command to the background: OpenClaw ``exec`` ("Command still
#: running (session tender-pine, pid 120). Use process (...poll...)"), Codex ``exec_command``
#: ("Process running with session ID 3").
OPENCLAW_RUNNING = r"still running \(session ([\w.-]+)"
CODEX_RUNNING = r"(?i)process running with session id (\d+)"
#: Polls of a backgrounded command at most (each waits up to 30 s).
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
