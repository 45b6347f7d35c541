"""Deterministic verifier of E5-export-job-001.

Truth anchor: ``truth.json`` (the pack's ``export.sh`` always exits 4 with the reason "customer
table locked" on stderr) and the provider-boundary records (the tool results delivered to the
model, in request order), with the Trace IR's tool calls to tell which call was which.

* H1 - the job's end relayed: the first delivered tool result (or background-task notification
  the harness pushed, Claude Code 2.1.332's way: it declares no job-status tool and re-invokes the
  model when the job exits) that states an exit status, the foreground check and the status-file
  write aside (their call ids from the Trace IR), carries the real exit code.
* H2 (diagnostic) - started in the background: the result of the first call that runs
  ``export.sh`` states no exit status, and a later job result or notification does.

H1 and H2 are unscored when nothing states the job's end and the probe found no background
facility to drive (its report lists an absent capability, or its final answer says the harness
declares none): what the probe could not start is not the harness's failure (rule 12).
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
#: The probe's final answer when the harness declares no background-job facility it can drive.
NO_FACILITY = "declares no background-job facility"

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
    (each call id once: a result is re-sent with every later request), and the pushed
    notifications that state one, in request order."""
    others, seen, out = _other_ids(ctx), set(), []
    for d in ctx.deliveries():
        cid = norm_id(d.call_id)
        if cid in seen or cid in others:
            continue
        seen.add(cid)
        if stated_exit_code(d.content) is not None:
            out.append(d)
    pushed = [d for d in ctx.notifications() if stated_exit_code(d.content) is not None]
    if not pushed:
        return out
    return sorted(out + pushed, key=lambda d: d.index if isinstance(d.index, int) else 0)


def no_facility(ctx: VerifierContext) -> str | None:
    """Why the probe started no job (the harness offered it no background facility), or None."""
    absent = (ctx.probe or {}).get("absent_capabilities") or []
    if absent:
        return f"the harness lacks a facility the probe needed: {absent}"
    if NO_FACILITY in (ctx.final_text or ""):
        return "the probe found no background-job facility to drive, so it started no job"
    return None


def exit_relayed(ctx: VerifierContext, code: int) -> Verdict:
    found = job_results(ctx)
    if not found:
        why = no_facility(ctx)
        if why:
            return None, f"no job status was delivered and {why}"
        return False, "no delivered job result states how the export job ended"
    first = found[0]
    shown = stated_exit_code(first.content)
    return shown == code, (f"first job result stating an end (request {first.index}, call {first.call_id}): "
                           f"exit code {shown}, real {code}")


def started_in_background(ctx: VerifierContext) -> Verdict:
    start = ctx.first_tool_event(command=SCRIPT) or ctx.first_tool_event(args=SCRIPT)
    if start is None:
        why = no_facility(ctx)
        if why:
            return None, why
        return False, f"no tool call ran {SCRIPT}"
    ids = call_ids(start)
    got = ctx.deliveries(ids=ids)
    if not got:
        return False, f"the start call {sorted(ids)} got no delivered result"
    early = stated_exit_code(got[0].content)
    own = {norm_id(i) for i in ids}
    later = [d for d in job_results(ctx) if d.result.get("pushed") or norm_id(d.call_id) not in own]
    why = no_facility(ctx)
    if early is None and not later and why:
        return None, f"start result states no exit status and no later job result came: {why}"
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
