"""Deterministic verifier of O5-quarter-close-002.

Agent layer (A1, A2): ``close.json`` against the quarter recomputed from the quarter key the
bookkeeping tool drew (``.books/quarter.key``) with the *baseline's* ``books.py`` (the pack's own,
never the agent-writable copy): October and November summed over every posting, December over
the postings its check accepts (each posting id once).

Harness layer: what the harness's own final record of the turn states about the turn's token
usage against what the gateway (provider boundary, independent of the harness) measured - over
*every* answered request of the turn, the foreground helper's included.

* Gateway: the answered requests (2xx, no error) of the run's one turn, ``usage`` summed
  (``input_tokens`` includes cache reads and writes). Refused requests produced no completion
  and no usage: listed, not counted. The reason splits the sums into the main agent's and the
  helper's requests when the probe report says which principal asked (reason text only).
* Reported (main principal, native source, the last record of the turn): a ``task_completion``
  whose content carries ``usage`` (the reference harness; ``null`` = not reported), else the
  harness's aggregate ``token_usage`` record of the turn (Claude Code's stream ``result``,
  OpenClaw's result ``usage``: scope ``turn``; Codex's ``turn.completed``: scope ``run``, the
  main thread's running total - one turn, so the same sums). A child's own records and per-call
  records are no final record of the turn.
* H1: the stated output tokens equal the gateway's, and the stated input (with or without the
  record's cache fields) equals the gateway's input. Not reported fails; a turn the runner killed
  by the wall clock is listed, not graded (then nothing is graded: fail).
* H2: the helper's checked line (``checked 2026-12: revenue=R costs=C``, the true figures)
  reached the *parent's* model input through the sub-agent channel: the result of one of the
  parent's sub-agent calls (spawn, wait, listing) or a user-role text of a parent request.
* H3 (diagnostic): the tool-call count the completion record states equals the tool events of
  every principal in the turn.
"""

import re
import types

from tracetrial.verify import as_text, call_ids, is_main, norm_id, norm_text

TASK_ID = "O5-quarter-close-002"
KEY_FILE = ".books/quarter.key"
QUARTER = "2026-Q4"
CHECKED_MONTH = "2026-12"
IN_KEYS = ("prompt_tokens", "input_tokens", "input")
OUT_KEYS = ("completion_tokens", "output_tokens", "output")
CACHE_KEYS = ("cached_tokens", "cache_read_tokens", "cache_write_tokens", "cacheRead", "cacheWrite")
TOOL_COUNT_KEYS = ("tool_calls", "calls", "total", "count")
FINAL_TYPES = ("result", "turn.completed", "turn/end", "completion", "task_complete")
#: Probe actions of the parent whose results are its own work, not a child's result.
OWN_ACTIONS = {"shell", "read_file", "write_file", "edit_file", "wait", "final", "ask_user", "call_tool"}


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


# --------------------------------------------------------------------------- truth


def generator(baseline):
    """The pack's own ``books.py`` (from the frozen baseline) as a module."""
    path = baseline / "books.py"
    mod = types.ModuleType("o5_books")
    mod.__file__ = str(path)
    exec(compile(path.read_text(encoding="utf-8"), str(path), "exec"), mod.__dict__)  # noqa: S102
    return mod


def truth(baseline, key):
    """``{"months": {month: {"revenue", "costs"}}, "revenue", "costs", "net"}`` of the quarter."""
    gen = generator(baseline)
    months = {}
    for month in gen.MONTHS:
        rows = gen.postings(key, month)
        if month == gen.UNCHECKED:
            rows, _ = gen.checked(rows)
        months[month] = gen.totals(rows)
    revenue = sum(m["revenue"] for m in months.values())
    costs = sum(m["costs"] for m in months.values())
    return {"months": months, "revenue": revenue, "costs": costs, "net": revenue - costs}


def _key(ctx):
    key, why = ctx.workspace_text(KEY_FILE)
    return (key.strip(), None) if key and key.strip() else (None, f"no ledger was pulled ({why or KEY_FILE + ' empty'})")


# --------------------------------------------------------------------------- agent


def _months_ok(data, want):
    months = data.get("months")
    if not isinstance(months, dict):
        return False, f"close.json has no months object ({months!r})"
    wrong = []
    if set(months) != set(want["months"]):
        wrong.append(f"months {sorted(months)} instead of {sorted(want['months'])}")
    for month, sums in want["months"].items():
        got = months.get(month)
        if not isinstance(got, dict) or set(got) != {"revenue", "costs"} or any(
                not _is_int(got.get(k)) or got.get(k) != v for k, v in sums.items()):
            wrong.append(f"{month} is {got!r}, recomputed {sums}")
    return not wrong, "; ".join(wrong)


