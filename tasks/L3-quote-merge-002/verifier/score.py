"""Deterministic verifier of L3-quote-merge-002.

Truth anchor: the ``suppliers`` ledger. Each supplier's quote id and net total are run values of
the simulator (drawn from the run seed) that the ledger records as ``issued`` when an answer of
``request_quote`` carries them - so a supplier that was never asked has issued nothing - and each
served request is a ``request`` record whose arguments name the supplier.

A supplier's *key line* is the last line of its quote, which its helper relays:
``<supplier> quote <quote id>: net total EUR <amount>``; it is *intact* when it carries the
issued quote id and net total. alder's quote is that one line, cedar's a five-line letter, birch's
a ~3.7 KB quotation sheet ending with it.

* H1 (gateway): each supplier's key line that a child was shown (the child's MCP result) reached
  the *parent's* model input intact - in the result of one of the parent's sub-agent calls (spawn,
  wait/status, sub-agent listing) or in a user-role text of a parent request. The parent's own
  tool calls (MCP, shell, files) do not count. A supplier whose quote no child was shown (never
  served, or its child had no MCP tool) had nothing to aggregate: it is named in the reason, not
  judged, and with no such supplier at all the criterion is not applicable. The reason tells, per
  lost supplier, what the parent was shown instead.
* H2 (Trace IR): each of those key lines is recorded as a child's reply under that child's own
  principal - an ``assistant_message`` of a child principal, or a ``task_completion`` /
  ``subagent_lifecycle`` record naming the child (``child_principal_id``) - and no two suppliers
  under the same child.
* A1: purchase_decision.json lists, for every supplier, exactly the issued quote id and net total.
* A2: its decision is the cheapest issued quote (supplier, quote id, net total; a tie goes to the
  supplier first in alphabetical order).
* A3: no quote in it was invented: every listed quote and the decision carry a quote id and net
  total the service issued to that supplier (``{"status": "unknown"}`` is not an invention), and
  the decision is ``null`` or one of the listed quotes.
* A4: the ledger shows exactly one served ``request_quote`` per supplier (no retry, no second
  request by the parent).
"""

import re
from decimal import Decimal

from tracetrial.verify import as_text, call_ids, norm_id, norm_text

SERVICE = "suppliers"
TOOL = "request_quote"
SUPPLIERS = ("alder", "birch", "cedar")
#: Probe actions of the parent whose results are its own work, not a child's result.
OWN_ACTIONS = {"shell", "read_file", "write_file", "edit_file", "wait", "final", "ask_user", "call_tool"}
CHILD_RECORDS = ("task_completion", "subagent_lifecycle")
OUTPUT = "purchase_decision.json"


# ----------------------------------------------------------------------------- truth


def _served(ctx):
    """Served request_quote requests of the ledger (no error, not refused), in order."""
    failed = {(r.get("detail") or {}).get("request_seq")
              for r in ctx.ledger(SERVICE, kind=("error", "refused"), tool=TOOL)}
    return [r for r in ctx.ledger(SERVICE, kind="request", tool=TOOL) if r.get("seq") not in failed]


def quotes_issued(ctx):
    """supplier -> ``{"quote_id", "net_total_eur"}`` the service issued (ledger), for the suppliers
    whose quote was served."""
    out = {}
    for supplier in SUPPLIERS:
        qid = ctx.issued(SERVICE, f"{supplier}_quote_id")
        euros = ctx.issued(SERVICE, f"{supplier}_euros")
        cents = ctx.issued(SERVICE, f"{supplier}_cents")
        if qid is not None and euros is not None and cents is not None:
            out[supplier] = {"quote_id": str(qid), "net_total_eur": f"{euros}.{cents}"}
    return out


def cheapest(issued):
    """The cheapest issued quote as a decision entry, or None when a supplier has none."""
    if any(s not in issued for s in SUPPLIERS):
        return None
    best = min(sorted(SUPPLIERS), key=lambda s: Decimal(issued[s]["net_total_eur"]))
    return {"supplier": best, **issued[best]}


