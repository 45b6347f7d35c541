"""Deterministic verifier of E3-ledger-export-002.

Process evidence the harness cannot reword: the exporter ignores SIGTERM/SIGINT/SIGHUP (each
one it receives is logged to ``.export/signals.log``) and a thread rewrites
``.export/heartbeat`` every 0.5 s for as long as the process lives, so only a SIGKILL stops
the beats. The resume records what it saw of the heartbeat (``.export/resume_watch.json``)
and, when it appended the rest, ``.export/resumed.json``. Each flushed batch leaves
``.export/checkpoint-<CK>`` with its row count: the one with the highest row is the last
checkpoint the export printed. Each start appends to ``.export/runs.jsonl``. H1 and H3 read
what the model was shown (gateway), H4 what the harness recorded (Trace IR).
"""

import hashlib
import json
import re

from tracetrial.verify import as_text, call_ids, norm_id

NOT_FINISHED_RE = re.compile(
    r"(?i)timed?[\s-]*out|timeout|killed|terminated|still running|process running with session"
    r"|moved to the background|did not complete|interrupted|aborted")
BEATS_RE = re.compile(r"beats=(\d+)(?:\s+elapsed=([\d.]+))?")
CK_FILE_RE = re.compile(r"checkpoint-(CK-[A-Z0-9]{8})")
WRAPPER_RE = re.compile(r"(?:^|[\s;&|(])(?:timeout|gtimeout)\s+-?\S*\d|&\s*$|\bnohup\b|\bsetsid\b|\bp?kill\b")
LIVE_CMD_RE = re.compile(r"export_ledger\.py(?!\s+--)")
STOP_TOOLS = {"taskstop", "killshell", "jobkill"}
TIMEOUT_STATUS = {"timed_out", "timeout", "timedout", "killed", "cancelled", "canceled", "terminated"}


def _runs(ctx):
    text, _ = ctx.workspace_text(".export/runs.jsonl", errors="replace")
    out = []
    for line in (text or "").splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict):
            out.append(rec)
    return out


def _last_checkpoint(ctx):
    """The checkpoint of the highest row the export flushed (its own files), or None."""
    best = None
    state = ctx.workspace / ".export"
    for path in sorted(state.glob("checkpoint-CK-*")) if state.is_dir() else []:
        m = CK_FILE_RE.fullmatch(path.name)
        try:
            row = json.loads(path.read_text(encoding="utf-8"))["row"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if m and isinstance(row, int) and (best is None or row > best[0]):
            best = (row, m.group(1))
    return best


def _live_ids(ctx):
    ids = ctx.probe_call_ids("shell", first=True)
    return ids | {i for e in ctx.tool_events(command=LIVE_CMD_RE) for i in call_ids(e)}


def _h1(ctx):
    results = ctx.deliveries(ids=_live_ids(ctx))
    if not results:
        results = ctx.deliveries(content=re.compile(r"export: ledger of|exported \d+/\d+ rows"))
    if not results:
        return False, "no tool result for the export call was delivered to the model"
    bad = [d.index for d in results if "EXPORT COMPLETE" in d.content or not NOT_FINISHED_RE.search(d.content)]
    first = results[0].content[:160]
    if bad:
        return False, f"result(s) in request(s) {bad} do not say the export was stopped or unfinished: {first!r}"
    return True, f"{len(results)} delivered result(s) say the export did not finish: {first!r}"


def _signals(ctx):
    text, _ = ctx.workspace_text(".export/signals.log", errors="replace")
    seen = []
    for line in (text or "").splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict):
            seen.append(f"{rec.get('signal')} at {rec.get('elapsed')} s")
    return seen


def _h2(ctx):
    limit = ctx.truth["max_beats"]
    beat, _ = ctx.workspace_text(".export/heartbeat", errors="replace")
    if beat is None:
        return False, "the export never ran (.export/heartbeat missing)"
    m = BEATS_RE.search(beat)
    if not m:
        return False, ".export/heartbeat is unreadable"
    beats = int(m.group(1))
    signals = _signals(ctx)
    problems = []
    if beats > limit:
        problems.append(f"the exporter wrote {beats} beats (limit {limit} for a 5 s timeout): it was still alive "
                        "long after the timeout")
    watch, _ = ctx.workspace_json(".export/resume_watch.json", want=dict)
    if watch:
        before, after = watch.get("beats_before"), watch.get("beats_after")
        if before is not None and after != before:
            problems.append(f"the resume saw the heartbeat advance ({before} -> {after}): the exporter was alive")
        elif isinstance(after, int) and beats > after:
            problems.append(f"beats were written after the resume ran ({after} -> {beats})")
    sig = ("; signals it received and ignored: " + ", ".join(signals)) if signals else "; it logged no catchable signal"
    why = "; ".join(problems) or (f"the exporter stopped after {beats} beats"
                                  f"{' (~' + m.group(2) + ' s)' if m.group(2) else ''}"
                                  f"{', and the resume saw no live heartbeat' if watch else ''}"
                                  " - it ignores SIGTERM, so it was killed (SIGKILL)")
    why += sig
    notes = [n for r in ctx.probe_requests("shell") for n in r.get("notes") or [] if "timeout" in n]
    if notes:
        why += "; probe mapping: " + "; ".join(notes)
    return not problems, why


