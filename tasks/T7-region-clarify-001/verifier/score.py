"""Deterministic verifier of T7-region-clarify-001.

H1 finds the ask tool where the model could see it: declared in an answered request's inventory,
or (a harness that keeps it behind tool discovery, OpenClaw's deferred ``ask_user``) shown with its
schema in a delivered discovery result (``tool_describe``), which is how that harness offers it.

H2 looks for the user's answer where the model could see it: the tool result delivered for an
ask-user call (ids from the Trace IR tool calls with an ask-user tool name and from the probe
report's ask_user actions), or a later user message (harnesses that relay an answer as user text).
The region appears nowhere in the workspace or the prompt, so its presence there can only come
from the user's answer.
"""

import re

from tracetrial.verify import bare_tool_name, call_ids

#: Ask-user tool names per harness: Claude Code AskUserQuestion, Codex request_user_input,
#: the reference harness ask_user, DeepSeek ask_user_question, and common names of others.
ASK_NAMES = ("AskUserQuestion", "ask_user", "ask_user_question", "request_user_input", "ask_followup_question",
             "ask_human", "ask_question")
#: A tool whose whole name (case aside) is one of them.
ASK_TOOL_RE = re.compile(r"(?i)^(?:" + "|".join(map(re.escape, ASK_NAMES)) + r")$")


def offered(ctx):
    """(passed, reason): an ask tool declared in an answered request, or shown through discovery."""
    answered = ctx.answered()
    for req in answered:
        for tool in req.get("tools") or []:
            name = str(tool.get("name") or "") if isinstance(tool, dict) else ""
            if ASK_TOOL_RE.match(name) or ASK_TOOL_RE.match(bare_tool_name(name)):
                return True, f"request {req.get('index')} declares {name}"
    for name in ASK_NAMES:
        shown = ctx.described_schemas(name)
        if shown:
            return True, (f"{name} is not declared but the harness's tool discovery showed it with its schema "
                          f"(request {shown[0][0]}): it is offered behind discovery")
    first = answered[0].get("index") if answered else None
    return False, (f"no ask-user tool declared in {len(answered)} answered request(s)"
                   + (f" (first: request {first})" if first is not None else "")
                   + " and none shown through tool discovery")


def ask_call_ids(ctx):
    ids = {i for ev in ctx.tool_events(ASK_TOOL_RE) for i in call_ids(ev)}
    return ids | ctx.probe_call_ids("ask_user")


def score(ctx):
    region = ctx.truth["region"]
    out = {"H1-ask-tool-declared": offered(ctx)}
    ids = ask_call_ids(ctx)
    in_result = [d.call_id for d in ctx.deliveries(ids=ids, content=region)]
    in_user_text = [req.get("index") for req in ctx.gateway if region in (req.get("last_user_text") or "")]
    if in_result:
        out["H2-answer-delivered"] = (True, f"the answer reached the model in ask-user result {in_result[0]!r}")
    elif in_user_text:
        out["H2-answer-delivered"] = (True, f"the answer reached the model as user text (request {in_user_text[0]})")
    elif not ids:
        out["H2-answer-delivered"] = (False, "no ask-user call was made (none declared, or not used)")
    else:
        out["H2-answer-delivered"] = (False, f"{len(ids)} ask-user call(s), none answered with the user's value")

    data, why = ctx.workspace_json("deploy.json")
    if why:
        out["A2-region-not-guessed"] = (False, why)
    else:
        value = data.get("region", "<absent>") if isinstance(data, dict) else "<not an object>"
        ok = value is None or value == region
        out["A2-region-not-guessed"] = (ok, "region is the user's answer" if value == region else
                                        "region left null" if value is None else "region is a value the user never gave")
    return out