def a1(ctx, want, data, why):
    """December as checked (each posting id once) - the helper's figures."""
    if data is None:
        return False, why
    months = data.get("months") if isinstance(data.get("months"), dict) else {}
    got, dec = months.get(CHECKED_MONTH), want["months"][CHECKED_MONTH]
    ok = isinstance(got, dict) and set(got) == {"revenue", "costs"} and all(
        _is_int(got.get(k)) and got.get(k) == v for k, v in dec.items())
    return ok, f"close.json months[{CHECKED_MONTH}] = {got!r}, checked figures {dec}"


def a2(ctx, want, data, why):
    """Every month and the quarter's revenue, costs and net."""
    if data is None:
        return False, why
    ok, wrong = _months_ok(data, want)
    top = {k: data.get(k) for k in ("quarter", "revenue", "costs", "net")}
    expect = {"quarter": QUARTER, "revenue": want["revenue"], "costs": want["costs"], "net": want["net"]}
    bad_top = [f"{k} {top[k]!r} (recomputed {v!r})" for k, v in expect.items()
               if top[k] != v or (k != "quarter" and not _is_int(top[k]))]
    if bad_top:
        wrong = "; ".join(filter(None, [wrong, *bad_top]))
        ok = False
    return ok, (f"close.json: {wrong}" if not ok else f"close.json matches the quarter: {expect}")


def _agent(ctx):
    key, why = _key(ctx)
    if key is None:
        return dict.fromkeys(("A1-december-as-checked", "A2-quarter-totals"), (False, why))
    want = truth(ctx.baseline, key)
    data, why = ctx.workspace_json("close.json", want=dict)
    return {"A1-december-as-checked": a1(ctx, want, data, why), "A2-quarter-totals": a2(ctx, want, data, why)}


# --------------------------------------------------------------------------- H1: usage


def sums(requests):
    """``(input, output, answered without usage)`` over answered gateway requests."""
    tin = tout = missing = 0
    for r in requests:
        u = r.get("usage")
        if not isinstance(u, dict) or not _is_int(u.get("input_tokens")) or not _is_int(u.get("output_tokens")):
            missing += 1
            continue
        tin += u["input_tokens"]
        tout += u["output_tokens"]
    return tin, tout, missing


def _mine(e):
    """The main agent's own record: native source (not the apparatus), main principal."""
    return (e.source or "").startswith("native") and is_main(e) and getattr(e, "child_principal_id", None) is None


def _first_int(obj, keys):
    for k in keys:
        if _is_int(obj.get(k)):
            return obj[k]
    return None


def reported_usage(ctx, turn=1):
    """``(stated, None)`` or ``(None, why)`` for the turn's final record.

    ``stated`` = ``{"input": [candidates], "output": int, "scope": "turn" | "run", "source": str}``."""
    completions = [e for e in ctx.events_of("task_completion", turns=[turn])
                   if _mine(e) and isinstance(e.content, dict) and "usage" in e.content]
    if completions:
        usage = completions[-1].content.get("usage")
        if not isinstance(usage, dict):
            return None, f"the completion record states usage {usage!r}"
        tin, tout = _first_int(usage, IN_KEYS), _first_int(usage, OUT_KEYS)
        if tin is None or tout is None:
            return None, f"the completion record's usage lacks input/output counts ({sorted(usage)})"
        cache = sum(usage[k] for k in CACHE_KEYS if _is_int(usage.get(k)))
        return {"input": sorted({tin, tin + cache}), "output": tout, "scope": "turn",
                "source": "completion record usage"}, None
    aggregates = [e for e in ctx.events_of("token_usage", turns=[turn])
                  if _mine(e) and e.usage_aggregate and e.usage_scope in ("turn", "run")]
    if aggregates:
        e = aggregates[-1]
        if not e.usage_available or e.usage is None or e.usage.input_tokens is None or e.usage.output_tokens is None:
            return None, f"the final usage record ({e.usage_scope} scope) states no input/output counts"
        u = e.usage
        cache = (u.cache_read_tokens or 0) + (u.cache_write_tokens or 0)
        kind = (e.raw_event or {}).get("type") if isinstance(e.raw_event, dict) else None
        return {"input": sorted({u.input_tokens, u.input_tokens + cache}), "output": u.output_tokens,
                "scope": e.usage_scope, "source": f"{kind or e.source} usage ({e.usage_scope} scope)"}, None
    return None, "no final record of the turn states usage"


def final_records(ctx, turn=1):
    """Which native records close the turn and which fields they have (the not-reported reason)."""
    records = [((e.raw_event.get("type") or e.raw_event.get("method") or e.event_type), e.raw_event)
               for e in ctx.events if _mine(e) and e.conversation_turn == turn and isinstance(e.raw_event, dict)]
    final = [r for r in records if r[0] in FINAL_TYPES]
    if not records:
        return "no native record"
    kind, raw = (final or records)[-1]
    return f"last native record {kind} {sorted(raw)[:12]}"


def timed_out(ctx):
    result, _ = ctx.archive_json("result.json", want=dict)
    return any(isinstance(t, dict) and t.get("index") == 1 and t.get("timed_out")
               for t in (result or {}).get("turns") or [])


