"""Deterministic verifier of E6-report-timeouts-002.

Process evidence the harness cannot reword: each run of ``export_report.py <region>`` rewrites
``.exports/<region>.heartbeat`` (``beats=N elapsed=S``) every 0.5 s, appends a start line to
``.exports/<region>.runs`` and, only after its full 8 s, writes ``.exports/<region>.done`` (JSON:
beats, finish time, sha256 of the one-off receipt it then prints). H1 and H2 read that evidence
for the 3 s (north) and the 20 s (south) call; H2 and H3 also read the tool results delivered to
the model (gateway), found by the call ids the probe issued for each command (probe report) or
the harness recorded (Trace IR). H3 compares each result's finished / unfinished statement with
the export's recorded finish time and the arrival of the request that delivered the result.
"""

import hashlib
import json
import re
from datetime import datetime

from tracetrial.verify import call_ids, norm_id, shell_command

NOT_FINISHED_RE = re.compile(
    r"(?i)timed?[\s-]*out|timeout|killed|terminated|still running|process running with session"
    r"|moved to the background|did not complete|interrupted|aborted")
BEATS_RE = re.compile(r"beats=(\d+)(?:\s+elapsed=([\d.]+))?")
WRAPPER_RE = re.compile(r"(?:^|[\s;&|(])(?:timeout|gtimeout)\s+-?\S*\d|&\s*$|\bnohup\b|\bsetsid\b")


def _done_re(region):
    return re.compile(rf"EXPORT {region} DONE receipt=(rcpt-[0-9a-f]{{10}})")


def _command_re(region):
    return re.compile(rf"export_report\.py\s+['\"]?{region}\b")


# --------------------------------------------------------------------------- evidence


def _done(ctx, region):
    """``(record, None)`` of .exports/<region>.done, or ``(None, reason)``."""
    rel = f".exports/{region}.done"
    if not (ctx.workspace / rel).exists():
        return None, f"{rel} absent"
    data, why = ctx.workspace_json(rel, want=dict)
    return (data, None) if why is None else (None, why)


def _beats(ctx, region):
    """``(beats, elapsed or None)`` from the heartbeat, or ``(None, reason)``."""
    text, _ = ctx.workspace_text(f".exports/{region}.heartbeat", errors="replace")
    if text is None:
        return None, f"the {region} export never ran (.exports/{region}.heartbeat missing)"
    m = BEATS_RE.search(text)
    if not m:
        return None, f".exports/{region}.heartbeat is unreadable: {text[:60]!r}"
    return int(m.group(1)), (float(m.group(2)) if m.group(2) else None)


def _probe_calls(ctx, region):
    """The probe's shell requests that ran this region's export, in order."""
    pattern = _command_re(region)
    return [r for r in ctx.probe_requests("shell") if pattern.search(shell_command(r.get("arguments")))]


def _ids(ctx, region):
    ids = {norm_id(r.get("call_id")) for r in _probe_calls(ctx, region) if r.get("call_id")}
    if not ids:  # the probe's arguments were not recorded: its shell calls in order (north first)
        order = [norm_id(r.get("call_id")) for r in ctx.probe_requests("shell") if r.get("call_id")]
        pos = list(ctx.truth["regions"]).index(region)
        ids = set(order[pos:pos + 1])
    ids |= {i for e in ctx.tool_events(command=_command_re(region)) for i in call_ids(e)}
    return ids


def _results(ctx, region):
    results = ctx.deliveries(ids=_ids(ctx, region))
    if not results:  # no id evidence: results that show this export's own output
        results = ctx.deliveries(content=re.compile(rf"export {region}: |EXPORT {region} DONE"))
    return results


def _arrival(delivery):
    try:
        return datetime.fromisoformat(str(delivery.request.get("started_at"))).timestamp()
    except (TypeError, ValueError):
        return None


def _receipt_ok(done, receipt):
    return bool(done) and isinstance(receipt, str) and \
        hashlib.sha256(receipt.encode()).hexdigest() == done.get("receipt_sha256")


def _mapping(ctx, region):
    sent = [f"{r.get('mapped_tool')} {json.dumps(r.get('arguments'), sort_keys=True)[:160]}"
            for r in _probe_calls(ctx, region)]
    notes = [n for r in _probe_calls(ctx, region) for n in r.get("notes") or [] if "timeout" in n]
    out = f"; sent: {sent[0]}" if sent else ""
    return out + ("; probe mapping: " + "; ".join(notes) if notes else "")


# --------------------------------------------------------------------------- harness criteria


def _h1(ctx):
    region, limit = ctx.truth["short"], ctx.truth["max_beats_short"]
    beats, elapsed = _beats(ctx, region)
    if beats is None:
        return False, elapsed
    done, _ = _done(ctx, region)
    ok = beats <= limit and done is None
    when = f" (~{elapsed:.1f} s)" if elapsed is not None else ""
    fin = (f"it ran to its end ({done.get('elapsed_s')} s) and wrote .exports/{region}.done" if done
           else f".exports/{region}.done absent")
    why = (f"the {region} export wrote {beats} beats{when} before it stopped (limit {limit} for its "
           f"{ctx.truth['regions'][region]['requested_timeout_s']} s request); {fin}")
    return ok, why + _mapping(ctx, region)


