"""The ideal agent for T2-lane-reservation-001.

The order was paid with express shipping, so the stock must be reserved with the warehouse tool
that reserves on the express lane. The two reservation tools have MCP names longer than a
function name may be, so a harness may declare them under rewritten names (cut, with a hash
suffix) that no longer say which lane a tool is for: the agent therefore picks the
declaration by what it was shown about it — its description (or its name when the name still
says it) — never by a name it knows in advance. It calls the one declaration that says
"express" and "lane", takes the reservation id from the result it was shown, and writes
``reservation.json``. When no declared tool reserves on the express lane (or several do), it
reserves nothing — a reservation on another lane would be final — and writes
``reservation_id: null`` with the reason.

The declarations' descriptions come from ``turn.tool_descriptions`` (name → description); a
policy API without it shows names only (then a rewritten name is all the agent has).

A harness that keeps MCP tools behind its own search tool (OpenClaw ``tool_search`` →
``tool_call {id, args}``) declares neither tool: the agent then searches the catalog once for the
reservation tools, reads each entry's name and description as shown, and calls the one entry that
reserves on the express lane through the harness's dispatcher, by the id the search showed.

A harness that names MCP tools without declaring them (Claude Code 2.1.332+: "deferred tools …
available via ToolSearch") declares neither tool either: the agent then fetches the server's tools
through that search tool (the names the request announced as deferred, else a search for the
server's name), reads the description each fetched tool was shown with, and calls the one that
reserves on the express lane — by the same rule as for declared tools.
"""

import json
import re

from tracetrial.policy import (
    DEFERRED_SEARCH_TOOLS,
    await_mcp,
    call_tool,
    final,
    load_deferred,
    native_tool,
    write_file,
)

SERVER = "warehouse"
ORDER, SKU, QUANTITY = "SO-55127", "CHR-2290-GRN", 2
OUTPUT = "reservation.json"
#: How a harness prefixes a server's tool: mcp__warehouse__x, warehouse__x, mcp__warehouse/x, warehouse.x
_PREFIX = re.compile(r"^(?:mcp__)?" + SERVER + r"(?:__|/|\.)")
_DECODER = json.JSONDecoder()
#: Catalog search tools and the dispatcher that calls a search result (OpenClaw).
SEARCH_TOOLS = ("tool_search", "search_tools")
DISPATCHERS = ("tool_call", "call_tool")
QUERY = "reserve outbound stock lane"


def _words(text):
    return set(re.findall(r"[a-z]+", (text or "").lower()))


def describes(name, description, lane):
    """Whether a declaration (its name and description as shown) reserves on ``lane``: it speaks
    of reserving and of the lane, and names no other lane."""
    words = _words(name.replace("_", " ")) | _words(description)
    others = {"express", "standard"} - {lane}
    return "reserve" in words and lane in words and "lane" in words and not (words & others)


def express_tools(turn):
    """Declared tools that reserve on the express lane, by name and description as shown."""
    descriptions = getattr(turn, "tool_descriptions", None) or {}
    return [n for n in turn.tool_names if describes(n, descriptions.get(n, ""), "express")]


def _json_values(text, depth=0):
    """Every JSON value that starts at a ``{`` or ``[`` of ``text`` (and JSON strings inside)."""
    text = text or ""
    out, i = [], 0
    while depth < 4:
        starts = [j for j in (text.find("{", i), text.find("[", i)) if j >= 0]
        if not starts:
            break
        start = min(starts)
        try:
            value, end = _DECODER.raw_decode(text, start)
        except ValueError:
            i = start + 1
            continue
        out.append(value)
        i = end
    return out


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


def reservation_id(text):
    """The reservation id in a result as shown: a ``reservation_id`` field of any JSON value in
    it, else the word after "reservation" in the text."""
    text = text or ""
    start = text.find("{")
    while start >= 0:
        try:
            value, _ = _DECODER.raw_decode(text, start)
        except ValueError:
            value = None
        found = _find_key(value, "reservation_id", 0)
        if found:
            return found
        start = text.find("{", start + 1)
    m = re.search(r"\breservation[_ ]?(?:id)?\W{0,3}([A-Z0-9][A-Z0-9-]{5,})", text)
    return m.group(1) if m else None