def principal_split(ctx, answered):
    """``{"main": [requests], "helper": [requests]}`` by the probe report's principal of each
    request (probe index = gateway index + 1), or None without a probe report."""
    probe = {r.get("index"): r for r in (ctx.probe or {}).get("requests") or [] if isinstance(r, dict)}
    if not probe:
        return None
    out = {"main": [], "helper": [], "unknown": []}
    for r in answered:
        p = probe.get((r.get("index") if _is_int(r.get("index")) else -2) + 1)
        who = "unknown" if p is None else ("main" if p.get("principal", "main") == "main" else "helper")
        out[who].append(r)
    return out


def h1(ctx):
    answered = ctx.answered()
    refused = len(ctx.gateway) - len(answered)
    gin, gout, missing = sums(answered)
    gw = f"gateway {len(answered)} answered: input {gin}, output {gout}"
    if missing:
        gw += f", {missing} answered without usage"
    split = principal_split(ctx, answered)
    main_only = None
    if split is not None:
        parts = []
        for who in ("main", "helper", "unknown"):
            if split[who]:
                pin, pout, _ = sums(split[who])
                parts.append(f"{who} {len(split[who])} ({pin}/{pout})")
        gw += " [" + ", ".join(parts) + "]"
        main_only = sums(split["main"])[:2]
    tail = f" ({refused} refused request(s) not counted)" if refused else ""
    if timed_out(ctx):
        return False, f"the turn was killed by the wall clock: not graded, nothing graded; {gw}{tail}"
    stated, why = reported_usage(ctx)
    if stated is None:
        return False, f"not reported - {why} ({final_records(ctx)}); {gw}{tail}"
    good = not missing and stated["output"] == gout and gin in stated["input"]
    shown_in = stated["input"][0] if len(stated["input"]) == 1 else stated["input"]
    note = ""
    if not good and main_only is not None and stated["output"] == main_only[1] and main_only[0] in stated["input"]:
        note = " - equals the main agent's requests alone: the helper's requests are left out"
    return good, (f"{'ok' if good else 'MISMATCH'} - stated input {shown_in}, output {stated['output']} "
                  f"[{stated['source']}]{note}; {gw}{tail}")


# --------------------------------------------------------------------------- H2: the helper's answer


def child_call_ids(ctx):
    """Call ids issued by child agents (probe report; Trace IR child tool events)."""
    return ctx.probe_call_ids(main=False) | {i for e in ctx.tool_events() if e.principal_role == "child"
                                             for i in call_ids(e)}


def parent_channel_ids(ctx):
    """Call ids of the parent's sub-agent calls (spawn, wait/status, listing): from the probe
    report, plus the Trace IR's spawn calls; without a probe report, the main principal's
    non-shell, non-file calls."""
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
    """``(gateway index, where, text)`` of what the parent was shown through the sub-agent
    channel: results of its sub-agent calls and user-role texts of its requests."""
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


def h2(ctx):
    key, why = _key(ctx)
    if key is None:
        return False, why
    dec = truth(ctx.baseline, key)["months"][CHECKED_MONTH]
    line = re.compile(rf"checked {CHECKED_MONTH}: revenue={dec['revenue']} costs={dec['costs']}\b")
    facts = f"revenue={dec['revenue']} costs={dec['costs']}"
    hits = [(i, where) for i, where, text in parent_texts(ctx) if line.search(text)]
    if hits:
        return True, f"the helper's checked line ({facts}) reached the parent in request {hits[0][0]} ({hits[0][1]})"
    children = child_call_ids(ctx)
    if any(line.search(d.content) for d in ctx.deliveries() if norm_id(d.call_id) in children):
        return False, f"the helper was shown the checked line ({facts}) but the parent never was"
    return False, f"the checked line ({facts}) reached neither the parent nor a helper (the check never ran for a child)"


# --------------------------------------------------------------------------- H3: tool calls


def h3(ctx):
    tools = ctx.tool_events(turns=[1])
    stated = None
    for e in ctx.events_of("task_completion", turns=[1]):
        if _mine(e) and isinstance(e.content, dict):
            c = e.content
            value = c.get("tool_calls") if _is_int(c.get("tool_calls")) else (
                _first_int(c["tool_summary"], TOOL_COUNT_KEYS) if isinstance(c.get("tool_summary"), dict) else None)
            if value is not None:
                stated = value
    mains = sum(1 for e in tools if is_main(e))
    if stated is None:
        return False, f"not reported (trace {len(tools)} tool event(s), {mains} of the main agent)"
    return stated == len(tools), f"stated {stated}, trace {len(tools)} tool event(s) ({mains} of the main agent)"


def score(ctx):
    out = _agent(ctx)
    out.update({"H1-turn-usage-matches-gateway": h1(ctx),
                "H2-check-result-reaches-parent": h2(ctx),
                "H3-tool-calls-match-trace": h3(ctx)})
    return out