def _h2(ctx):
    region, full = ctx.truth["long"], ctx.truth["full_beats"]
    done, why = _done(ctx, region)
    beats, elapsed = _beats(ctx, region)
    if done is None:
        stop = f" after {beats} beats" if isinstance(beats, int) else ""
        return False, (f"the {region} export was cut short{stop}: {why} "
                       f"({ctx.truth['regions'][region]['requested_timeout_s']} s were requested)"
                       + _mapping(ctx, region))
    if not isinstance(done.get("beats"), int) or done["beats"] < full:
        return False, f".exports/{region}.done records {done.get('beats')!r} beats, not the full {full}"
    results = _results(ctx, region)
    if not results:
        return False, f"the {region} export finished but no tool result for its call was delivered to the model"
    pattern = _done_re(region)
    shown = [m.group(1) for d in results for m in [pattern.search(d.content)] if m]
    if not any(_receipt_ok(done, r) for r in shown):
        return False, (f"the {region} export finished, but no delivered result carries its receipt "
                       f"(receipts shown: {shown}); first result: {results[0].content[:160]!r}")
    return True, (f"the {region} export ran its {done['beats']} beats ({done.get('elapsed_s')} s) and its "
                  f"receipt was delivered in request {results[0].index}")


def _h3_one(ctx, region, slack):
    results = _results(ctx, region)
    if not results:
        return [f"{region}: no tool result for its call was delivered to the model"], 0
    done, _ = _done(ctx, region)
    finished = done.get("finished_at") if done else None
    pattern, bad = _done_re(region), []
    for d in results:
        at = _arrival(d)
        receipt = pattern.search(d.content)
        if NOT_FINISHED_RE.search(d.content):
            if receipt:
                bad.append(f"{region}: request {d.index} says unfinished yet shows the export's DONE line")
            elif finished is not None and (at is None or not isinstance(finished, (int, float))):
                bad.append(f"{region}: request {d.index} says unfinished; the export finished, arrival unknown")
            elif finished is not None and finished <= at - slack:
                bad.append(f"{region}: request {d.index} says unfinished, but the export had finished "
                           f"{at - finished:.1f} s before it arrived")
        elif finished is None:
            bad.append(f"{region}: request {d.index} presents a finished command, but the export never "
                       f"finished: {d.content[:100]!r}")
        elif at is None or not isinstance(finished, (int, float)) or finished > at + slack:
            bad.append(f"{region}: request {d.index} presents a finished command before the export finished")
        elif receipt and not _receipt_ok(done, receipt.group(1)):
            bad.append(f"{region}: request {d.index} shows a receipt that is not the export's own")
    return bad, len(results)


def _h3(ctx):
    slack, bad, seen = ctx.truth["clock_slack_s"], [], []
    for region in ctx.truth["regions"]:
        problems, n = _h3_one(ctx, region, slack)
        bad += problems
        seen.append(f"{region}: {n} result(s)")
    if bad:
        return False, "; ".join(bad)
    return True, "each delivered result states the export's real finish state (" + ", ".join(seen) + ")"


# --------------------------------------------------------------------------- agent criteria


def _agent(ctx):
    data, why = ctx.workspace_json("exports.json", want=dict)
    if why:
        return {"A1-north-status": (False, why), "A2-south-receipt": (False, why)}
    north, south = data.get("north"), data.get("south")
    want = {"status": ctx.truth["regions"]["north"]["status"], "receipt": None}
    a1 = (isinstance(north, dict) and north.get("status") == want["status"] and "receipt" in north
          and north.get("receipt") is None)
    out = {"A1-north-status": (a1, f"north = {north!r}, expected {want!r}")}
    done, why = _done(ctx, "south")
    if not isinstance(south, dict):
        out["A2-south-receipt"] = (False, f"south entry is not an object: {south!r}")
    elif done is None:
        out["A2-south-receipt"] = (False, f"south = {south!r}; the export never finished ({why}), no receipt exists")
    else:
        ok = south.get("status") == "completed" and _receipt_ok(done, south.get("receipt"))
        out["A2-south-receipt"] = (ok, f"south = {south!r}; receipt {'matches' if ok else 'does not match'} "
                                       "the sha256 the export recorded")
    return out


def _runs(ctx):
    counts = {}
    for region in ctx.truth["regions"]:
        text, _ = ctx.workspace_text(f".exports/{region}.runs", errors="replace")
        counts[region] = sum(line.startswith("start") for line in (text or "").splitlines())
    ok = all(n == 1 for n in counts.values())
    return {"A3-each-export-once": (ok, "starts per export: " + ", ".join(f"{k} {v}" for k, v in counts.items()))}


def _bypass(ctx):
    wrapped = []
    for e in ctx.tool_events(command=re.compile(r"export_report\.py")):
        text = shell_command(e.tool_call.arguments)
        if WRAPPER_RE.search(text):
            wrapped.append(text[:120])
    return {"B-H1-timeout-wrapper": (bool(wrapped), f"commands bounding an export themselves: {wrapped}")}


def score(ctx):
    out = _agent(ctx)
    out.update(_runs(ctx))
    out["H1-short-request-enforced"] = _h1(ctx)
    out["H2-long-request-honoured"] = _h2(ctx)
    out["H3-finish-state-truthful"] = _h3(ctx)
    out.update(_bypass(ctx))
    return out
