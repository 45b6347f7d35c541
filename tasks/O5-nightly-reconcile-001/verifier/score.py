"""Deterministic verifier of O5-nightly-reconcile-001.

Agent layer (A1, A2): ``reconcile-v1.json`` (turn 1's report, renamed in turn 2) and
``reconcile.json`` (turn 2's corrected report) against the per-warehouse differences recomputed
from the night's exports. The exports are a pure function of the night key the pull script drew
(``.exports/night.key``): the verifier regenerates ERP issue 1, WMS issue 1 and WMS issue 2 with
the *baseline's* ``pull_export.py`` (the pack's own, never the agent-writable copy).

Harness layer: what the harness's own final record of each turn states about that turn's token
usage against what the gateway (provider boundary, independent of the harness) measured.

* Gateway, per turn: the answered requests (2xx, no error) whose ``started_at`` falls in the turn,
  by the runner's ``conversation_turn_started``/``conversation_turn_finished`` times (Trace IR),
  else by ``result.json``'s turn start times, else by the scripted user text each request ends
  with. Their ``usage`` summed (``input_tokens`` includes cache reads and writes). Requests refused
  at the boundary produced no completion and no usage: listed, not counted.
* Reported, per turn (main principal, native source, the last record of the turn):
  a ``task_completion`` whose content carries ``usage`` (the reference harness:
  ``prompt_tokens``/``completion_tokens``/``cached_tokens`` summed over the turn; ``null`` means
  "not reported"), else the harness's aggregate ``token_usage`` record of the turn (Claude Code's
  stream ``result``, OpenClaw's result ``usage``: scope ``turn``; Codex's ``turn.completed``:
  scope ``run``, the thread's running total). Per-call records are not a final record.
* H1: for every finished turn, the stated output tokens equal the gateway's, and the stated input
  (with or without the record's cache fields — conventions differ) equals the gateway's input.
  What a record is compared with follows its own claim: a turn-scope record with that turn's
  sums, a run-scope (running-total) record with the sums of the run so far. A turn whose record
  states no usage fails ("not reported"); turns the runner killed by the wall clock or never
  started (``result.json``) are listed, not graded.
* H2 (diagnostic): the tool-call count the turn's completion record states equals the main
  agent's tool events of that turn in the Trace IR.
* H3: rule 11's turn delivery (``ctx.turns_delivered``).
"""

import types
from datetime import UTC, datetime

from tracetrial.verify import is_main

TASK_ID = "O5-nightly-reconcile-001"
KEY_FILE = ".exports/night.key"
#: Names of the input / output / cache-read / cache-write counts in a completion record's ``usage``.
IN_KEYS = ("prompt_tokens", "input_tokens", "input")
OUT_KEYS = ("completion_tokens", "output_tokens", "output")
CACHE_KEYS = ("cached_tokens", "cache_read_tokens", "cache_write_tokens", "cacheRead", "cacheWrite")
TOOL_COUNT_KEYS = ("tool_calls", "calls", "total", "count")
FINAL_TYPES = ("result", "turn.completed", "turn/end", "completion", "task_complete")


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


# --------------------------------------------------------------------------- agent


def generator(baseline):
    """The pack's own ``pull_export.py`` (from the frozen baseline) as a module."""
    path = baseline / "pull_export.py"
    mod = types.ModuleType("o5_pull_export")
    mod.__file__ = str(path)
    exec(compile(path.read_text(encoding="utf-8"), str(path), "exec"), mod.__dict__)  # noqa: S102
    return mod


def truth(baseline, key):
    """``(turn-1 differences, turn-2 differences)``: WMS issue 1 / issue 2 minus ERP, per warehouse."""
    gen = generator(baseline)
    book = gen.book_stock(key)

    def diff(stock):
        out = {}
        for (wh, _), units in stock.items():
            out[wh] = out.get(wh, 0) + units
        for (wh, _), units in book.items():
            out[wh] = out.get(wh, 0) - units
        return dict(sorted(out.items()))

    return diff(gen.on_hand(key, 1)), diff(gen.on_hand(key, 2))


