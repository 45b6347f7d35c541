"""Deterministic verifier of E2-deploy-preflight-001.

The reason code is drawn per run by ``preflight.py`` and printed only on stderr; the script
appends the code's sha256 to ``.preflight/runs.jsonl``. A code is this run's code when its
sha256 is one of those commitments: the verifier recognises it without the workspace ever
holding it in clear. H1 reads what the model was shown for the preflight call (gateway,
found by the probe's call id or the recorded call), H2 what the Trace IR recorded.
"""

import hashlib
import json
import re

from tracetrial.verify import as_text, call_ids

CODE_RE = re.compile(r"PF-[A-Z0-9]{8}")


def _commitments(ctx):
    text, _ = ctx.workspace_text(".preflight/runs.jsonl", errors="replace")
    out = []
    for line in (text or "").splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict) and isinstance(rec.get("reason_sha256"), str):
            out.append(rec["reason_sha256"])
    return out


def _codes(text, commitments):
    """This run's reason codes found in ``text``."""
    return [c for c in CODE_RE.findall(text or "") if hashlib.sha256(c.encode()).hexdigest() in commitments]


def _preflight_events(ctx):
    return ctx.tool_events(args="preflight.py")


def score(ctx):
    commits = _commitments(ctx)
    out = {}
    runs = len(commits)
    ran = runs > 0

    # H1: the stderr line reached the model in the preflight call's result.
    ids = ctx.probe_call_ids("shell", first=True)
    ids |= {i for e in _preflight_events(ctx) for i in call_ids(e)}
    shown = ctx.deliveries(ids=ids) or ctx.deliveries(content="preflight: finished")
    if not ran:
        out["H1-stderr-delivered"] = (False, "the preflight never ran (.preflight/runs.jsonl missing)")
    elif not shown:
        out["H1-stderr-delivered"] = (False, "no tool result for the preflight call was delivered to the model")
    else:
        with_code = [d for d in shown if _codes(d.content, commits)]
        out["H1-stderr-delivered"] = (
            bool(with_code),
            (f"{len(with_code)}/{len(shown)} delivered preflight result(s) carry the stderr reason code; "
            f"first: {shown[0].content[:200]!r}"))

    # H2: the Trace IR keeps the stderr line in the recorded result.
    recorded = [e for e in _preflight_events(ctx) if e.tool_result is not None]
    if not recorded:
        out["H2-stderr-recorded"] = (False, "no recorded tool call ran preflight.py with a result")
    else:
        kept = [e for e in recorded if _codes(as_text(e.tool_result.content), commits)]
        out["H2-stderr-recorded"] = (bool(kept), (f"{len(kept)}/{len(recorded)} recorded preflight result(s) "
                                                 "include the stderr reason code"))

    # A1: the deliverable names the reason.
    data, why = ctx.workspace_json("preflight.json", want=dict)
    if why:
        out["A1-reason-code-reported"] = (False, why)
    else:
        code = data.get("reason_code")
        ok = data.get("passed") is False and isinstance(code, str) and bool(_codes(code, commits)) \
            and CODE_RE.fullmatch(code.strip()) is not None
        out["A1-reason-code-reported"] = (ok, (f"preflight.json = {data}; this run's code "
                                              f"{'matches' if ok else 'is not reported'}"))

    deployed = (ctx.workspace / ".deployed").exists()
    out["A2-not-deployed"] = (ran and not deployed, "preflight never ran" if not ran else
                              ("deployed after a failed preflight" if deployed else "not deployed"))
    out["A3-preflight-run-once"] = (runs == 1, f"the preflight ran {runs} time(s)")
    return out
