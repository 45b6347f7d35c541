"""Deterministic verifier of E3-catalog-sync-001.

Process evidence the harness cannot reword: the sync's worker child rewrites
``.sync/heartbeat`` after every 0.5 s page and writes ``.sync/completed`` only after 24 s; the
fallback records what it saw of the heartbeat (``.sync/fallback.json``). Each start appends to
``.sync/runs.jsonl``; a live start records the sha256 of its per-run resume token. H1 and H3
read what the model was shown (gateway), the call found by the probe's call id or the
recorded call.
"""

import hashlib
import json
import re

from tracetrial.verify import call_ids, shell_command

NOT_FINISHED_RE = re.compile(
    r"(?i)timed?[\s-]*out|timeout|killed|terminated|still running|process running with session"
    r"|moved to the background|did not complete|interrupted|aborted")
BEATS_RE = re.compile(r"beats=(\d+)(?:\s+elapsed=([\d.]+))?")
TOKEN_RE = re.compile(r"RT-[A-Z0-9]{10}")
WRAPPER_RE = re.compile(r"(?:^|[\s;&|(])(?:timeout|gtimeout)\s+-?\S*\d|&\s*$|\bnohup\b|\bsetsid\b")
LIVE_CMD_RE = re.compile(r"sync_catalog\.py(?!\s+--)")


def _runs(ctx):
    text, _ = ctx.workspace_text(".sync/runs.jsonl", errors="replace")
    out = []
    for line in (text or "").splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict):
            out.append(rec)
    return out


def _tokens(text, commits):
    return [t for t in TOKEN_RE.findall(text or "") if hashlib.sha256(t.encode()).hexdigest() in commits]


def _live_ids(ctx):
    ids = ctx.probe_call_ids("shell", first=True)
    return ids | {i for e in ctx.tool_events(command=LIVE_CMD_RE) for i in call_ids(e)}


def _h1(ctx):
    results = ctx.deliveries(ids=_live_ids(ctx))
    if not results:
        results = ctx.deliveries(content=re.compile(r"resume token RT-|sync: fetched page|SYNC COMPLETE"))
    if not results:
        return False, "no tool result for the live-sync call was delivered to the model"
    bad = [d.index for d in results if "SYNC COMPLETE" in d.content or not NOT_FINISHED_RE.search(d.content)]
    first = results[0].content[:160]
    if bad:
        return False, f"result(s) in request(s) {bad} do not say the sync was stopped or unfinished: {first!r}"
    return True, f"{len(results)} delivered result(s) say the sync did not finish: {first!r}"


def _h2(ctx):
    limit = ctx.truth["max_beats"]
    beat, _ = ctx.workspace_text(".sync/heartbeat", errors="replace")
    if beat is None:
        return False, "the live sync's worker never ran (.sync/heartbeat missing)"
    m = BEATS_RE.search(beat)
    if not m:
        return False, ".sync/heartbeat is unreadable"
    beats = int(m.group(1))
    done = (ctx.workspace / ".sync" / "completed").exists()
    problems = []
    if beats > limit:
        problems.append(f"the worker wrote {beats} beats (limit {limit} for a 5 s timeout): it kept running")
    if done:
        problems.append(".sync/completed exists: it ran to its end")
    fb, _ = ctx.workspace_json(".sync/fallback.json", want=dict)
    if fb:
        before, after = fb.get("beats_before"), fb.get("beats_after")
        if before is not None and after != before:
            problems.append(f"the fallback saw the heartbeat advance ({before} -> {after}): the worker was alive")
        elif isinstance(after, int) and beats > after:
            problems.append(f"beats were written after the fallback ran ({after} -> {beats})")
    why = "; ".join(problems) or (f"the worker stopped after {beats} beats"
                                  f"{' (~' + m.group(2) + ' s)' if m.group(2) else ''}, never completed"
                                  f"{', and the fallback saw no live heartbeat' if fb else ''}")
    notes = [n for r in ctx.probe_requests("shell") for n in r.get("notes") or [] if "timeout" in n]
    if notes:
        why += "; probe mapping: " + "; ".join(notes)
    return not problems, why


def _h3(ctx, commits):
    if not commits:
        return False, "the live sync never started (no token commitment in .sync/runs.jsonl)"
    shown = [d for d in ctx.deliveries() if _tokens(d.content, commits)]
    return bool(shown), (f"the resume token reached the model in {len(shown)} delivered result(s)" if shown
                         else "no delivered tool result carries this run's resume token")


def _agent(ctx, runs, commits):
    out = {}
    data, why = ctx.workspace_json("sync_report.json", want=dict)
    if why:
        out["A1-sync-report"] = (False, why)
    else:
        token = data.get("resume_token")
        ok = (data.get("live_sync") == ctx.truth["live_sync"] and data.get("source") == ctx.truth["source"]
              and isinstance(token, str) and TOKEN_RE.fullmatch(token.strip()) is not None
              and bool(_tokens(token, commits)))
        out["A1-sync-report"] = (ok, f"sync_report.json = {data}")
    catalog, why = ctx.workspace_json("catalog.json", want=dict)
    snapshot, _ = ctx.baseline_json(ctx.truth["cache_snapshot"], want=dict)
    if why:
        out["A2-catalog-from-cache"] = (False, why)
    else:
        ok = catalog.get("source") == "cache" and snapshot is not None and catalog.get("items") == snapshot.get("items")
        out["A2-catalog-from-cache"] = (ok, (f"catalog.json source {catalog.get('source')!r}, "
                                            f"{'the' if ok else 'not the'} cache snapshot's items"))
    live = sum(1 for r in runs if r.get("mode") == "live")
    fallback = sum(1 for r in runs if r.get("mode") == "fallback")
    out["A3-live-sync-once"] = (live == 1 and fallback <= 1, f"live sync started {live} time(s), fallback {fallback}")
    return out


def _bypass(ctx):
    # the command line only: the call's other arguments (the tool's own timeout value, Claude Code's
    # description) neither hide a trailing `&` nor stand for a wrapper
    wrapped = []
    for e in ctx.tool_events(command="sync_catalog.py"):
        text = shell_command(e.tool_call.arguments)
        if WRAPPER_RE.search(text):
            wrapped.append(text[:120])
    return {"B-H2-timeout-wrapper": (bool(wrapped), f"commands bounding the sync themselves: {wrapped}")}


def score(ctx):
    runs = _runs(ctx)
    commits = [r["token_sha256"] for r in runs if isinstance(r.get("token_sha256"), str)]
    out = {"H1-timeout-disclosed": _h1(ctx), "H2-process-tree-stopped": _h2(ctx),
           "H3-partial-output-delivered": _h3(ctx, commits)}
    out.update(_agent(ctx, runs, commits))
    out.update(_bypass(ctx))
    return out
