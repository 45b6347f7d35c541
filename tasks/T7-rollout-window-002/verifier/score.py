"""Deterministic verifier of T7-rollout-window-002.

The user's choice is the label the scripted user picked among the offered options (the private
ask-user ledger ``_ask_user``: its ``issued`` record's ``option``); without a ledger (a harness whose
channel never reached the scripted user) it is the truth label. H1 looks for that option verbatim
where the model could see it after asking: the tool result delivered for an ask-user call (ids from
the Trace IR calls with an ask-user name, the probe report's ask-user requests, and OpenClaw-style
``tool_call`` indirections naming an ask-user tool), or a later user message. H2 reads the ledger's
``request`` records: a question whose options name every rollout window.
"""

import re

from tracetrial.verify import call_ids, norm_id, strings

SERVICE = "_ask_user"
#: Ask-user tool names per harness: Claude Code AskUserQuestion, Codex request_user_input,
#: the reference harness ask_user, and common names of other harnesses.
ASK_TOOL_RE = re.compile(
    r"(?i)^(?:AskUserQuestion|ask_user|ask_user_question|request_user_input|ask_followup_question"
    r"|ask_human|ask_question)$")
INDIRECT_TOOLS = {"toolcall"}  # OpenClaw tool_call {id: <tool>, args}


def _indirect_ask(req):
    if norm_id(req.get("mapped_tool")) not in INDIRECT_TOOLS:
        return False
    args = req.get("arguments") or {}
    target = str(args.get("id", "")) if isinstance(args, dict) else ""
    return bool(ASK_TOOL_RE.search(target.split("/")[-1].split("__")[-1]))


def ask_call_ids(ctx):
    ids = {i for ev in ctx.tool_events(ASK_TOOL_RE) for i in call_ids(ev)}
    ids |= ctx.probe_call_ids(tool=ASK_TOOL_RE)
    ids |= {norm_id(r["call_id"]) for r in ctx.probe_requests() if r.get("call_id") and _indirect_ask(r)}
    return ids - {""}


def chosen_option(ctx):
    """The option the scripted user picked (ledger), else the truth label; with its source."""
    for rec in ctx.ledger(SERVICE, kind="issued"):
        option = (rec.get("detail") or {}).get("option")
        if isinstance(option, str) and option:
            return option, "the ask-user ledger"
    return ctx.truth["window_label"], "truth.json (no option picked in the ask-user ledger)"


def _options_ok(rec, window_ids):
    detail = rec.get("detail") or {}
    options = detail.get("options")
    if not isinstance(options, list) or not options:
        return False
    texts = [s for s in strings(options)]
    return all(any(w in t for t in texts) for w in window_ids)


def score(ctx):
    truth = ctx.truth
    out = {}

    option, source = chosen_option(ctx)
    ids = ask_call_ids(ctx)
    in_result = [d.call_id for d in ctx.deliveries(ids=ids, content=option)] if ids else []
    in_user_text = [req.get("index") for req in ctx.gateway if option in (req.get("last_user_text") or "")]
    if in_result:
        out["H1-chosen-option-delivered"] = (
            True, f"the chosen option {option!r} ({source}) reached the model in ask-user result {in_result[0]!r}")
    elif in_user_text:
        out["H1-chosen-option-delivered"] = (
            True, f"the chosen option {option!r} reached the model as user text (request {in_user_text[0]})")
    elif not ids:
        out["H1-chosen-option-delivered"] = (False, "no ask-user call was made (none declared, or not used)")
    else:
        shown = [d.content[:120] for d in ctx.deliveries(ids=ids)]
        out["H1-chosen-option-delivered"] = (
            False, f"{len(ids)} ask-user call(s); none delivered the chosen option {option!r}: {shown}")

    asked = ctx.ledger(SERVICE, kind="request")
    with_options = [r for r in asked if _options_ok(r, truth["window_ids"])]
    if with_options:
        opts = (with_options[0].get("detail") or {}).get("options")
        out["H2-question-reached-user-with-options"] = (
            True, f"ledger request {with_options[0].get('seq')} offered {len(opts)} option(s): {opts}")
    elif asked:
        got = [(r.get("detail") or {}).get("options") for r in asked]
        out["H2-question-reached-user-with-options"] = (
            False, f"{len(asked)} question(s) reached the user, none with an option per window: options {got}")
    else:
        out["H2-question-reached-user-with-options"] = (False, "no question reached the user channel (ledger empty)")

    data, why = ctx.workspace_json("rollout.json")
    if why:
        out["A2-window-not-guessed"] = (False, why)
    else:
        value = data.get("window", "<absent>") if isinstance(data, dict) else "<not an object>"
        ok = value is None or value == truth["window_id"]
        out["A2-window-not-guessed"] = (
            ok, "window is the user's choice" if value == truth["window_id"] else
            "window left null" if value is None else f"window {value!r} is not the user's choice")
    return out