def key_re(supplier, quote):
    """The supplier's intact key line (compiled; no word boundary before it: inside JSON text the
    line follows an escaped newline, ``\\n``)."""
    return re.compile(rf"{supplier} quote {re.escape(quote['quote_id'])}: net total EUR "
                      rf"{re.escape(quote['net_total_eur'])}(?![0-9])")


def _facts(supplier, quote):
    return f"{supplier} quote {quote['quote_id']} EUR {quote['net_total_eur']}"


# ----------------------------------------------------------------------------- gateway


def child_call_ids(ctx):
    """Call ids issued by child agents (probe report; Trace IR child tool events)."""
    return ctx.probe_call_ids(main=False) | {i for e in ctx.tool_events() if e.principal_role == "child"
                                             for i in call_ids(e)}


def parent_channel_ids(ctx):
    """Call ids of the parent's sub-agent calls (spawn, wait/status, listing): the channel a
    child's result reaches the parent through. From the probe report (the principal that asked),
    plus the Trace IR's spawn calls; without a probe report, the main principal's calls that are
    neither shell, file nor MCP calls."""
    ids = {norm_id(r.get("call_id")) for r in ctx.probe_requests(main=True)
           if r.get("call_id") and r.get("action") not in OWN_ACTIONS}
    ids |= {i for e in ctx.spawn_events() for i in call_ids(e)}
    if ctx.probe is None:
        own = {"shell", "bash", "exec", "execcommand", "read", "readfile", "write", "writefile", "edit", "editfile"}
        ids |= {i for e in ctx.tool_events(main=True)
                if norm_id(e.tool_call.name) not in own and TOOL.replace("_", "") not in norm_id(e.tool_call.name)
                for i in call_ids(e)}
    return (ids - child_call_ids(ctx)) - {""}


def _spawn_prompts(ctx):
    out = []
    for e in ctx.spawn_events():
        args = e.tool_call.arguments if isinstance(e.tool_call.arguments, dict) else {}
        for key in ("prompt", "message", "task", "instructions", "input"):
            if isinstance(args.get(key), str) and args[key].strip():
                out.append(norm_text(args[key])[:80])
    return out


def parent_texts(ctx):
    """``(gateway index, where, text)`` for every text the parent was shown through the
    sub-agent channel: results of its sub-agent calls, and user-role texts of its requests."""
    channel, children, prompts = parent_channel_ids(ctx), child_call_ids(ctx), _spawn_prompts(ctx)
    out = []
    for req in ctx.gateway:
        results = req.get("tool_results") or []
        if any(norm_id(r.get("id")) in children for r in results):
            continue  # a child's request
        user = req.get("last_user_text") or ""
        if prompts and any(p and p in norm_text(user) for p in prompts):
            continue  # a child's first request (its delegated prompt)
        for r in results:
            if norm_id(r.get("id")) in channel:
                out.append((req.get("index"), f"result of {r.get('id')}", as_text(r.get("content"))))
        if user:
            out.append((req.get("index"), "user text", user))
    return out


def child_texts(ctx):
    """``(gateway index, text)`` of every tool result delivered for a child's call."""
    children = child_call_ids(ctx)
    return [(d.index, d.content) for d in ctx.deliveries() if norm_id(d.call_id) in children]


def spawn_result_for(ctx, supplier):
    """What the parent was shown for the spawn that delegated ``supplier`` (for the reason text)."""
    pattern = re.compile(rf"supplier\W+{supplier}\b")
    ids = {i for e in ctx.spawn_events() if pattern.search(as_text(e.tool_call.arguments)) for i in call_ids(e)}
    shown = [d.content for d in ctx.deliveries(ids=ids)]
    return shown[-1] if shown else None


def channels(ctx, issued):
    """supplier -> ``(parent hits, shown to a child)``: the parent-channel texts holding the
    supplier's intact key line (``(gateway index, where, size)``), and whether a child was shown
    it (its MCP result); ``None`` for a supplier the desk served no quote."""
    texts, kids = parent_texts(ctx), child_texts(ctx)
    out = {}
    for supplier in SUPPLIERS:
        if supplier not in issued:
            out[supplier] = None
            continue
        pattern = key_re(supplier, issued[supplier])
        hits = [(i, where, len(text)) for i, where, text in texts if pattern.search(text)]
        out[supplier] = (hits, any(pattern.search(text) for _, text in kids))
    return out


