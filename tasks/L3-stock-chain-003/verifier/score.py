"""Deterministic verifier of L3-stock-chain-003.

Truth anchor: the ``stockroom`` ledger. Warehouse A's count, the lot id it names and that lot's
best-before date are run values of the simulator (drawn from the run seed) that the ledger records
as ``issued`` when an answer carries them; each served call is a ``request`` record.

The chain has two *key lines*, each the result a helper relays:
step 1 ``warehouse A count: <count> units on hand, all in lot <lot>`` (count_stock) and step 2
``lot <lot> best before <date>`` (lot_expiry, which answers only for the counted lot).

* H1 (gateway): each key line a child was shown (its MCP result) reached the *parent's* model
  input intact - a tool result of a parent request that is not the parent's own stockroom or
  file call (a spawn result, a wait/status result, a sub-agent listing) or a user-role text of a
  parent request (a notification). A step no child was shown is named, not judged; with none at
  all H1 is not applicable.
* H2 (gateway): the parent's brief for helper 2 (its spawn call naming ``lot_expiry``, Trace IR)
  carried the lot id step 1 issued, and that lot id reached the model input of helper 2 (an
  answered request whose last user text holds the lot id and ``lot_expiry``). Not applicable when
  the parent sent no such brief (no helper 2, or no lot id in its brief: nothing to relay).
* A1: stock_report.json has warehouse ``A``, the issued count (a number) and the issued lot id.
* A2: stock_report.json has the issued best-before date as ``expiry``.
* A3: the ledger shows count_stock requested exactly once and lot_expiry at most once (no retry,
  no second request by the parent).
"""

import re

from tracetrial.verify import as_text, call_ids, norm_id, norm_text

SERVICE = "stockroom"
OUTPUT = "stock_report.json"
OWN_ACTIONS = {"shell", "read_file", "write_file", "edit_file", "call_tool", "final", "wait", "ask_user"}
FILE_TOOLS = {"write", "writefile", "edit", "editfile", "read", "readfile", "bash", "shell", "exec", "execcommand",
              "applypatch"}


def truth(ctx):
    """``(count, lot, expiry)`` as the ledger issued them (None for a value never issued)."""
    count, lot = ctx.issued(SERVICE, "count_a"), ctx.issued(SERVICE, "lot_id")
    parts = [ctx.issued(SERVICE, n) for n in ("expiry_year", "expiry_month", "expiry_day")]
    expiry = None if None in parts else "{}-{}-{:0>2}".format(*parts)
    return count, (str(lot) if lot is not None else None), expiry


def key_lines(count, lot, expiry):
    """step -> compiled intact key line (only the steps whose values were issued)."""
    out = {}
    if count is not None and lot is not None:
        out["count"] = re.compile(rf"warehouse A count: {count} units on hand, all in lot {re.escape(lot)}(?![A-Z0-9])")
    if lot is not None and expiry is not None:
        out["expiry"] = re.compile(rf"lot {re.escape(lot)} best before {re.escape(expiry)}(?![0-9])")
    return out


# ----------------------------------------------------------------------------- gateway


def child_ids(ctx):
    return ctx.probe_call_ids(main=False) | {i for e in ctx.tool_events() if e.principal_role == "child"
                                             for i in call_ids(e)}


def own_ids(ctx):
    """The parent's own work calls (stockroom, files, shell): never the channel of a child's result."""
    ids = {norm_id(r.get("call_id")) for r in ctx.probe_requests(main=True)
           if r.get("call_id") and r.get("action") in OWN_ACTIONS}
    for e in ctx.tool_events(main=True):
        name = norm_id(e.tool_call.name)
        if SERVICE in name or name in FILE_TOOLS or name.endswith(("countstock", "lotexpiry")):
            ids |= call_ids(e)
    return ids - {""}


def briefs(ctx):
    """The parent's spawn briefs: (spawn event, its argument text)."""
    return [(e, as_text(e.tool_call.arguments)) for e in ctx.spawn_events()]


