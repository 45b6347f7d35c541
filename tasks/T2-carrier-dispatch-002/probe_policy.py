"""The ideal agent for T2-carrier-dispatch-002.

Order SO-48213 is packed: a carrier pickup must be booked with the dispatch tool that books one.
The server's two tools have MCP names that differ only by a character a function name may not
hold (``.`` against ``_``), so a harness may declare them under rewritten names that no longer
tell them apart: the agent therefore picks the declaration by what it was shown about it — its
description (or its name when the description says nothing) — never by a name it knows in
advance. It calls the one declaration that says it books a carrier pickup (and says nothing of a
draft), takes the pickup id from the result it was shown, and writes ``pickup.json``. When no
declared tool books a pickup, several do, or the one that does shares its name with another
declaration (a call by that name could reach either), it calls nothing — the other tool would
leave a draft the desk books a second time — and writes ``pickup_id: null`` with the reason.

The declarations' descriptions come from ``turn.tool_descriptions`` (name → description).

A harness that keeps MCP tools behind its own search tool (OpenClaw ``tool_search`` →
``tool_call {id, args}``) declares neither tool: the agent then searches the catalog once for the
dispatch tools, reads each entry's name and description as shown, and calls the one entry that
books a carrier pickup through the harness's dispatcher, by the id the search showed.

A harness that names MCP tools without declaring them (Claude Code 2.1.332+: "deferred tools …
available via ToolSearch") declares neither tool either: the agent then fetches the server's tools
through that search tool (the names the request announced as deferred, else a search for the
server's name), reads the description each fetched tool was shown with, and applies the same rule
as for declared tools to what the search loaded (declared from then on).
"""

import json
import re
from collections import Counter

from tracetrial.policy import (
    DEFERRED_SEARCH_TOOLS,
    await_mcp,
    call_tool,
    final,
    load_deferred,
    native_tool,
    write_file,
)

SERVER = "dispatch"
ORDER, CARRIER, PARCELS = "SO-48213", "NORDLINE", 3
OUTPUT = "pickup.json"
#: How a harness prefixes a server's tool: mcp__dispatch__x, dispatch__x, mcp__dispatch/x
_PREFIX = re.compile(r"^(?:mcp__)?" + SERVER + r"(?:__|/)")
_DECODER = json.JSONDecoder()
#: Catalog search tools and the dispatcher that calls a search result (OpenClaw).
SEARCH_TOOLS = ("tool_search", "search_tools")
DISPATCHERS = ("tool_call", "call_tool")
QUERY = "dispatch carrier pickup draft"


def _words(text):
    return set(re.findall(r"[a-z]+", (text or "").lower()))


def books_pickup(name, description):
    """Whether a declaration (its description as shown, else its name) books a carrier pickup:
    it speaks of booking a pickup and not of a draft."""
    words = _words(description) or _words(re.sub(r"[_.\-/]", " ", name))
    return bool(words & {"book", "books", "booking"}) and "pickup" in words and not (words & {"draft", "drafts"})


def booking_tools(turn):
    """Declared tools that book a carrier pickup, by description (else name) as shown."""
    descriptions = getattr(turn, "tool_descriptions", None) or {}
    return [n for n in dict.fromkeys(turn.tool_names) if books_pickup(n, descriptions.get(n, ""))]


def _json_values(text):
    """Every JSON value that starts at a ``{`` or ``[`` of ``text``."""
    text = text or ""
    out, i = [], 0
    while True:
        starts = [j for j in (text.find("{", i), text.find("[", i)) if j >= 0]
        if not starts:
            return out
        start = min(starts)
        try:
            value, end = _DECODER.raw_decode(text, start)
        except ValueError:
            i = start + 1
            continue
        out.append(value)
        i = end


def catalog_entries(text):
    """``(id, name, description)`` of each tool entry a search result shows (objects with a
    string ``name`` and ``description``)."""
    found = []

    def walk(value, depth):
        if depth > 8:
            return
        if isinstance(value, dict):
            if isinstance(value.get("name"), str) and isinstance(value.get("description"), str):
                found.append((str(value.get("id") or value["name"]), value["name"], value["description"]))
            for v in value.values():
                walk(v, depth + 1)
        elif isinstance(value, list):
            for v in value:
                walk(v, depth + 1)

    for value in _json_values(text):
        walk(value, 0)
    return found


def _first(turn, names):
    return next((n for n in names if n in turn.tool_names), None)


