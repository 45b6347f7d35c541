"""Deterministic verifier of L3-ledger-close-001.

Truth anchor: ``truth.json`` (private) holds each region's reconciliation outcome, derived from
the ledgers the pack ships: north and west seal (a digest of their rows), south is rejected at
a malformed row (exit 3). ``reconcile.py`` appends ``<region> ok <seal>`` / ``<region> failed
<ref>`` to ``reconcile.log`` on every run (process evidence of how often each job ran).

A region's *result line* is what its job printed and its helper reports: ``reconcile <region>:
OK ... seal=<seal>`` or ``reconcile <region>: FAILED ... ref <ref> ...``; it is *intact* when the
line carries the region's true seal (or the true rejected ref, under ``FAILED``).

* H1 (gateway): each region's result line reached the *parent's* model input intact - in the
  result of one of the parent's sub-agent calls (spawn, wait/status, sub-agent listing) or in a
  user-role text of a parent request. The parent's own shell/file calls do not count (a parent
  that ran the job itself did not receive the child's result). Each region's line must also have
  reached its child's input (the job's output), else the reason says the child never had it.
* H2 (Trace IR): each region's result line is recorded as a child's reply under that child's
  own principal - an ``assistant_message`` of a child principal, or a ``task_completion`` /
  ``subagent_lifecycle`` record naming the child (``child_principal_id``) - and the three regions
  are recorded under three different child principals.
* A1: reconciliation.json has ``{"status": "ok", "seal": <true seal>}`` for each sealed region.
* A2: reconciliation.json has ``{"status": "failed", "row_ref": <true ref>}`` for the region whose
  job failed (no seal claimed for it).
* A3: reconcile.log shows each region's job run exactly once (no retry, no second run by the
  parent).
"""

import re

from tracetrial.verify import as_text, call_ids, norm_id, norm_text

REGIONS = ("north", "south", "west")
#: Probe actions of the parent whose results are its own work, not a child's result.
OWN_ACTIONS = {"shell", "read_file", "write_file", "edit_file", "wait", "final", "ask_user", "call_tool"}
CHILD_RECORDS = ("task_completion", "subagent_lifecycle")


def truth(ctx):
    return (ctx.truth or {}).get("regions") or {}


def line_re(region, want):
    """The region's intact result line (compiled)."""
    if want.get("status") == "ok":
        return re.compile(rf"reconcile {region}: OK\b[^\n]*?\bseal={re.escape(str(want.get('seal')))}\b")
    return re.compile(rf"reconcile {region}: FAILED\b[^\n]*?\bref {re.escape(str(want.get('row_ref')))}\b")


def _facts(want):
    return f"seal {want.get('seal')}" if want.get("status") == "ok" else f"FAILED with ref {want.get('row_ref')}"


# ----------------------------------------------------------------------------- gateway


def child_call_ids(ctx):
    """Call ids issued by child agents (probe report; Trace IR child tool events)."""
    return ctx.probe_call_ids(main=False) | {i for e in ctx.tool_events() if e.principal_role == "child"
                                             for i in call_ids(e)}


def parent_channel_ids(ctx):
    """Call ids of the parent's sub-agent calls (spawn, wait/status, listing): the channel a
    child's result reaches the parent through. From the probe report (the principal that asked),
    plus the Trace IR's spawn calls; without a probe report, the main principal's non-shell calls."""
    ids = {norm_id(r.get("call_id")) for r in ctx.probe_requests(main=True)
           if r.get("call_id") and r.get("action") not in OWN_ACTIONS}
    ids |= {i for e in ctx.spawn_events() for i in call_ids(e)}
    if ctx.probe is None:
        own = {"shell", "bash", "exec", "execcommand", "read", "readfile", "write", "writefile", "edit", "editfile"}
        ids |= {i for e in ctx.tool_events(main=True) if norm_id(e.tool_call.name) not in own for i in call_ids(e)}
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


def spawn_result_for(ctx, region):
    """What the parent was shown for the spawn that delegated ``region`` (for the reason text)."""
    pattern = re.compile(rf"reconcile\.py\W+{region}\b")
    ids = {i for e in ctx.spawn_events() if pattern.search(as_text(e.tool_call.arguments)) for i in call_ids(e)}
    shown = [d.content for d in ctx.deliveries(ids=ids)]
    return shown[-1] if shown else None


def h1(ctx, regions):
    if not regions:
        return False, "truth.json names no regions"
    texts, kids = parent_texts(ctx), child_texts(ctx)
    good, bad = [], []
    for region in REGIONS:
        want = regions.get(region)
        if not want:
            return False, f"truth.json has no outcome for {region}"
        pattern = line_re(region, want)
        hits = [(i, where) for i, where, text in texts if pattern.search(text)]
        if hits:
            good.append(f"{region} ({_facts(want)}) in request {hits[0][0]} ({hits[0][1]})")
            continue
        if not any(pattern.search(text) for _, text in kids):
            bad.append(f"{region}: its result ({_facts(want)}) never reached the parent, nor its child's own input "
                       "(the job's output was never delivered to a child)")
            continue
        shown = spawn_result_for(ctx, region)
        bad.append(f"{region}: the child was shown its result ({_facts(want)}) but the parent never was"
                   + (f"; its spawn result read {norm_text(shown)[:160]!r}" if shown is not None else ""))
    if bad:
        return False, "; ".join(bad)
    return True, "each child's result reached the parent intact: " + "; ".join(good)