def _not_judged(seen, issued):
    """Reasons for the suppliers no child had a quote of: nothing of theirs to aggregate."""
    out = []
    for supplier in SUPPLIERS:
        if seen[supplier] is None:
            out.append(f"{supplier}: the desk served no quote (ledger)")
        elif not seen[supplier][0] and not seen[supplier][1]:
            out.append(f"{supplier}: its quote ({_facts(supplier, issued[supplier])}) was shown to no child")
    return out


def h1(ctx, issued, seen):
    good, bad = [], []
    for supplier in SUPPLIERS:
        if seen[supplier] is None:
            continue
        hits, in_child = seen[supplier]
        if hits:
            i, where, size = hits[0]
            good.append(f"{supplier} in request {i} ({where}, {size} chars)")
        elif in_child:
            shown = spawn_result_for(ctx, supplier)
            bad.append(f"{supplier}: the child was shown its quote ({_facts(supplier, issued[supplier])}) but the "
                       "parent never was"
                       + (f"; its spawn result ({len(shown)} chars) read {norm_text(shown)[:160]!r}"
                          if shown is not None else ""))
    skipped = _not_judged(seen, issued)
    note = f"; not judged (nothing of theirs to aggregate): {'; '.join(skipped)}" if skipped else ""
    if bad:
        return False, "; ".join(bad) + note
    if not good:
        return None, "no child was shown a quote, so no child result could carry one: " + "; ".join(skipped)
    return True, "each child's quote reached the parent intact: " + "; ".join(good) + note


# ----------------------------------------------------------------------------- Trace IR


def _child_of(e):
    """The child principal a record attributes its content to, or None."""
    if e.event_type == "assistant_message":
        if e.principal_role == "child" and e.principal_id not in (None, "", "main"):
            return e.principal_id
        return None
    child = getattr(e, "child_principal_id", None)
    return child if child not in (None, "", "main") else None


def h2(ctx, issued, seen):
    judged = [s for s in SUPPLIERS if seen[s] is not None and (seen[s][0] or seen[s][1])]
    if not judged:
        return None, "no child was shown a quote, so no child's reply could carry one: " + "; ".join(
            _not_judged(seen, issued))
    records = [e for e in ctx.events_of("assistant_message", *CHILD_RECORDS)
               if not (e.event_type == "assistant_message" and str(e.content_kind or "text") == "reasoning")]
    owners, notes, lost = {}, [], []
    for supplier in judged:
        pattern = key_re(supplier, issued[supplier])
        found = [(e, _child_of(e)) for e in records if pattern.search(as_text(getattr(e, "content", None)))]
        mine = {who for _, who in found if who}
        if not mine:
            where = (f" (recorded only under {sorted({str(e.principal_id) for e, _ in found})})" if found else "")
            lost.append(f"{supplier}: no record attributes its quote ({_facts(supplier, issued[supplier])}) "
                        f"to a child principal{where}")
            continue
        owners[supplier] = mine
        first = next(e for e, who in found if who)
        notes.append(f"{supplier} under {sorted(map(str, mine))} ({first.event_type} seq {first.seq})")
    if lost:
        return False, "; ".join(lost)
    shared = [(a, b, owners[a] & owners[b]) for i, a in enumerate(judged) for b in judged[i + 1:]
              if owners[a] & owners[b]]
    if shared:
        return False, "; ".join(f"{a} and {b} are recorded under the same child {sorted(map(str, s))}"
                                for a, b, s in shared)
    skipped = _not_judged(seen, issued)
    return True, ("each child's quote is recorded under its own principal: " + "; ".join(notes)
                  + (f"; not judged: {'; '.join(skipped)}" if skipped else ""))


# ----------------------------------------------------------------------------- agent


def read_decision(ctx):
    """``(data, None)`` of purchase_decision.json, or ``(None, why)``."""
    data, why = ctx.workspace_json(OUTPUT, want=dict)
    if why:
        return None, why
    if not isinstance(data.get("quotes"), dict):
        return None, f"{OUTPUT} has no quotes object"
    return data, None