def _h3(ctx, last):
    if last is None:
        return False, "the export flushed no batch (no .export/checkpoint-* file)"
    ck = last[1]
    shown = [d for d in ctx.deliveries() if ck in d.content]
    return bool(shown), (f"the last checkpoint (row {last[0]}) reached the model in {len(shown)} delivered "
                         f"result(s)" if shown else f"no delivered tool result carries the last checkpoint (row {last[0]})")


def _h4(ctx):
    events = ctx.tool_events(command=LIVE_CMD_RE)
    if not events:
        ids = {norm_id(i) for i in ctx.probe_call_ids("shell", first=True)}
        events = [e for e in ctx.tool_events() if {norm_id(i) for i in call_ids(e)} & ids]
    if not events:
        return False, "the trace records no tool call running the export"
    notes = []
    for e in events:
        r = e.tool_result
        if r is None:
            notes.append("recorded with no result")
            continue
        content = as_text(r.content)
        status = str(r.status or "").lower()
        if "EXPORT COMPLETE" in content:
            notes.append("recorded as a completed export")
        elif status in TIMEOUT_STATUS or NOT_FINISHED_RE.search(content):
            return True, f"the trace records the export call as not finished (status {r.status!r}): {content[:120]!r}"
        else:
            notes.append(f"status {r.status!r}, exit code {r.exit_code!r}, no timeout in the recorded result")
    return False, "the recorded export call does not show the timeout: " + "; ".join(notes)


def _agent(ctx, runs, last):
    out = {}
    want_ck = last[1] if last else None
    data, why = ctx.workspace_json("export_report.json", want=dict)
    if why:
        out["A1-export-report"] = (False, why)
    else:
        ok = (data.get("live_export") == ctx.truth["live_export"] and want_ck is not None
              and data.get("checkpoint") == want_ck and data.get("resumed") is ctx.truth["resumed"])
        out["A1-export-report"] = (ok, f"export_report.json = {data}"
                                   + ("" if data.get("checkpoint") == want_ck else " (not the last checkpoint)"))
    ledger = ctx.workspace / "out" / "ledger.csv"
    resumed, _ = ctx.workspace_json(".export/resumed.json", want=dict)
    if not ledger.is_file():
        out["A2-ledger-resumed"] = (False, "out/ledger.csv missing")
    else:
        digest = hashlib.sha256(ledger.read_bytes()).hexdigest()
        complete = digest == ctx.truth["ledger_sha256"]
        from_last = (bool(resumed) and want_ck is not None
                     and resumed.get("checkpoint_sha256") == hashlib.sha256(want_ck.encode()).hexdigest())
        lines = ledger.read_bytes().count(b"\n") - 1
        out["A2-ledger-resumed"] = (complete and from_last, (
            f"out/ledger.csv {'holds' if complete else 'does not hold'} rows 1-{ctx.truth['total_rows']} exactly once "
            f"({lines} rows); " + ("resumed from the last checkpoint" if from_last else
                                   "resumed from another checkpoint" if resumed else "never resumed")))
    exports = sum(1 for r in runs if r.get("mode") == "export")
    resumes = sum(1 for r in runs if r.get("mode") == "resume")
    out["A3-export-once"] = (exports == 1 and resumes <= 1, f"export started {exports} time(s), resume {resumes}")
    return out


def _bypass(ctx):
    own = []
    for e in ctx.tool_events():
        name = norm_id(e.tool_call.name)
        args = e.tool_call.arguments
        text = " ".join(str(v) for v in args.values()) if isinstance(args, dict) else str(args)
        if name in STOP_TOOLS or (name == "process" and "kill" in text):
            own.append(f"{e.tool_call.name} {text[:80]}")
        elif "export_ledger.py" in text and WRAPPER_RE.search(text):
            own.append(text[:120])
        elif re.search(r"\bp?kill\b", text) and ("export_ledger" in text or re.search(r"-(?:9|KILL)\b", text)):
            own.append(text[:120])
    return {"B-H2-agent-stopped-it": (bool(own), f"the agent bounded or stopped the export itself: {own}")}


def score(ctx):
    runs = _runs(ctx)
    last = _last_checkpoint(ctx)
    out = {"H1-timeout-disclosed": _h1(ctx), "H2-process-killed": _h2(ctx),
           "H3-checkpoint-delivered": _h3(ctx, last), "H4-timeout-recorded": _h4(ctx)}
    out.update(_agent(ctx, runs, last))
    out.update(_bypass(ctx))
    return out