def parent_texts(ctx):
    """``(gateway index, where, text)`` of what the parent was shown through the sub-agent channel."""
    kids, own = child_ids(ctx), own_ids(ctx)
    heads = [h for h in (norm_text(t)[:60] for _, t in briefs(ctx)) if h]
    out = []
    for req in ctx.gateway:
        results = req.get("tool_results") or []
        user = req.get("last_user_text") or ""
        if any(norm_id(r.get("id")) in kids for r in results) or "stock helper" in user \
                or any(h in norm_text(user) for h in heads):
            continue  # a child's request
        for r in results:
            if norm_id(r.get("id")) not in own:
                out.append((req.get("index"), f"result of {r.get('id')}", as_text(r.get("content"))))
        if user:
            out.append((req.get("index"), "user text", user))
    return out


def h1(ctx, lines):
    kid_texts = [d.content for d in ctx.deliveries(ids=child_ids(ctx))]
    texts = parent_texts(ctx)
    good, bad, skipped = [], [], []
    for step, pattern in lines.items():
        if not any(pattern.search(t) for t in kid_texts):
            skipped.append(f"{step}: no child was shown its key line")
            continue
        hits = [(i, where) for i, where, text in texts if pattern.search(text)]
        if hits:
            good.append(f"{step} in request {hits[0][0]} ({hits[0][1]})")
        else:
            shown = [t for _, where, t in texts if where.startswith("result")]
            bad.append(f"{step}: the child was shown its key line but the parent never was"
                       + (f"; the parent's last sub-agent result read {norm_text(shown[-1])[:160]!r}" if shown else ""))
    if bad:
        return False, "; ".join(bad + skipped)
    if not good:
        return None, "no child was shown a key line, so no child result could carry one" + (
            ": " + "; ".join(skipped) if skipped else "")
    return True, "each child's key line reached the parent intact: " + "; ".join(good + skipped)


def h2(ctx, lot):
    second = [(e, t) for e, t in briefs(ctx) if "lot_expiry" in t or "lotexpiry" in norm_id(t)]
    if not second:
        return None, "the parent started no helper for lot_expiry (no brief to relay)"
    if lot is None or not any(lot in t for _, t in second):
        return None, f"the parent's brief for helper 2 carried no issued lot id ({lot}): nothing for the harness to relay"
    got = [r.get("index") for r in ctx.answered()
           if lot in (r.get("last_user_text") or "") and "lot_expiry" in (r.get("last_user_text") or "")]
    if got:
        return True, f"helper 2's brief with lot {lot} reached its model input (request {got[0]})"
    return False, f"the parent briefed helper 2 with lot {lot}, but no model request of a helper shows that brief"


# ----------------------------------------------------------------------------- agent


def a1(data, why, count, lot):
    if data is None:
        return False, why
    if count is None or lot is None:
        return False, "the stockroom issued no count (count_stock never served)"
    ok = (data.get("warehouse") == "A" and isinstance(data.get("count"), int) and not isinstance(data.get("count"), bool)
          and data.get("count") == int(count) and data.get("lot") == lot)
    return ok, (f"{OUTPUT}: warehouse={data.get('warehouse')!r} count={data.get('count')!r} lot={data.get('lot')!r}; "
                f"issued count {count}, lot {lot}")


def a2(data, why, expiry):
    if data is None:
        return False, why
    if expiry is None:
        return False, f"the stockroom issued no best-before date (lot_expiry never served for the lot); {OUTPUT} " \
                      f"expiry={data.get('expiry')!r}"
    return data.get("expiry") == expiry, f"{OUTPUT}: expiry={data.get('expiry')!r}; issued {expiry}"


def a3(ctx):
    counts = {t: len(ctx.ledger(SERVICE, kind="request", tool=t)) for t in ("count_stock", "lot_expiry")}
    ok = counts["count_stock"] == 1 and counts["lot_expiry"] <= 1
    return ok, f"stockroom requests per tool: {counts}"


def score(ctx):
    count, lot, expiry = truth(ctx)
    data, why = ctx.workspace_json(OUTPUT, want=dict)
    return {
        "H1-child-results-reach-parent": h1(ctx, key_lines(count, lot, expiry)),
        "H2-lot-brief-reached-helper": h2(ctx, lot),
        "A1-count-and-lot-exact": a1(data, why, count, lot),
        "A2-expiry-exact": a2(data, why, expiry),
        "A3-one-request-per-step": a3(ctx),
    }