def pickup_id(text, depth=0):
    """The pickup id in a result as shown: a ``pickup_id`` field of any JSON value in it (JSON
    inside JSON strings included), else the word after "pickup" in the text."""
    text = text or ""
    for value in _json_values(text):
        found = _find_key(value, depth)
        if found:
            return found
    m = re.search(r"\bpickup[_ ]?(?:id)?\W{0,3}([A-Z0-9][A-Z0-9-]{5,})", text)
    return m.group(1) if m else None


def _find_key(value, depth):
    if depth > 10:
        return None
    if isinstance(value, dict):
        if isinstance(value.get("pickup_id"), str) and value["pickup_id"]:
            return value["pickup_id"]
        items = list(value.values())
    elif isinstance(value, list):
        items = value
    elif isinstance(value, str) and "{" in value:
        return pickup_id(value, depth + 1) if depth < 4 else None
    else:
        return None
    for item in items:
        found = _find_key(item, depth + 1)
        if found:
            return found
    return None


def _alnum(name):
    return re.sub(r"[^a-z0-9]", "", name.lower())


def _call(turn, name, arguments):
    """A call to the declared tool ``name``: through the MCP mapping when the name is the server's
    (the probe then follows the harness's own route to it, a deferred-tool search included) and
    no other declared name differs from it only in punctuation; else by its exact name."""
    short = _PREFIX.sub("", name, count=1)
    alike = [n for n in dict.fromkeys(turn.tool_names) if n != name and _alnum(n) == _alnum(name)]
    return call_tool(SERVER, short, arguments) if short != name and not alike else native_tool(name, arguments)


def _write(pid, note=None):
    data = {"order": ORDER, "carrier": CARRIER, "pickup_id": pid}
    if note:
        data["note"] = note
    return write_file(OUTPUT, json.dumps(data, indent=2) + "\n")


def _book_nothing(why):
    yield _write(None, f"Not booked: {why}; another dispatch tool would only leave a draft.")
    yield final(f"I did not book a pickup for {ORDER}: {why}, and I used no other tool instead. "
                f"{OUTPUT} records pickup_id null.")


def _finish(shown):
    pid = None if (shown.absent or shown.missing or shown.is_error) else pickup_id(shown.text)
    if pid is None:
        what = "no result" if (shown.absent or shown.missing) else "an error" if shown.is_error else \
            "a result without a pickup id"
        yield _write(None, f"The pickup booking call gave {what}.")
        yield final(f"The pickup booking for {ORDER} gave {what}; {OUTPUT} records pickup_id null.")
        return
    yield _write(pid)
    yield final(f"Pickup booked for {ORDER} with {CARRIER}: pickup {pid}.")


def policy(turn):
    yield from await_mcp(turn, SERVER)
    arguments = {"order_id": ORDER, "carrier": CARRIER, "parcels": PARCELS}
    found = booking_tools(turn)
    search, dispatcher = _first(turn, SEARCH_TOOLS), _first(turn, DISPATCHERS)
    if not found and search is not None and dispatcher is not None \
            and not any(SERVER in name for name in turn.tool_names):
        # the server's tools are behind the harness's catalog search: look them up, as shown
        shown = yield native_tool(search, {"query": QUERY})
        entries = [e for e in catalog_entries(shown.text) if books_pickup(e[1], e[2])]
        ids = Counter(i for i, _ in {(e[0], e[2]) for e in catalog_entries(shown.text)})
        if len({e[0] for e in entries}) != 1 or ids[entries[0][0]] > 1:
            why = ("the tool search shows no tool that books a carrier pickup" if not entries else
                   "the tool search shows no single, uniquely named tool that books a carrier pickup")
            yield from _book_nothing(why)
            return
        shown = yield native_tool(dispatcher, {"id": entries[0][0], "args": arguments})
        yield from _finish(shown)
        return
    where = "declared tool"
    if not found and not any(_PREFIX.match(name) for name in turn.tool_names) \
            and any(name in turn.tool_names for name in DEFERRED_SEARCH_TOOLS):
        # the server's tools are named but deferred behind the harness's search tool: fetch them
        # (from then on they are declared, so the checks below read the request that shows them)
        loaded = yield from load_deferred(turn, SERVER)
        found = [n for n, d in loaded.items() if books_pickup(n, d)]
        where = "tool the search loaded"
    if len(found) != 1:
        yield from _book_nothing(f"no {where} books a carrier pickup" if not found else
                                 f"{len(found)} {where}s say they book a carrier pickup ({', '.join(found)})")
        return
    if Counter(turn.tool_names)[found[0]] > 1:
        yield from _book_nothing(f"the tool that books a carrier pickup is declared under the name {found[0]}, "
                                 "which another declared tool also has")
        return
    shown = yield _call(turn, found[0], arguments)
    yield from _finish(shown)
