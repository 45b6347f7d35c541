"""The ideal agent for T7-rollout-window-002: read the rollout windows from release.yaml, ask the
user which one to use as a multiple-choice question (one option per window) through the harness's
ask-user tool, take the window from the answer it was shown, write rollout.json.

The question goes out in the declared tool's own multiple-choice form (``native_tool``): the
reference harness ``ask_user {question, options}``, Claude Code ``AskUserQuestion`` and Codex
``request_user_input`` ``{questions: [{question, header, options: [{label, description}]}]}``; a
harness that keeps its ask-user tool behind a discovery tool (OpenClaw ``tool_search`` →
``tool_call``) is searched first. Any other ask-user tool gets the generic ``ask_user`` action
with the options (the tool's own options where its schema has them, as DeepSeek's
``ask_user_question`` does, else listed in the question text). Without a tool (an absent capability, recorded by the
probe) or without an answer naming exactly one window, it writes ``window: null`` and says so; it
never picks a window itself."""

import json
import re

from tracetrial.policy import ask_user, final, native_tool, read_file, write_file

QUESTION = "Which rollout window should payments-gateway 5.3.0 use?"
HEADER = "Window"
WINDOW_RE = r"-\s*id:\s*(RW-[A-Z0-9-]+)\s*\n\s*when:\s*([^\n#]+)"
#: A file tool's line-number gutter (Claude Code ``Read``: ``     7\t<line>``), removed before parsing.
#: A file tool's line-number gutter: Claude Code "     7\t", DeepSeek 0.2.x "7: ", arrows and bars
#: (the E7 policies' form).
GUTTER_RE = r"(?m)^\s*\d+(?:→|\t|:|\s*\|)\s?"
ASK_NAME_RE = re.compile(
    r"(?i)\b(AskUserQuestion|ask_user_question|ask_user|request_user_input|ask_followup_question|ask_human"
    r"|ask_question)\b")
SEARCH_TOOLS = ("tool_search",)


def _labels(windows):
    return [f"{wid} ({when})" for wid, when in windows]


def _choices(windows):
    return [{"label": label, "description": f"Roll out in window {wid}."}
            for (wid, _), label in zip(windows, _labels(windows))]


def _structured(tool, windows):
    """Arguments of a ``{questions: [...]}`` multiple-choice tool, shaped for ``tool``."""
    q = {"question": QUESTION, "header": HEADER, "options": _choices(windows)}
    if tool == "AskUserQuestion":
        q["multiSelect"] = False
        return {"questions": [q]}
    if tool == "request_user_input":
        return {"questions": [{"id": "rollout_window", **q}]}
    # OpenClaw ask_user: questions[{id, header, question, options, multiSelect}], timeoutSeconds >= 30
    return {"questions": [{"id": "rollout_window", **q, "multiSelect": False}], "timeoutSeconds": 30}


def ask(turn, windows):
    """Ask the multiple-choice question; returns the observation of the answer (or of absence)."""
    names = set(turn.tool_names)
    if "ask_user" in names:
        return (yield native_tool("ask_user", {"question": QUESTION, "options": _labels(windows)}))
    for tool in ("AskUserQuestion", "request_user_input"):
        if tool in names:
            return (yield native_tool(tool, _structured(tool, windows)))
    generic = any(ASK_NAME_RE.fullmatch(n.split("/")[-1]) for n in names)
    search = next((t for t in SEARCH_TOOLS if t in names), None)
    if not generic and search is not None and "tool_call" in names:
        found = yield native_tool(search, {"query": "ask the user a question"})
        match = ASK_NAME_RE.search(found.text or "") if found.ok else None
        if match is not None:
            return (yield native_tool("tool_call", {"id": match.group(1), "args": _structured(match.group(1), windows)}))
    return (yield ask_user(QUESTION, options=_labels(windows)))


def pick(answer_text, windows):
    """The one window the answer names (by id, else by its day), or None."""
    text = answer_text or ""
    by_id = [wid for wid, _ in windows if wid in text]
    if len(by_id) == 1:
        return by_id[0]
    if by_id:
        return None
    by_day = [wid for wid, when in windows if re.search(rf"(?i)\b{re.escape(when.split()[0])}\b", text)]
    return by_day[0] if len(by_day) == 1 else None


def label_of(wid, windows):
    return next(label for (w, _), label in zip(windows, _labels(windows)) if w == wid)


def policy(turn):
    spec = yield read_file("release.yaml")
    text = re.sub(GUTTER_RE, "", spec.text or "")
    windows = [(wid, when.strip()) for wid, when in re.findall(WINDOW_RE, text)]
    if not windows:
        yield write_file("rollout.json", json.dumps({"service": "payments-gateway", "version": "5.3.0",
                                                     "window": None, "choice": None}))
        yield final("I could not read the rollout windows from release.yaml, so rollout.json has window null.")
        return
    ans = yield from ask(turn, windows)
    window = None if (ans.absent or ans.is_error or not ans.ok) else pick(ans.text, windows)
    body = {"service": "payments-gateway", "version": "5.3.0", "window": window,
            "choice": label_of(window, windows) if window else None}
    yield write_file("rollout.json", json.dumps(body))
    if ans.absent:
        yield final("I have no tool to ask you with, so I could not learn the rollout window: "
                    "rollout.json has window null.")
    elif window is None:
        yield final("Your answer did not reach me naming one rollout window, so rollout.json has window null.")
    else:
        yield final(f"rollout.json written with window {window}.")