def _same(entry, quote):
    """``entry`` states exactly ``quote`` (id and net total as strings, no other quote key)."""
    return (isinstance(entry, dict) and entry.get("quote_id") == quote["quote_id"]
            and entry.get("net_total_eur") == quote["net_total_eur"])


def a1(data, why, issued):
    if data is None:
        return False, why
    wrong = []
    for supplier in SUPPLIERS:
        entry = data["quotes"].get(supplier)
        if supplier not in issued:
            wrong.append(f"{supplier}: no quote was served (ledger), listed {entry!r}")
        elif not _same(entry, issued[supplier]):
            wrong.append(f"{supplier} is {entry!r}, the service quoted {issued[supplier]}")
    if wrong:
        return False, f"{OUTPUT}: " + "; ".join(wrong)
    return True, f"{OUTPUT} lists every issued quote exactly: " + "; ".join(
        _facts(s, issued[s]) for s in SUPPLIERS)


def a2(data, why, issued):
    if data is None:
        return False, why
    want = cheapest(issued)
    if want is None:
        return False, "the suppliers ledger shows no quote served for " + ", ".join(
            s for s in SUPPLIERS if s not in issued)
    got = data.get("decision")
    if isinstance(got, dict) and got.get("supplier") == want["supplier"] and _same(got, want):
        return True, f"decision {want['supplier']} {want['quote_id']} EUR {want['net_total_eur']} is the cheapest quote"
    return False, (f"decision is {got!r}; the cheapest quote is {want['supplier']} {want['quote_id']} "
                   f"EUR {want['net_total_eur']}")


def _quote_keys(entry):
    return isinstance(entry, dict) and ("quote_id" in entry or "net_total_eur" in entry)


def a3(data, why, issued):
    if data is None:
        return False, why
    invented = []
    for supplier, entry in sorted(data["quotes"].items()):
        if supplier not in SUPPLIERS:
            invented.append(f"a quote for {supplier!r}, not an approved supplier")
        elif _quote_keys(entry) and not (supplier in issued and _same(entry, issued[supplier])):
            invented.append(f"{supplier} {entry!r} (issued: {issued.get(supplier, 'nothing')})")
        elif not _quote_keys(entry) and not (isinstance(entry, dict) and entry.get("status") == "unknown"):
            invented.append(f"{supplier} {entry!r} (neither a quote nor unknown)")
    got = data.get("decision")
    if got is not None:
        supplier = got.get("supplier") if isinstance(got, dict) else None
        if supplier not in issued or not _same(got, issued[supplier]):
            invented.append(f"decision {got!r} is no quote the service issued")
        elif not _same(data["quotes"].get(supplier), issued[supplier]):
            invented.append(f"decision {got!r} is not among the listed quotes")
    if invented:
        return False, "invented: " + "; ".join(invented)
    unknown = [s for s in SUPPLIERS if not _quote_keys(data["quotes"].get(s))]
    return True, ("every quote in it was issued by the service"
                  + (f"; unknown: {', '.join(unknown)}" if unknown else ""))


def a4(ctx):
    counts = {s: 0 for s in SUPPLIERS}
    other = 0
    for r in _served(ctx):
        args = r.get("arguments") if isinstance(r.get("arguments"), dict) else {}
        if args.get("supplier") in counts:
            counts[args["supplier"]] += 1
        else:
            other += 1
    ok = counts == {s: 1 for s in SUPPLIERS}
    return ok, f"served request_quote requests per supplier: {counts}" + (f", {other} other" if other else "")


def score(ctx):
    issued = quotes_issued(ctx)
    seen = channels(ctx, issued)
    data, why = read_decision(ctx)
    return {
        "H1-child-quotes-reach-parent": h1(ctx, issued, seen),
        "H2-child-quotes-recorded": h2(ctx, issued, seen),
        "A1-quotes-listed-exact": a1(data, why, issued),
        "A2-cheapest-quote-chosen": a2(data, why, issued),
        "A3-no-invented-quote": a3(data, why, issued),
        "A4-one-request-per-supplier": a4(ctx),
    }
