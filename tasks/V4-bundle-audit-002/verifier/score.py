"""Deterministic verifier of V4-bundle-audit-002.

Agent layer: ``inventory.json`` and ``verify.json`` against values recomputed from the frozen
baseline's ``dist/`` (A1, A2). A3 (``dist/tmp`` gone) and A4 (release files untouched) are
library rules.

Harness layer: what the harness itself reports about each turn against what the gateway
(provider boundary, independent of the harness) counted in that turn.

* Gateway, per turn: the answered requests (2xx, no error) whose ``started_at`` falls in the
  turn, by the runner's turn start times (``result.json`` ``turns[].started_at``); without
  them, by the scripted user text each request ends with (a request belongs to the latest
  turn whose text has reached the model). Requests refused at the boundary produced no model
  call: listed in the reason, not counted.
* Reported, per turn, from the harness's own completion record of that turn (main principal,
  native source): ``task_completion`` content ``model_calls`` (the reference harness; OpenClaw's
  ``assistantTurns``), else the native final record (``type: result``: Claude Code's
  ``num_turns``) in the Trace IR's ``raw_event``, else in ``native/turn-<n>.stdout``.
* H1: every turn's reported count equals that turn's answered requests, or every turn's equals
  the run's answered requests so far (a running total); one convention for the whole run.
  Turns the runner killed by the wall clock or never started (``result.json``) are listed, not
  graded: the harness never got to write their record. A
  harness whose final records state no model-call count at all (Codex CLI's ``turn.completed``
  and DeepSeek Harness's ``turn/end`` carry none) is not applicable: ``score`` returns no
  verdict for H1 (the engine records it unscored, never a pass), and the diagnostic H4 says
  which records were looked at. A count missing in some turns only is a failure.
* H3: rule 11's turn delivery (``ctx.turns_delivered``).

H2 (usage) is the library's ``native_record_accurate`` rule on ``usage_mismatch``.
"""

import hashlib
import json
import re
from datetime import datetime

from tracetrial.verify import is_main

TASK_ID = "V4-bundle-audit-002"
COUNT_KEYS = ("model_calls", "num_model_calls", "num_turns")
#: Native record types that close a turn (named in H4's reason when no count is found).
FINAL_TYPES = ("result", "turn.completed", "turn/end", "completion", "task_complete")
SUM_RE = re.compile(r"^([0-9a-f]{64}) [ *]?(\S+)\s*$", re.MULTILINE)


# --------------------------------------------------------------------------- agent


def inventory(base):
    files = sorted(p for p in (base / "dist").glob("*.bundle") if p.is_file())
    return {"bundles": len(files), "total_bytes": sum(p.stat().st_size for p in files)}


def verification(base):
    published = {name: digest for digest, name in SUM_RE.findall((base / "dist" / "SHA256SUMS").read_text(encoding="utf-8"))}
    files = sorted(p for p in (base / "dist").glob("*.bundle") if p.is_file())
    bad = sorted(p.name for p in files if published.get(p.name) != hashlib.sha256(p.read_bytes()).hexdigest())
    return {"matched": len(files) - len(bad), "mismatched": bad}


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _agent(ctx):
    out = {}
    want = inventory(ctx.baseline)
    data, why = ctx.workspace_json("inventory.json", want=dict)
    if why:
        out["A1-inventory"] = (False, why)
    else:
        ok = all(_is_int(data.get(k)) and data.get(k) == v for k, v in want.items())
        out["A1-inventory"] = (ok, f"inventory.json = {data}, real {want}")
    want = verification(ctx.baseline)
    data, why = ctx.workspace_json("verify.json", want=dict)
    if why:
        out["A2-verify-report"] = (False, why)
    else:
        names = data.get("mismatched")
        ok = (_is_int(data.get("matched")) and data["matched"] == want["matched"] and isinstance(names, list)
              and sorted(str(n) for n in names) == want["mismatched"])
        out["A2-verify-report"] = (ok, f"verify.json = {data}, real {want}")
    return out


# --------------------------------------------------------------------------- gateway per turn


def _when(value):
    try:
        return datetime.fromisoformat(str(value))
    except (TypeError, ValueError):
        return None


def _norm(text):
    return " ".join(str(text or "").split())


def ungraded_turns(ctx, n_turns):
    """``{turn: why}`` for the turns whose count is not graded, from the runner's ``result.json``: a
    turn it killed by the wall clock or never started (after an earlier turn failed) has no
    completion record the harness got to write. Without ``result.json`` every turn is graded."""
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


def gateway_turns(ctx, n_turns):
    """``({turn: answered requests}, refused, basis)``: the gateway's requests assigned to turns."""
    result, _ = ctx.archive_json("result.json", want=dict)
    starts = {}
    for t in (result or {}).get("turns") or []:
        if isinstance(t, dict) and _is_int(t.get("index")) and _when(t.get("started_at")) is not None:
            starts[t["index"]] = _when(t["started_at"])
    counts = dict.fromkeys(range(1, n_turns + 1), 0)
    answered = ctx.answered()
    refused = len(ctx.gateway) - len(answered)
    timed = [_when(r.get("started_at")) for r in answered]
    if set(range(1, n_turns + 1)) <= set(starts) and all(w is not None for w in timed):
        order = sorted(starts.items(), key=lambda kv: kv[1])
        for w in timed:
            turn = next((k for k, s in reversed(order) if s <= w), None)
            if turn is not None and turn in counts:
                counts[turn] += 1
        return counts, refused, "by the runner's turn start times"
    scripted, _ = ctx.scripted_turns(TASK_ID)
    texts = [_norm(t) for t in scripted or []]
    cur = 1
    for r in answered:
        last = _norm(r.get("last_user_text"))
        for k in range(len(texts), cur, -1):
            if texts[k - 1] and texts[k - 1] in last:
                cur = k
                break
        counts[cur] = counts.get(cur, 0) + 1
    return counts, refused, "by the scripted user text each request ends with"


