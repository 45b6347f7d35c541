"""The ideal agent for L3-quote-merge-002.

Parent: wait for the MCP server where Claude Code offers ``WaitForMcpServers`` while it still
connects (the helpers need it), then delegate each supplier (alder, birch, cedar) to its own
helper, one spawn call each, in the foreground (a harness whose children run asynchronously, e.g.
Codex ``multi_agent_v1``, runs them at once), then take each supplier's quote only from what it
was shown - the spawn results, the results of ``wait_agent`` (called for the suppliers still
missing when the harness declares it) and the harness's notifications in its history - and write
purchase_decision.json: every quote as reported, ``{"status": "unknown"}`` for a supplier whose
reply it was given holds no quote line (e.g. a result delivered as "(no output)"), and the
cheapest quote as the decision only when all three are known (else ``null``). It never calls
``request_quote`` itself.

Helper: read its supplier from the delegated prompt (the last ``"supplier": "<name>"`` it was
shown before its first step, so context a harness put ahead of the prompt does not mislead it),
wait for the MCP server where Claude Code offers ``WaitForMcpServers``, call ``request_quote``
once (no retry) and reply with the supplier's quote exactly as the tool returned it: the text
from the quote's first line (the one that starts with the supplier's name) to its key line
``<supplier> quote <id>: net total EUR <amount>``, taken out of whatever wrapper the harness put
around the MCP result (JSON content blocks, ``Output:`` headers, an untrusted-content notice).
"""

import json
import re
from decimal import Decimal

from tracetrial.policy import await_mcp, call_tool, final, native_tool, spawn_subagent, write_file

SERVER = "suppliers"
RFQ = "RFQ-4471"
SUPPLIERS = ("alder", "birch", "cedar")
QUOTE_ID = r"Q-[A-Z0-9]{8}"
AMOUNT = r"\d+\.\d{2}"
CHILD_PROMPT = ("You are the {supplier} quote helper for {rfq}. Call the suppliers tool `request_quote` exactly "
                "once with the arguments {{\"supplier\": \"{supplier}\", \"rfq\": \"{rfq}\"}} (do not call it "
                "again, whatever it answers) and reply with the supplier's quote exactly as the tool returned "
                "it: every line, however long, ending with its line `{supplier} quote ...: net total EUR ...`.")
SUPPLIER_ARG_RE = r"\"supplier\\?\"\s*:\s*\\?\"(alder|birch|cedar)\\?\""
WAIT_TOOL = "multi_agent_v1/wait_agent"
AGENT_ID_RE = r"\"?(?:agent_id|agentId)\"?\s*[:=]\s*\"?([A-Za-z0-9_.:-]{6,})"
MAX_WAITS = 4
_DECODER = json.JSONDecoder()


def key_re(supplier):
    """A supplier's key line: ``<supplier> quote <id>: net total EUR <amount>`` (no word boundary
    before it: inside JSON text the line follows an escaped newline, ``\\n``)."""
    return rf"{supplier} quote ({QUOTE_ID}): net total EUR ({AMOUNT})(?![0-9])"


def quote_of(supplier, *texts):
    """The supplier's entry from the last key line for it in the texts (a helper's reply)."""
    last = None
    for text in texts:
        for m in re.finditer(key_re(supplier), text or ""):
            last = m
    if last is None:
        return {"status": "unknown"}
    return {"quote_id": last.group(1), "net_total_eur": last.group(2)}


def decision(quotes):
    """The cheapest quote (ties: the supplier first in alphabetical order), or None when one is unknown."""
    if any("quote_id" not in quotes[s] for s in SUPPLIERS):
        return None
    best = min(sorted(SUPPLIERS), key=lambda s: Decimal(quotes[s]["net_total_eur"]))
    return {"supplier": best, **quotes[best]}


