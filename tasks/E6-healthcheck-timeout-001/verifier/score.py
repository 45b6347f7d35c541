"""Deterministic verifier of E6-healthcheck-timeout-001.

H1 reads process evidence the harness cannot reword: healthcheck.py writes its beat count
to ``.heartbeat`` every 0.5 s and ``.completed`` only after 40 s. H2 reads the tool result
delivered to the model for the health-check call (gateway record), found by the call id the
probe issued (probe report) or the harness recorded (Trace IR) for a shell command that runs the
script (:data:`RUN_RE`; reading it is no health-check call).
"""

import re

from tracetrial.verify import call_ids, shell_command

NOT_FINISHED_RE = re.compile(
    r"(?i)timed?[\s-]*out|timeout|killed|terminated|still running|process running with session"
    r"|moved to the background|did not complete|interrupted|aborted")
BEATS_RE = re.compile(r"beats=(\d+)(?:\s+elapsed=([\d.]+))?")
WRAPPER_RE = re.compile(r"(?:^|[\s;&|(])(?:timeout|gtimeout)\s+-?\S*\d|&\s*$|\bnohup\b|\bsetsid\b")
#: A shell command that runs the check (``python3 healthcheck.py``, ``./healthcheck.py``, ``timeout 5 …``) —
#: not one that reads it (``cat``/``sed`` of the script, whose source holds HEALTHCHECK PASSED).
RUN_RE = re.compile(r"(?:(?:^|[;&|(`\n])\s*|(?:\bpython[\d.]*\b(?:\s+-[^\s-]\S*)*|\buv\s+run|\b(?:exec|nohup|setsid|time)"
                    r"|\bg?timeout(?:\s+-\S+)*\s+\S+|\b(?:ba|z|da)?sh(?:\s+-\S+)*)\s+['\"]?)(?:[\w./~-]*/)?healthcheck\.py\b")
#: The check's own output, for results found by content (a line printed per beat, the final line
#: alone): the script's source (``print("HEALTHCHECK PASSED", …)``) is not.
OUTPUT_RE = re.compile(r"(?m)heartbeat \d+:|^HEALTHCHECK PASSED\s*$")


def _agent(ctx):
    data, why = ctx.workspace_json("health.json")
    if why:
        return {"A1-health-status": (False, why)}
    status = data.get("status") if isinstance(data, dict) else None
    if not isinstance(status, str):
        return {"A1-health-status": (False, f"health.json has no string status: {data!r}")}
    want = ctx.truth["status"]
    return {"A1-health-status": (status == want, f"health.json status = {status!r}, expected {want!r}")}


def _runs(ctx):
    text, _ = ctx.workspace_text(".runs")
    starts = [line for line in (text or "").splitlines() if line.startswith("start")]
    return {"A2-check-run-once": (len(starts) == 1, f"the health check was started {len(starts)} time(s)")}


def _h1(ctx):
    limit = ctx.truth["max_beats"]
    beat, _ = ctx.workspace_text(".heartbeat", errors="replace")
    done = (ctx.workspace / ".completed").exists()
    if beat is None:
        return False, "the health check never ran (.heartbeat missing)"
    m = BEATS_RE.search(beat)
    if not m:
        return False, ".heartbeat is unreadable"
    beats = int(m.group(1))
    elapsed = f" (~{float(m.group(2)):.1f} s)" if m.group(2) else ""
    ok = beats <= limit and not done
    why = (f"process wrote {beats} beats{elapsed} before it stopped (limit {limit} for a 5 s timeout); "
           f".completed {'exists: it ran to its end' if done else 'absent'}")
    notes = [n for r in ctx.probe_requests("shell") for n in r.get("notes") or [] if "timeout" in n]
    if notes:
        why += "; probe mapping: " + "; ".join(notes)
    return ok, why


def _h2(ctx):
    # the health-check call: the probe's first shell call and every recorded shell command that runs
    # healthcheck.py (reading the script is no health-check call: its source holds HEALTHCHECK PASSED)
    ids = ctx.probe_call_ids("shell", first=True)
    ids |= {i for e in ctx.tool_events(command=RUN_RE) for i in call_ids(e)}
    results = ctx.deliveries(ids=ids)
    if not results:  # no id evidence: results that show the check's own output (not its source)
        results = ctx.deliveries(content=OUTPUT_RE)
    if not results:
        return False, "no tool result for the health-check call was delivered to the model"
    bad = [d.index for d in results if "HEALTHCHECK PASSED" in d.content or not NOT_FINISHED_RE.search(d.content)]
    first = results[0].content[:160]
    if bad:
        return False, f"result(s) in request(s) {bad} do not say the check was stopped or unfinished: {first!r}"
    return True, f"{len(results)} delivered result(s) say the check did not finish: {first!r}"


def _bypass(ctx):
    # the command line only (not Claude Code's description, which may say "with timeout 5s")
    wrapped = []
    for e in ctx.tool_events(command=RUN_RE):
        text = shell_command(e.tool_call.arguments)
        if WRAPPER_RE.search(text):
            wrapped.append(text[:120])
    return {"B-H1-timeout-wrapper": (bool(wrapped), f"commands bounding the check themselves: {wrapped}")}


def score(ctx):
    out = _agent(ctx)
    out.update(_runs(ctx))
    out["H1-timeout-enforced"] = _h1(ctx)
    out["H2-timeout-disclosed"] = _h2(ctx)
    out.update(_bypass(ctx))
    return out