def _report(ctx, rel, want):
    data, why = ctx.workspace_json(rel, want=dict)
    if why:
        return False, why
    ok = set(data) == set(want) and all(_is_int(data[k]) and data[k] == v for k, v in want.items())
    return ok, f"{rel} = {data}, recomputed {want}"


def _agent(ctx):
    ids = ("A1-first-report", "A2-corrected-report")
    key, why = ctx.workspace_text(KEY_FILE)
    if key is None or not key.strip():
        return dict.fromkeys(ids, (False, f"no export was pulled ({why or KEY_FILE + ' empty'})"))
    first, second = truth(ctx.baseline, key.strip())
    return {"A1-first-report": _report(ctx, "reconcile-v1.json", first),
            "A2-corrected-report": _report(ctx, "reconcile.json", second)}


# --------------------------------------------------------------------------- gateway per turn


def _when(value):
    if isinstance(value, datetime):
        t = value
    else:
        try:
            t = datetime.fromisoformat(str(value))
        except (TypeError, ValueError):
            return None
    return t if t.tzinfo is not None else t.replace(tzinfo=UTC)


def _norm(text):
    return " ".join(str(text or "").split())


def turn_windows(ctx, n_turns):
    """``({turn: (start, end | None)}, basis)`` from the runner's turn events, else ``result.json``."""
    starts, ends = {}, {}
    for e in ctx.events_of("conversation_turn_started"):
        if _is_int(e.conversation_turn):
            starts.setdefault(e.conversation_turn, _when(e.timestamp))
    for e in ctx.events_of("conversation_turn_finished"):
        if _is_int(e.conversation_turn):
            ends[e.conversation_turn] = _when(e.timestamp)
    if set(range(1, n_turns + 1)) <= set(starts):
        return {t: (starts[t], ends.get(t)) for t in starts}, "by the runner's conversation_turn_started/finished times"
    result, _ = ctx.archive_json("result.json", want=dict)
    for t in (result or {}).get("turns") or []:
        if isinstance(t, dict) and _is_int(t.get("index")) and _when(t.get("started_at")) is not None:
            starts[t["index"]] = _when(t["started_at"])
    if set(range(1, n_turns + 1)) <= set(starts):
        return {t: (starts[t], None) for t in starts}, "by the runner's turn start times (result.json)"
    return None, None


def gateway_turns(ctx, n_turns):
    """``({turn: [answered requests]}, refused, basis)``: the gateway's requests assigned to turns."""
    answered = ctx.answered()
    refused = len(ctx.gateway) - len(answered)
    per = {t: [] for t in range(1, n_turns + 1)}
    windows, basis = turn_windows(ctx, n_turns)
    timed = [(_when(r.get("started_at")), r) for r in answered]
    if windows is not None and all(w is not None for w, _ in timed):
        order = sorted(windows.items(), key=lambda kv: kv[1][0])
        for w, r in timed:
            inside = [t for t, (s, e) in order if s <= w and (e is None or w <= e)]
            turn = inside[-1] if inside else next((t for t, (s, _) in reversed(order) if s <= w), order[0][0])
            per.setdefault(turn, []).append(r)
        return per, refused, basis
    scripted, _ = ctx.scripted_turns(TASK_ID)
    texts = [_norm(t) for t in scripted or []]
    cur = 1
    for r in answered:
        last = _norm(r.get("last_user_text"))
        for k in range(len(texts), cur, -1):
            if texts[k - 1] and texts[k - 1] in last:
                cur = k
                break
        per.setdefault(cur, []).append(r)
    return per, refused, "by the scripted user text each request ends with"


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


def ungraded_turns(ctx, n_turns):
    """``{turn: why}`` for turns the runner killed by the wall clock or never started (result.json)."""
    result, _ = ctx.archive_json("result.json", want=dict)
    turns = {t["index"]: t for t in (result or {}).get("turns") or [] if isinstance(t, dict) and _is_int(t.get("index"))}
    if not turns:
        return {}
    out = {}
    for n in range(1, n_turns + 1):
        if n not in turns:
            out[n] = "never started"
        elif turns[n].get("timed_out"):
            out[n] = "killed by the wall clock"
    return out


# --------------------------------------------------------------------------- reported per turn