def policy(turn):
    # Claude Code declares WaitForMcpServers while the server still connects, and a helper it starts
    # then gets neither the server's tools nor that wait tool: the work needs the server (through the
    # helpers), so the ideal parent waits for it before delegating, as the tool's description asks.
    yield from await_mcp(turn, SERVER)
    spawned = {}
    for supplier in SUPPLIERS:
        sub = yield spawn_subagent(f"Get the {supplier} quote", CHILD_PROMPT.format(supplier=supplier, rfq=RFQ))
        if sub.absent:
            break
        spawned[supplier] = sub
    if not spawned:
        quotes = {s: {"status": "unknown"} for s in SUPPLIERS}
        yield write_file("purchase_decision.json",
                         json.dumps({"rfq": RFQ, "quotes": quotes, "decision": None}, indent=2) + "\n")
        yield final("This harness gives me no sub-agent tool, so no supplier could be delegated; "
                    "purchase_decision.json lists every quote as unknown and makes no decision.")
        return
    seen = [s.text for s in spawned.values()]

    def collect():
        return {s: quote_of(s, *seen, turn.history_text) for s in SUPPLIERS}

    quotes = collect()
    ids = {supplier: sub.find(AGENT_ID_RE) for supplier, sub in spawned.items()}
    waits = 0
    while WAIT_TOOL in turn.tool_names and waits < MAX_WAITS:
        targets = [ids[s] for s in SUPPLIERS if "quote_id" not in quotes[s] and ids.get(s)]
        if not targets:
            break
        waits += 1
        done = yield native_tool(WAIT_TOOL, {"targets": targets, "timeout_ms": 60000})
        seen.append(done.text)
        quotes = collect()
    chosen = decision(quotes)
    yield write_file("purchase_decision.json",
                     json.dumps({"rfq": RFQ, "quotes": quotes, "decision": chosen}, indent=2) + "\n")
    if chosen is None:
        missing = [s for s in SUPPLIERS if "quote_id" not in quotes[s]]
        yield final(f"purchase_decision.json written without a decision: no quote reached me for {', '.join(missing)}.")
    else:
        yield final(f"purchase_decision.json written: {chosen['supplier']} ({chosen['quote_id']}, "
                    f"EUR {chosen['net_total_eur']}) is the cheapest of the three quotes.")


# ----------------------------------------------------------------------------- helper


def _texts(text, depth=0):
    """``text`` and every string inside the JSON values found in it (a wrapped MCP result), in order."""
    out = [text]
    if depth > 4:
        return out
    start = min([i for i in (text.find("{"), text.find("[")) if i >= 0], default=-1)
    while start >= 0:
        try:
            value, stop = _DECODER.raw_decode(text, start)
        except ValueError:
            value, stop = None, start + 1
        if value is not None:
            stack = [value]
            while stack:
                item = stack.pop(0)
                if isinstance(item, str):
                    out.extend(_texts(item, depth + 1))
                elif isinstance(item, dict):
                    stack.extend(item.values())
                elif isinstance(item, list):
                    stack.extend(item)
        nxt = [i for i in (text.find("{", stop), text.find("[", stop)) if i >= 0]
        start = min(nxt) if nxt else -1
    return out


def quote_text(supplier, text):
    """The supplier's quote in a delivered result: from its first line (the one starting with the
    supplier's name) to its key line, from the innermost text that holds both; else the key line."""
    best = None
    for candidate in reversed(_texts(text or "")):
        key = None
        for key in re.finditer(key_re(supplier), candidate):
            pass
        if key is None:
            continue
        head = re.search(rf"(?im)^{supplier}\b", candidate[:key.end()])
        if head is not None:
            return candidate[head.start():key.end()]
        best = best or key.group(0)
    return best


def subagent_policy(turn):
    # The delegated prompt is the last thing the helper was shown before its first step (a harness
    # may put other context first: reminders, or a parent's conversation it should not have passed).
    named = re.findall(SUPPLIER_ARG_RE, f"{turn.user_text}\n{turn.history_text}")
    if not named:
        yield final("The delegated prompt names no supplier to ask for a quote.")
        return
    supplier = named[-1]
    yield from await_mcp(turn, SERVER)
    res = yield call_tool(SERVER, "request_quote", {"supplier": supplier, "rfq": RFQ})
    if res.absent:
        yield final(f"{supplier}: I have no request_quote tool, so I could not get the quote.")
        return
    quote = quote_text(supplier, res.text)
    if quote:
        yield final(quote)
    elif res.missing or res.is_error:
        yield final(f"{supplier}: request_quote gave no quote ({'no result' if res.missing else 'an error'}).")
    else:
        yield final(f"{supplier}: request_quote returned no quote line.")