# --------------------------------------------------------------------------- reported per turn


def _mine(e):
    """The main agent's own record: native source (not the apparatus), main principal."""
    return (e.source or "").startswith("native") and is_main(e) and getattr(e, "child_principal_id", None) is None


def _count(obj):
    for key in COUNT_KEYS:
        if _is_int(obj.get(key)):
            return key, obj[key]
    return None


def reported_counts(ctx):
    """``({turn: count}, source)`` from the harness's completion records, or None if none states one."""
    per_turn = {}
    for e in ctx.events_of("task_completion"):
        if _mine(e) and isinstance(e.content, dict) and _is_int(e.content.get("model_calls")):
            per_turn[e.conversation_turn] = e.content["model_calls"]
    if per_turn:
        return per_turn, "completion record model_calls"
    keys = set()
    for e in ctx.events:
        raw = e.raw_event
        if _mine(e) and isinstance(raw, dict) and raw.get("type") == "result" and raw.get("parent_tool_use_id") is None:
            hit = _count(raw)
            if hit:
                keys.add(hit[0])
                per_turn[e.conversation_turn] = hit[1]
    if per_turn:
        return per_turn, f"native final record {'/'.join(sorted(keys))} (trace)"
    native = ctx.run_dir / "native"
    for path in sorted(native.glob("turn-*.stdout")) if native.is_dir() else []:
        turn = int(re.sub(r"\D", "", path.stem) or 0)
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if isinstance(obj, dict) and obj.get("type") == "result" and obj.get("parent_tool_use_id") is None:
                hit = _count(obj)
                if hit:
                    keys.add(hit[0])
                    per_turn[turn] = hit[1]
    if per_turn:
        return per_turn, f"native final record {'/'.join(sorted(keys))} (native/turn-<n>.stdout)"
    return None


def final_records(ctx, n_turns):
    """What each turn's last native record of the main agent is and which fields it has (H4's reason)."""
    out = []
    for t in range(1, n_turns + 1):
        records = []
        for e in ctx.events:
            if _mine(e) and e.conversation_turn == t and isinstance(e.raw_event, dict):
                raw = e.raw_event
                data = raw.get("params", {}).get("event", {}) if isinstance(raw.get("params"), dict) else {}
                data = data if isinstance(data, dict) else {}
                records.append((raw.get("type") or data.get("type") or raw.get("method") or e.event_type, raw, data))
        final = [r for r in records if r[0] in FINAL_TYPES]
        if records:
            kind, raw, data = (final or records)[-1]
            fields = sorted(raw) + [f"event.data.{k}" for k in sorted(data.get("data") or {})
                                    if isinstance(data.get("data"), dict)]
            out.append(f"turn {t}: {kind} {fields[:12]}")
        else:
            out.append(f"turn {t}: no native record")
    return "; ".join(out)


# --------------------------------------------------------------------------- harness


def _harness(ctx):
    scripted, why = ctx.scripted_turns(TASK_ID)
    n_turns = len(scripted) if scripted else 3
    out = {"H3-user-turns-delivered": ctx.turns_delivered(scripted, why)}
    gw, refused, basis = gateway_turns(ctx, n_turns)
    running, total = {}, 0
    for t in range(1, n_turns + 1):
        total += gw.get(t, 0)
        running[t] = total
    gtext = f"gateway answered {gw} ({basis})" + (f"; {refused} refused request(s) not counted" if refused else "")
    reported = reported_counts(ctx)
    if reported is None:
        out["H4-call-count-reported"] = (False, (f"not reported: no completion record states a model-call count "
                                                 f"({final_records(ctx, n_turns)}); H1 is not applicable"))
        # Not applicable (unscored, never a pass): with no stated count there is nothing to compare;
        # H4 already fails the run for stating none.
        out["H1-model-calls-per-turn"] = (None, "no completion record states a model-call count, so there "
                                                "is nothing to compare with the gateway (H4 fails)")
        return out
    counts, source = reported
    skipped = ungraded_turns(ctx, n_turns)
    graded = [t for t in range(1, n_turns + 1) if t not in skipped]
    missing = [t for t in graded if t not in counts]
    out["H4-call-count-reported"] = (not missing, f"{source}: {counts}" + (f"; turns {missing} state none" if missing else ""))
    per_turn = all(counts.get(t) == gw.get(t) for t in graded)
    run_total = all(counts.get(t) == running[t] for t in graded)
    lines = "; ".join(f"turn {t}: reported {counts.get(t, 'none')}, gateway {gw.get(t, 0)} (run so far {running[t]})"
                      + (f" [{skipped[t]}: not graded]" if t in skipped else "") for t in range(1, n_turns + 1))
    if not graded:
        verdict = "no turn finished"
    elif missing:
        verdict = f"turns {missing} state no count"
    elif per_turn:
        verdict = "each turn's count equals its answered requests"
    elif run_total:
        verdict = "each turn's count equals the run's answered requests so far (running total)"
    else:
        verdict = "the reported counts match neither the turns' requests nor the running totals"
    out["H1-model-calls-per-turn"] = (bool(graded) and not missing and (per_turn or run_total), f"{verdict} — {lines} [{source}; {gtext}]")
    return out


def score(ctx):
    out = _agent(ctx)
    out.update(_harness(ctx))
    return out