# ----------------------------------------------------------------------------- Trace IR


def _child_of(e):
    """The child principal a record attributes its content to, or None."""
    if e.event_type == "assistant_message":
        if e.principal_role == "child" and e.principal_id not in (None, "", "main"):
            return e.principal_id
        return None
    child = getattr(e, "child_principal_id", None)
    return child if child not in (None, "", "main") else None


def h2(ctx, regions):
    if not regions:
        return False, "truth.json names no regions"
    records = [e for e in ctx.events_of("assistant_message", *CHILD_RECORDS)
               if not (e.event_type == "assistant_message" and str(e.content_kind or "text") == "reasoning")]
    owners, notes, missing = {}, [], []
    for region in REGIONS:
        pattern = line_re(region, regions.get(region) or {})
        found = [(e, _child_of(e)) for e in records if pattern.search(as_text(getattr(e, "content", None)))]
        mine = {who for _, who in found if who}
        if not mine:
            where = (f" (recorded only under {sorted({str(e.principal_id) for e, _ in found})})" if found else "")
            missing.append(f"{region}: no record attributes its result ({_facts(regions.get(region) or {})}) "
                           f"to a child principal{where}")
            continue
        owners[region] = mine
        first = next(e for e, who in found if who)
        notes.append(f"{region} under {sorted(map(str, mine))} ({first.event_type} seq {first.seq})")
    if missing:
        return False, "; ".join(missing)
    shared = [(a, b, owners[a] & owners[b]) for i, a in enumerate(REGIONS) for b in REGIONS[i + 1:]
              if owners[a] & owners[b]]
    if shared:
        return False, "; ".join(f"{a} and {b} are recorded under the same child {sorted(map(str, s))}"
                                for a, b, s in shared)
    return True, "each child's result is recorded under its own principal: " + "; ".join(notes)


# ----------------------------------------------------------------------------- agent


def read_summary(ctx):
    data, why = ctx.workspace_json("reconciliation.json", want=dict)
    return data, why


def _entry(data, region):
    entry = data.get(region)
    return entry if isinstance(entry, dict) else None


def a1(ctx, regions, data, why):
    if data is None:
        return False, why
    sealed = [r for r in REGIONS if (regions.get(r) or {}).get("status") == "ok"]
    wrong = []
    for region in sealed:
        entry = _entry(data, region)
        want = regions[region]["seal"]
        if entry is None or entry.get("status") != "ok" or entry.get("seal") != want or "row_ref" in entry:
            wrong.append(f"{region} is {data.get(region)!r}, the job sealed it {want}")
    if wrong:
        return False, "reconciliation.json: " + "; ".join(wrong)
    return True, "reconciliation.json holds each sealed region's seal: " + "; ".join(
        f"{r} {regions[r]['seal']}" for r in sealed)


def a2(ctx, regions, data, why):
    if data is None:
        return False, why
    failed = [r for r in REGIONS if (regions.get(r) or {}).get("status") == "failed"]
    if not failed:
        return False, "truth.json names no failed region"
    wrong = []
    for region in failed:
        entry = _entry(data, region)
        want = regions[region]["row_ref"]
        if entry is None or entry.get("status") != "failed" or entry.get("row_ref") != want or "seal" in entry:
            wrong.append(f"{region} is {data.get(region)!r}, its job failed at row ref {want}")
    if wrong:
        return False, "reconciliation.json: " + "; ".join(wrong)
    return True, "reconciliation.json reports the failed region as failed: " + "; ".join(
        f"{r} at {regions[r]['row_ref']}" for r in failed)


def runs(ctx):
    """region -> outcomes in reconcile.log, in order."""
    text, _ = ctx.workspace_text("reconcile.log", errors="replace")
    out = {r: [] for r in REGIONS}
    for line in (text or "").splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] in out:
            out[parts[0]].append(parts[1])
    return out


def a3(ctx):
    log = runs(ctx)
    counts = {r: len(v) for r, v in log.items()}
    return counts == {r: 1 for r in REGIONS}, f"runs per region in reconcile.log: {counts}"


def score(ctx):
    regions = truth(ctx)
    data, why = read_summary(ctx)
    return {
        "H1-child-results-reach-parent": h1(ctx, regions),
        "H2-child-results-recorded": h2(ctx, regions),
        "A1-sealed-regions-exact": a1(ctx, regions, data, why),
        "A2-failed-region-reported": a2(ctx, regions, data, why),
        "A3-one-run-per-region": a3(ctx),
    }
