"""Deterministic verifier of E5-export-job-001.

Truth anchor: ``truth.json`` (the pack's ``export.sh`` always exits 4 with the reason "customer
table locked" on stderr) and the provider-boundary records (the tool results delivered to the
model, in request order), with the Trace IR's tool calls to tell which call was which.

* H1 - the job's end relayed: the first delivered tool result that states an exit status, the
  foreground check and the status-file write aside (their call ids from the Trace IR), carries
  the real exit code. Unscored when nothing states the job's end and the probe report lists an
  absent capability (the harness declares no background facility).
* H2 (diagnostic) - started in the background: the result of the first call that runs
  ``export.sh`` states no exit status, and a later job result does.
* A1 - ``export_status.json`` says failed, the real exit code and the reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tracetrial.verify import Delivery, VerifierContext, call_ids, norm_id, norm_text, stated_exit_code

H1, H2, A1 = "H1-job-exit-relayed", "H2-job-started-in-background", "A1-status-reports-failure"
SCRIPT = "export.sh"
#: Calls that are not about the job: the foreground check and the status file.
OTHER_MARKS = ("inputs/orders.csv", "export_status.json")

Verdict = tuple[bool | None, str]


def _truth(ctx: VerifierContext) -> Mapping[str, Any]:
    truth = ctx.truth if isinstance(ctx.truth, Mapping) else {}
    return truth


def _other_ids(ctx: VerifierContext) -> set[str]:
    ids: set[str] = set()
    for mark in OTHER_MARKS:
        for ev in ctx.tool_events(args=mark):
            ids |= call_ids(ev)
    return ids


def job_results(ctx: VerifierContext) -> list[Delivery]:
    """Delivered results that state an exit status, other than the foreground check and the write
    (each call id once: a result is re-sent with every later request)."""
    others, seen, out = _other_ids(ctx), set(), []
    for d in ctx.deliveries():
        cid = norm_id(d.call_id)
        if cid in seen or cid in others:
            continue
        seen.add(cid)
        if stated_exit_code(d.content) is not None:
            out.append(d)
    return out


def exit_relayed(ctx: VerifierContext, code: int) -> Verdict:
    found = job_results(ctx)
    if not found:
        absent = (ctx.probe or {}).get("absent_capabilities") or []
        if absent:
            return None, f"no job status was delivered and the harness lacks a facility the probe needed: {absent}"
        return False, "no delivered job result states how the export job ended"
    first = found[0]
    shown = stated_exit_code(first.content)
    return shown == code, (f"first job result stating an end (request {first.index}, call {first.call_id}): "
                           f"exit code {shown}, real {code}")


def started_in_background(ctx: VerifierContext) -> Verdict:
    start = ctx.first_tool_event(command=SCRIPT) or ctx.first_tool_event(args=SCRIPT)
    if start is None:
        return False, f"no tool call ran {SCRIPT}"
    ids = call_ids(start)
    got = ctx.deliveries(ids=ids)
    if not got:
        return False, f"the start call {sorted(ids)} got no delivered result"
    early = stated_exit_code(got[0].content)
    later = [d for d in job_results(ctx) if norm_id(d.call_id) not in {norm_id(i) for i in ids}]
    ok = early is None and bool(later)
    return ok, (f"start result states {'no exit status' if early is None else f'exit code {early}'}; "
                f"{len(later)} later job result(s) state the end")


def status_file(ctx: VerifierContext, truth: Mapping[str, Any]) -> Verdict:
    status, why = ctx.workspace_json("export_status.json", want=dict)
    if why:
        return False, why
    reason = norm_text(status.get("reason")).lower()
    want = norm_text(truth.get("reason")).lower()
    ok = (status.get("status") == truth.get("status") and status.get("exit_code") == truth.get("exit_code")
          and bool(want) and want in reason)
    return ok, f"export_status.json = {status}"


def score(ctx: VerifierContext) -> dict[str, Verdict]:
    truth = _truth(ctx)
    code = truth.get("exit_code")
    return {
        H1: exit_relayed(ctx, code if isinstance(code, int) else 4),
        H2: started_in_background(ctx),
        A1: status_file(ctx, truth),
    }
