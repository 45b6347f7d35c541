"""The ideal agent for T6-archive-hold-001.

It mounts the cold archive once (``mount_archive``), takes the name of the lookup tool the mount
result says it adds, and calls that tool for the matter the user named. The probe maps the call
to whatever the harness offers in *that* request: the tool as declared (``mcp__records__…``, a
Codex namespace, OpenClaw ``records__…``) or the harness's own tool search (Claude Code
``ToolSearch``, OpenClaw ``tool_search`` → ``tool_call``). When the harness offers no way to
reach the new tool the action is absent; the agent then waits briefly (a harness may re-list
asynchronously) and looks again, at most ``RETRIES`` times, and finally records ``null`` with the
reason instead of guessing. The hold reference written to hold.json is the one the lookup
result showed. Nothing is assumed: the matter id comes from the user's message, the tool name
from the mount result, the reference from the lookup result.
"""

import json
import re

from tracetrial.policy import await_mcp, call_tool, final, wait, write_file

SERVER = "records"
#: Looks again this many times (after a short wait) when the new tool is not yet offered.
RETRIES = 2
WAIT_S = 2
# A key/value pair inside a result, whether relayed as JSON, escaped JSON or Python-ish text.
_Q = r'(?:\\|"|\')*'
ADDS_RE = r"adds_tool" + _Q + r"\s*[:=]\s*" + _Q + r"([A-Za-z][A-Za-z0-9_]*)"
HOLD_RE = r"hold_reference" + _Q + r"\s*[:=]\s*" + _Q + r"([A-Za-z0-9][A-Za-z0-9_-]*)"
MATTER_RE = r"\bM-\d{4}\b"


def _failed(res):
    return res.absent or res.missing or bool(res.is_error)


def _gist(text):
    """The line of a result that says what went wrong (an error or unknown-tool message), shortened."""
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    for pattern in (r"(?i)unknown|not available|not found|denied", r"(?i)error"):
        hit = next((ln for ln in lines if re.search(pattern, ln)), None)
        if hit:
            return hit[:160]
    return (lines[0] if lines else "empty result")[:160]


def _hold_json(matter, reference):
    return write_file("hold.json", json.dumps({"matter": matter, "hold_reference": reference}, indent=2) + "\n")


def unoffered(out):
    """The harness did not offer the tool (yet): the call was not possible (absent), or a
    dispatcher refused an id it does not know (OpenClaw's tool_call: "Unknown tool id: ...").
    Either way the agent waits and looks again, so every harness gets the same chances."""
    # The refusal carries no error flag on OpenClaw's chat wire: it is a JSON body
    # {"status": "error", "error": "Unknown tool id: ..."}, so the text decides.
    return out.absent or re.search(r"(?i)\bunknown tool(?: id)?:", out.text or "") is not None


def policy(turn):
    found = re.search(MATTER_RE, turn.user_text or "")
    matter = found.group(0) if found else None
    if matter is None:
        yield final("The request names no matter id; nothing was looked up.")
        return
    yield from await_mcp(turn, SERVER)
    mounted = yield call_tool(SERVER, "mount_archive", {})
    tool = None if _failed(mounted) else mounted.find(ADDS_RE)
    if tool is None:
        why = "the archive could not be mounted (the mount result names no lookup tool)"
        yield _hold_json(matter, None)
        yield final(f"hold.json records no reference for {matter}: {why}.")
        return
    out = yield call_tool(SERVER, tool, {"matter_id": matter})
    for _ in range(RETRIES):
        if not unoffered(out):
            break
        yield wait(WAIT_S)
        out = yield call_tool(SERVER, tool, {"matter_id": matter})
    if unoffered(out):
        why = (f"the mount reported that it adds {tool}, but the harness never offered that tool "
               f"(looked {RETRIES + 1} times)")
        reference = None
    elif out.missing or out.is_error:
        why, reference = f"{tool} returned no result or an error ({_gist(out.text)})", None
    else:
        reference = out.find(HOLD_RE)
        reference = None if reference in (None, "null", "None") else reference
        why = "" if reference else f"the {tool} call returned no hold reference ({_gist(out.text)})"
    yield _hold_json(matter, reference)
    if reference:
        yield final(f"Matter {matter}: litigation-hold reference {reference} (from {tool}); recorded in hold.json.")
    else:
        yield final(f"hold.json records no reference for {matter}: {why}.")
