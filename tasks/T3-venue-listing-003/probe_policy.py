"""The ideal agent for T3-venue-listing-003.

It asks the CMS for the approved draft (``get_draft``), takes the draft object out of the result
it was shown (parsed as JSON, so every character, control character, null, absent key, empty
container and nesting level is exactly as shown), sends that object unchanged as the
``publish_listing`` arguments, and writes the per-section confirmations it was shown (``null``
for a held section) into published.json. Nothing is assumed: every value comes from an
observation; if the draft cannot be read, nothing is published.

Harnesses wrap MCP results differently (plain JSON, ``Output:`` headers, a JSON document whose
text parts hold the result as an escaped string, an untrusted-content notice), so the object is
searched for in every JSON value of the text, and inside JSON strings found there.
"""

import json

from tracetrial.policy import await_mcp, call_tool, final, write_file

SECTIONS = ("contact", "display", "notice", "hours", "options")
_DECODER = json.JSONDecoder()


def _walk(value, want, depth=0):
    if depth > 12:
        return None
    if isinstance(value, dict):
        if want(value):
            return value
        items = list(value.values())
    elif isinstance(value, list):
        items = value
    elif isinstance(value, str):
        return find_object(value, want, depth + 1)
    else:
        return None
    for item in items:
        found = _walk(item, want, depth + 1)
        if found is not None:
            return found
    return None


def find_object(text, want, depth=0):
    """The first JSON object satisfying ``want`` in ``text`` (also inside JSON strings in it)."""
    text = text or ""
    start = text.find("{")
    while 0 <= start:
        try:
            value, _ = _DECODER.raw_decode(text, start)
        except ValueError:
            value = None
        if value is not None:
            found = _walk(value, want, depth)
            if found is not None:
                return found
        start = text.find("{", start + 1)
    return None


def is_draft(obj):
    return isinstance(obj.get("draft_id"), str) and all(isinstance(obj.get(s), dict) for s in SECTIONS)


def is_publication(obj):
    return isinstance(obj.get("sections"), dict) and any(s in obj["sections"] for s in SECTIONS)


def _failed(res):
    return res.absent or res.missing or bool(res.is_error)


def policy(turn):
    yield from await_mcp(turn, "listings")
    shown = yield call_tool("listings", "get_draft", {})
    draft = None if _failed(shown) else find_object(shown.text, is_draft)
    if draft is None:
        yield write_file("published.json", json.dumps({"draft_id": None, "confirmations": {}}) + "\n")
        yield final("I could not read the approved draft from get_draft; nothing was published.")
        return
    out = yield call_tool("listings", "publish_listing", draft)
    publication = None if (out.absent or out.missing) else find_object(out.text, is_publication)
    sections = (publication or {}).get("sections") or {}
    confirmations = {}
    for name in SECTIONS:
        entry = sections.get(name)
        code = entry.get("confirmation") if isinstance(entry, dict) else None
        confirmations[name] = code if isinstance(code, str) and code else None
    yield write_file("published.json", json.dumps({"draft_id": draft["draft_id"], "confirmations": confirmations},
                                                  ensure_ascii=False, indent=2) + "\n")
    held = [n for n in SECTIONS if confirmations[n] is None]
    if not held:
        yield final(f"Draft {draft['draft_id']} published: every section confirmed "
                    + ", ".join(f"{n} {confirmations[n]}" for n in SECTIONS) + ".")
    else:
        yield final(f"Draft {draft['draft_id']}: not confirmed (held or no answer): {', '.join(held)}. "
                    "published.json records the confirmations the CMS returned.")