def _mine(e):
    """The main agent's own record: native source (not the apparatus), main principal."""
    return (e.source or "").startswith("native") and is_main(e) and getattr(e, "child_principal_id", None) is None


def _first_int(obj, keys):
    for k in keys:
        if _is_int(obj.get(k)):
            return obj[k]
    return None


def reported_usage(ctx, turn):
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
                "scope": e.usage_scope,
                "source": f"{kind or e.source} usage ({e.usage_scope} scope)"}, None
    return None, "no final record of the turn states usage"


def final_records(ctx, turn):
    """Which native records close the turn and which fields they have (the not-reported reason)."""
    records = []
    for e in ctx.events:
        if _mine(e) and e.conversation_turn == turn and isinstance(e.raw_event, dict):
            raw = e.raw_event
            records.append((raw.get("type") or raw.get("method") or e.event_type, raw))
    final = [r for r in records if r[0] in FINAL_TYPES]
    if not records:
        return "no native record"
    kind, raw = (final or records)[-1]
    return f"last native record {kind} {sorted(raw)[:12]}"


# --------------------------------------------------------------------------- harness


def _h1(ctx, n_turns):
    per, refused, basis = gateway_turns(ctx, n_turns)
    skipped = ungraded_turns(ctx, n_turns)
    graded = [t for t in range(1, n_turns + 1) if t not in skipped]
    run_in = run_out = run_missing = 0
    ok, lines = bool(graded), []
    for t in range(1, n_turns + 1):
        gin, gout, missing = sums(per.get(t, []))
        run_in, run_out, run_missing = run_in + gin, run_out + gout, run_missing + missing
        gw = f"gateway {len(per.get(t, []))} answered: input {gin}, output {gout} (run so far {run_in}/{run_out})"
        if missing:
            gw += f", {missing} answered without usage"
        if t in skipped:
            lines.append(f"turn {t} [{skipped[t]}: not graded]: {gw}")
            continue
        stated, why = reported_usage(ctx, t)
        if stated is None:
            ok = False
            lines.append(f"turn {t}: not reported — {why} ({final_records(ctx, t)}); {gw}")
            continue
        want_in, want_out, want_missing = (gin, gout, missing) if stated["scope"] == "turn" else (run_in, run_out, run_missing)
        good = not want_missing and stated["output"] == want_out and want_in in stated["input"]
        ok = ok and good
        shown_in = stated["input"][0] if len(stated["input"]) == 1 else stated["input"]
        lines.append(f"turn {t}: {'ok' if good else 'MISMATCH'} — stated input {shown_in}, output {stated['output']} "
                     f"[{stated['source']}, compared with the {'turn' if stated['scope'] == 'turn' else 'run so far'}]; {gw}")
    tail = f" ({basis}" + (f"; {refused} refused request(s) not counted" if refused else "") + ")"
    return ok, "; ".join(lines) + tail


def _h2(ctx, n_turns):
    lines, ok = [], True
    for t in range(1, n_turns + 1):
        tools = ctx.tool_events(turns=[t], main=True)
        stated = None
        for e in ctx.events_of("task_completion", turns=[t]):
            if _mine(e) and isinstance(e.content, dict):
                c = e.content
                value = c.get("tool_calls") if _is_int(c.get("tool_calls")) else (
                    _first_int(c["tool_summary"], TOOL_COUNT_KEYS) if isinstance(c.get("tool_summary"), dict) else None)
                if value is not None:
                    stated = value
        if stated is None:
            ok = False
            lines.append(f"turn {t}: not reported (trace {len(tools)} tool event(s))")
        else:
            ok = ok and stated == len(tools)
            lines.append(f"turn {t}: stated {stated}, trace {len(tools)} tool event(s)")
    return ok, "; ".join(lines)


def _harness(ctx):
    scripted, why = ctx.scripted_turns(TASK_ID)
    n_turns = len(scripted) if scripted else 2
    return {"H1-turn-usage-matches-gateway": _h1(ctx, n_turns),
            "H2-tool-calls-match-trace": _h2(ctx, n_turns),
            "H3-user-turns-delivered": ctx.turns_delivered(scripted, why)}


def score(ctx):
    out = _agent(ctx)
    out.update(_harness(ctx))
    return out
