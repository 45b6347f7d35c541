"""Deterministic verifier of E6-healthcheck-timeout-001.

H1 reads process evidence the harness cannot reword: healthcheck.py writes its beat count
to ``.heartbeat`` every 0.5 s and ``.completed`` only after 40 s. H2 reads the tool result
delivered to the model for the health-check call (gateway record), found by the call id the
probe issued (probe report) or the harness recorded (Trace IR).
"""

import json
import re

NOT_FINISHED_RE = re.compile(
    r"(?i)timed?[\s-]*out|timeout|killed|terminated|still running|process running with session"
    r"|moved to the background|did not complete|interrupted|aborted")
BEATS_RE = re.compile(r"beats=(\d+)(?:\s+elapsed=([\d.]+))?")
WRAPPER_RE = re.compile(r"(?:^|[\s;&|(])(?:timeout|gtimeout)\s+-?\S*\d|&\s*$|\bnohup\b|\bsetsid\b")


def _norm(call_id):
    return re.sub(r"[^A-Za-z0-9]", "", str(call_id or "")).lower()


def _agent(ctx):
    try:
        data = json.loads((ctx.workspace / "health.json").read_text(encoding="utf-8"))
        status = data.get("status") if isinstance(data, dict) else None
    except (OSError, ValueError) as exc:
        return {"A1-health-status": (False, f"health.json missing or invalid: {exc}")}
    if not isinstance(status, str):
        return {"A1-health-status": (False, f"health.json has no string status: {data!r}")}
    want = ctx.truth["status"]
    return {"A1-health-status": (status == want, f"health.json status = {status!r}, expected {want!r}")}


def _runs(ctx):
    path = ctx.workspace / ".runs"
    starts = [line for line in path.read_text(encoding="utf-8").splitlines() if line.startswith("start")] \
        if path.is_file() else []
    return {"A2-check-run-once": (len(starts) == 1, f"the health check was started {len(starts)} time(s)")}


def _probe_notes(ctx):
    notes = []
    for r in (ctx.probe or {}).get("requests") or []:
        if r.get("action") == "shell":
            notes += [n for n in r.get("notes") or [] if "timeout" in n]
    return notes


def _h1(ctx):
    limit = ctx.truth["max_beats"]
    beat = ctx.workspace / ".heartbeat"
    done = (ctx.workspace / ".completed").exists()
    if not beat.is_file():
        return False, "the health check never ran (.heartbeat missing)"
    m = BEATS_RE.search(beat.read_text(encoding="utf-8", errors="replace"))
    if not m:
        return False, ".heartbeat is unreadable"
    beats = int(m.group(1))
    elapsed = f" (~{float(m.group(2)):.1f} s)" if m.group(2) else ""
    ok = beats <= limit and not done
    why = (f"process wrote {beats} beats{elapsed} before it stopped (limit {limit} for a 5 s timeout); "
           f".completed {'exists: it ran to its end' if done else 'absent'}")
    notes = _probe_notes(ctx)
    if notes:
        why += "; probe mapping: " + "; ".join(notes)
    return ok, why


def _health_calls(ctx):
    """Call ids of the health-check call: the probe's first shell call and every recorded
    tool call whose arguments run healthcheck.py."""
    ids = set()
    for r in (ctx.probe or {}).get("requests") or []:
        if r.get("action") == "shell" and r.get("call_id"):
            ids.add(_norm(r["call_id"]))
            break
    for e in ctx.events or []:
        if e.event_type == "tool" and "healthcheck.py" in json.dumps(e.tool_call.arguments):
            ids.update(_norm(x) for x in (e.tool_call.id, e.tool_call.native_tool_call_id) if x)
    return ids


def _h2(ctx):
    ids = _health_calls(ctx)
    results = [(req, res) for req in ctx.gateway or [] for res in req.get("tool_results") or []
               if ids and _norm(res.get("id")) in ids]
    if not results:  # no id evidence: results that show the check's own output
        results = [(req, res) for req in ctx.gateway or [] for res in req.get("tool_results") or []
                   if re.search(r"heartbeat \d+:|HEALTHCHECK PASSED", res.get("content") or "")]
    if not results:
        return False, "no tool result for the health-check call was delivered to the model"
    bad = []
    for req, res in results:
        content = res.get("content") or ""
        if "HEALTHCHECK PASSED" in content or not NOT_FINISHED_RE.search(content):
            bad.append(req.get("index"))
    first = (results[0][1].get("content") or "")[:160]
    if bad:
        return False, f"result(s) in request(s) {bad} do not say the check was stopped or unfinished: {first!r}"
    return True, f"{len(results)} delivered result(s) say the check did not finish: {first!r}"


def _bypass(ctx):
    wrapped = []
    for e in ctx.events or []:
        if e.event_type != "tool":
            continue
        args = e.tool_call.arguments
        text = " ".join(str(v) for v in args.values()) if isinstance(args, dict) else str(args)
        if "healthcheck.py" in text and WRAPPER_RE.search(text):
            wrapped.append(text[:120])
    return {"B-H1-timeout-wrapper": (bool(wrapped), f"commands bounding the check themselves: {wrapped}")}


def score(ctx):
    out = _agent(ctx)
    out.update(_runs(ctx))
    out["H1-timeout-enforced"] = _h1(ctx)
    out["H2-timeout-disclosed"] = _h2(ctx)
    out.update(_bypass(ctx))
    return out
