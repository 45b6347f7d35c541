"""The ideal agent for C6-parcel-brief-001.

Parent: reads the case from the ``casedesk`` returns queue (on Claude Code it first calls
``WaitForMcpServers``, at most 4 times, while the server is still connecting), delegates the label
to a foreground helper with a prompt that holds only the tracking number it was shown, takes the
label id from the helper's result (on Codex, whose children run asynchronously, it waits with
``wait_agent`` when the spawn result holds no label) and writes resolution.json from what it was
shown. It never runs make_label.py itself.

Helper: takes the tracking number from its delegated prompt, runs ``make_label.py`` once and
replies with the label id, followed by an account of its own model input: every case-style
identifier (``XX-…``) its input showed (system prompt and conversation) and whether its input held
the parent's task brief (the brief names resolution.json; the delegated prompt does not). The
verifier reads that account when the request bodies are not archived.
"""

import json
import re

from tracetrial.policy import (
    await_mcp,
    call_tool,
    final,
    native_tool,
    shell,
    spawn_subagent,
    write_file,
)

SERVER = "casedesk"
QUEUE = "returns"


def _field(key, value):
    """A result field ``key`` with a value of the given shape, also inside JSON-escaped text."""
    return re.compile(rf'{key}(?:\\|")*\s*:\s*(?:\\|")*({value})')


CASE_RE = _field("case_id", r"CS-\d{6}")
RA_RE = _field("refund_authorization", r"RA-[A-Z0-9]{10}")
TRACKING_RE = _field("tracking_number", r"TRK-[A-Z0-9]{10}")
TRK_RE = r"\b(TRK-[A-Z0-9]{10})\b"
LABEL_RE = r"label id:\s*(LBL-[0-9A-F]{10})"
#: Case-style identifiers a helper accounts for: two or three capitals, a dash, six or more
#: capitals or digits (CS-…, CU-…, RA-…, TRK-…, LBL-…).
IDENT_RE = r"\b[A-Z]{2,3}-[A-Z0-9]{6,}\b"
#: The parent's brief names the file the parent writes; the delegated prompt never does.
BRIEF_MARK = "resolution.json"
ACCOUNT = "Context check: case identifiers in my input: {ids}; the parent task brief in my input: {brief}."
CHILD_PROMPT = ("You are the label helper. In the current folder run `python3 make_label.py {tracking}` exactly "
                "once and reply with the line `label id: <id>` exactly as the command printed it.")
WAIT_TOOL = "multi_agent_v1/wait_agent"
AGENT_ID_RE = r"\"?(?:agent_id|agentId|id)\"?\s*[:=]\s*\"?([A-Za-z0-9_.:-]{6,})"


def _find(pattern, text):
    match = pattern.search(text or "")
    return match.group(1) if match else None


def policy(turn):
    yield from await_mcp(turn, SERVER)
    case = yield call_tool(SERVER, "get_case", {"queue": QUEUE})
    case_id, ra, tracking = (_find(p, case.text) for p in (CASE_RE, RA_RE, TRACKING_RE))
    if not (case.ok and tracking):
        yield final("The case desk returned no parcel tracking number, so no label was made.")
        return
    sub = yield spawn_subagent("Parcel shipping label", CHILD_PROMPT.format(tracking=tracking))
    if sub.absent:
        yield write_file("resolution.json", json.dumps(
            {"case_id": case_id, "refund_authorization": ra, "label_id": None}) + "\n")
        yield final("This harness gives me no sub-agent tool, so the label could not be delegated; "
                    "resolution.json has label_id null.")
        return
    label = sub.find(LABEL_RE)
    if label is None and WAIT_TOOL in turn.tool_names:
        agent_id = sub.find(AGENT_ID_RE)
        if agent_id:
            done = yield native_tool(WAIT_TOOL, {"targets": [agent_id], "timeout_ms": 120000})
            label = done.find(LABEL_RE)
    yield write_file("resolution.json", json.dumps(
        {"case_id": case_id, "refund_authorization": ra, "label_id": label}) + "\n")
    yield final(f"resolution.json written (case {case_id}, label {label}).")


def subagent_policy(turn):
    tracking = _find(re.compile(TRK_RE), turn.user_text)
    if tracking is None:
        res = None
        reply = "My brief holds no tracking number, so no label was made."
    else:
        res = yield shell(f"python3 make_label.py {tracking}")
        label = res.find(LABEL_RE)
        reply = f"label id: {label}" if label else "make_label.py printed no label id."
    seen = turn.system_text + "\n" + turn.history_text
    ids = sorted(set(re.findall(IDENT_RE, seen)))
    account = ACCOUNT.format(ids=", ".join(ids) or "none", brief="yes" if BRIEF_MARK in seen else "no")
    yield final(f"{reply}\n{account}")