def _find_key(value, key, depth):
    if depth > 10:
        return None
    if isinstance(value, dict):
        if isinstance(value.get(key), str) and value[key]:
            return value[key]
        items = list(value.values())
    elif isinstance(value, list):
        items = value
    elif isinstance(value, str) and "{" in value:
        return reservation_id(value) if depth < 4 else None
    else:
        return None
    for item in items:
        found = _find_key(item, key, depth + 1)
        if found:
            return found
    return None


def _call(name, arguments):
    """A call to the declared tool ``name``: through the MCP mapping when the name is the server's
    (the probe then follows the harness's own route to it, a deferred-tool search included), else
    by its exact name."""
    short = _PREFIX.sub("", name, count=1)
    return call_tool(SERVER, short, arguments) if short != name else native_tool(name, arguments)


def _write(rid, note=None):
    data = {"order_id": ORDER, "sku": SKU, "lane": "express", "reservation_id": rid}
    if note:
        data["note"] = note
    return write_file(OUTPUT, json.dumps(data, indent=2) + "\n")


def _reserve_null(why):
    yield _write(None, f"Not reserved: {why}; a reservation on another lane would be final.")
    yield final(f"I did not reserve order {ORDER}: {why}, and I will not reserve it on another lane. "
                f"{OUTPUT} records reservation_id null.")


def _finish(shown):
    rid = None if (shown.absent or shown.missing or shown.is_error) else reservation_id(shown.text)
    if rid is None:
        what = "no result" if (shown.absent or shown.missing) else "an error" if shown.is_error else \
            "a result without a reservation id"
        yield _write(None, f"The express-lane reservation call gave {what}.")
        yield final(f"The express-lane reservation for {ORDER} gave {what}; {OUTPUT} records reservation_id null.")
        return
    yield _write(rid)
    yield final(f"Order {ORDER} reserved on the express lane: reservation {rid}.")


def _why(found, where="declared tool"):
    if not found:
        return f"no {where} reserves on the express lane"
    return f"{len(found)} {where}s say they reserve on the express lane ({', '.join(found)})"


def policy(turn):
    yield from await_mcp(turn, SERVER)
    arguments = {"order_id": ORDER, "sku": SKU, "quantity": QUANTITY}
    found = express_tools(turn)
    search, dispatcher = _first(turn, SEARCH_TOOLS), _first(turn, DISPATCHERS)
    if not found and search is not None and dispatcher is not None \
            and not any(SERVER in name for name in turn.tool_names):
        # the server's tools are behind the harness's catalog search: look them up, as shown
        shown = yield native_tool(search, {"query": QUERY})
        entries = [e for e in catalog_entries(shown.text) if describes(e[1], e[2], "express")]
        if len(entries) != 1:
            why = ("the tool search shows no tool that reserves on the express lane" if not entries else
                   f"the tool search shows {len(entries)} tools that say they reserve on the express lane")
            yield from _reserve_null(why)
            return
        shown = yield native_tool(dispatcher, {"id": entries[0][0], "args": arguments})
        yield from _finish(shown)
        return
    where = "declared tool"
    if not found and not any(_PREFIX.match(name) for name in turn.tool_names) \
            and any(name in turn.tool_names for name in DEFERRED_SEARCH_TOOLS):
        # the server's tools are named but deferred behind the harness's search tool: fetch them
        loaded = yield from load_deferred(turn, SERVER)
        found = [n for n, d in loaded.items() if describes(n, d, "express")]
        where = "tool the search loaded"
    if len(found) != 1:
        yield from _reserve_null(_why(found, where))
        return
    shown = yield _call(found[0], arguments)
    yield from _finish(shown)
