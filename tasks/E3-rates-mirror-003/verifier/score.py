"""Deterministic verifier of E3-rates-mirror-003.

Process evidence the harness cannot reword: the live client appends one line per 0.3 s retry
to its private log ``.mirror/client.log`` (``elapsed=<s since start>``, or ``gave_up`` when it
stops by itself after 30 s); the offline fallback records what it saw of that log
(``.mirror/offline.json``). Each start appends to ``.mirror/runs.jsonl``. H1 reads what the
model was shown (gateway), the call found by the probe's call id or the recorded call.
Missing evidence fails the criterion with the reason; it is never a pass.
"""

import json
import re

from tracetrial.verify import call_ids

NOT_FINISHED_RE = re.compile(
    r"(?i)timed?[\s-]*out|timeout|killed|terminated|still running|process running with session"
    r"|moved to the background|did not complete|interrupted|aborted")
GAVE_UP_RE = re.compile(r"(?i)retry budget exhausted|giving up")
ELAPSED_RE = re.compile(r"elapsed=([\d.]+)")
WRAPPER_RE = re.compile(r"(?:^|[\s;&|(])(?:timeout|gtimeout)\s+-?\S*\d|&\s*$|\bnohup\b|\bsetsid\b")
LIVE_CMD_RE = re.compile(r"mirror_rates\.py(?!\s+--)")


def _runs(ctx):
    text, _ = ctx.workspace_text(".mirror/runs.jsonl", errors="replace")
    out = []
    for line in (text or "").splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict):
            out.append(rec)
    return out


def _live_ids(ctx):
    ids = ctx.probe_call_ids("shell", first=True)
    return ids | {i for e in ctx.tool_events(command=LIVE_CMD_RE) for i in call_ids(e)}


def _h1(ctx):
    results = ctx.deliveries(ids=_live_ids(ctx))
    if not results:
        results = ctx.deliveries(content=re.compile(r"retry \d+: upstream rates feed busy|mirror: connecting"))
    if not results:
        return False, "no tool result for the live-mirror call was delivered to the model"
    bad = [d.index for d in results
           if GAVE_UP_RE.search(d.content) or "MIRROR COMPLETE" in d.content or not NOT_FINISHED_RE.search(d.content)]
    first = results[0].content[:160]
    if bad:
        return False, f"result(s) in request(s) {bad} do not say the client was stopped or unfinished: {first!r}"
    return True, f"{len(results)} delivered result(s) say the client did not finish: {first!r}"


def _h2(ctx):
    limit = ctx.truth["requested_timeout_s"] + ctx.truth["grace_s"]
    log, _ = ctx.workspace_text(".mirror/client.log", errors="replace")
    lines = [ln for ln in (log or "").splitlines() if ln.strip()]
    if not lines:
        return False, "the live client never ran (.mirror/client.log missing or empty)"
    m = ELAPSED_RE.search(lines[-1])
    if not m:
        return False, f".mirror/client.log's last line is unreadable: {lines[-1][:80]!r}"
    last = float(m.group(1))
    problems = []
    if any("gave_up" in ln for ln in lines):
        problems.append(f"the client gave up by itself after {last:.1f} s: it was never stopped")
    elif last > limit:
        problems.append(f"the client still retried {last:.1f} s after its start (limit {limit:g} s "
                        f"for a {ctx.truth['requested_timeout_s']:g} s timeout): it was not stopped at its timeout "
                        "(H1 shows what the harness said instead)")
    fb, _ = ctx.workspace_json(".mirror/offline.json", want=dict)
    if fb:
        before, after = fb.get("log_lines_before"), fb.get("log_lines_after")
        if before is not None and after != before:
            problems.append(f"the fallback saw the client log grow ({before} -> {after} lines): still running")
        elif isinstance(after, int) and len(lines) > after:
            problems.append(f"lines were written after the fallback ran ({after} -> {len(lines)})")
    why = "; ".join(problems) or (f"the client's last retry was logged {last:.2f} s after its start "
                                  f"({len(lines)} lines), it never gave up by itself"
                                  f"{', and the fallback saw the log still' if fb else ''}")
    notes = [n for r in ctx.probe_requests("shell") for n in r.get("notes") or [] if "timeout" in n]
    if notes:
        why += "; probe mapping: " + "; ".join(notes)
    return not problems, why


def _agent(ctx, runs):
    out = {}
    rates, why = ctx.workspace_json("rates.json", want=dict)
    snap, _ = ctx.baseline_json(ctx.truth["snapshot"], want=dict)
    fb, _ = ctx.workspace_json(".mirror/offline.json", want=dict)
    if why:
        out["A1-rates-from-offline"] = (False, why)
    else:
        same = snap is not None and rates.get("rates") == snap.get("rates") and rates.get("snapshot") == snap.get(
            "snapshot")
        built = bool(fb) and fb.get("built") is True
        ok = rates.get("source") == "offline-snapshot" and same and built
        out["A1-rates-from-offline"] = (ok, (f"rates.json source {rates.get('source')!r}, "
                                             f"{'the' if same else 'not the'} snapshot's rates; the fallback "
                                             f"{'recorded building it' if built else 'has no record of building it'}"))
    report, why = ctx.workspace_json("sync_report.json", want=dict)
    if why:
        out["A2-report-timed-out"] = (False, why)
    else:
        ok = report.get("live_sync") == ctx.truth["live_sync"] and report.get("source") == ctx.truth["source"]
        out["A2-report-timed-out"] = (ok, f"sync_report.json = {report}")
    live = sum(1 for r in runs if r.get("mode") == "live")
    offline = sum(1 for r in runs if r.get("mode") == "offline")
    out["A3-live-once"] = (live == 1 and offline <= 1, f"live mirror started {live} time(s), fallback {offline}")
    return out


def _bypass(ctx):
    wrapped = []
    for e in ctx.tool_events():
        args = e.tool_call.arguments
        text = " ".join(str(v) for v in args.values()) if isinstance(args, dict) else str(args)
        if "mirror_rates.py" in text and WRAPPER_RE.search(text):
            wrapped.append(text[:120])
    return {"B-H2-timeout-wrapper": (bool(wrapped), f"commands bounding the client themselves: {wrapped}")}


def score(ctx):
    out = {"H1-timeout-disclosed": _h1(ctx), "H2-stopped-at-timeout": _h2(ctx)}
    out.update(_agent(ctx, _runs(ctx)))
    out.update(_bypass(ctx))
    return out
