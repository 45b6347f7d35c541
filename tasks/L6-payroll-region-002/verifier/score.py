"""Deterministic verifier of L6-payroll-region-002.

Truth anchor: ``truth.json`` (APAC's export totals as the pack's export.sh prints them), the final
workspace (``payroll_export.json``, the export runs in ``.export/runs.log``), the probe report
(every request it answered, compaction requests included, and its account of what turn 3 was
shown) and the harness's records (Trace IR ``context_compaction``).

The goal is stated in turn 1 (EMEA), corrected in turn 2 (APAC, a middle message the last one does
not restate), and acted on in turn 3. From the probe's fifth request on (turn 3's second) each
response reports a prompt of 92,000 tokens of the 100,000-token window until the harness has asked
for one summary.

* H1 - the correction survives the compaction: the request at which turn 3 chooses the region
  (after the compaction) still shows the turn-2 correction. Exercised when the harness compacted
  (a summary request or a compaction record) or lost a user message; unscored otherwise, or when
  the run ended before the trigger.
  A pass is unscored when no compaction came before the region-choosing request (turn 3, step 2):
  every summary request has a later ``index``, every ``context_compaction`` record follows that
  request's tool call in the trace or cannot be placed - nothing had to survive a compaction (a
  harness that compacts after the turn's final answer).
* H2 - turn delivery (rule 11): the three scripted user messages reached the model verbatim.
* H3 - the correction is carried into turn 3: its first request (before any compaction) shows it.
* A1 - ``payroll_export.json`` is APAC's export exactly as export.sh prints it.
* A2 - export.sh never ran for EMEA, the region the correction superseded.
"""

from __future__ import annotations

import re
from typing import Any

from tracetrial.verify import VerifierContext
from tracetrial.verify import late_compaction as late

TASK_ID = "L6-payroll-region-002"
H1, H2, H3 = "H1-revision-after-compaction", "H2-user-turns-delivered", "H3-revision-carried-into-turn-3"
A1, A2 = "A1-apac-exported", "A2-no-stale-region-exported"
#: Requests the probe answers before the prompt size it reports reaches the window.
TRIGGER_REQUESTS = 5
ACCOUNT_RE = re.compile(r"Goal: start=(shown|missing); revision=(shown|missing); region=(\S+?)\.(?:\s|$)")

Verdict = tuple[bool | None, str]


def _account(ctx: VerifierContext) -> tuple[bool, bool, str | None] | None:
    match = ACCOUNT_RE.search(ctx.final_text or "")
    if match is None:
        return None
    region = None if match.group(3) == "missing" else match.group(3)
    return match.group(1) == "shown", match.group(2) == "shown", region


def _no_account(ctx: VerifierContext) -> Verdict:
    return False, f"probe report: turn 3 did not end with the probe's account (final text {(ctx.final_text or '')[:120]!r})"


def choosing_step(ctx: VerifierContext) -> dict[str, Any] | None:
    """The region-choosing request in the probe report (turn 3's third main request, step 2: after validate
    and audit), or None."""
    requests = ctx.probe_requests(kind="main", turn=3)
    if any("step" in r for r in requests):
        return next((r for r in requests if r.get("step") == 2), None)
    return requests[2] if len(requests) > 2 else None



def revision_kept(ctx: VerifierContext) -> Verdict:
    if ctx.probe is None:
        return None, "no probe report: the trigger (reported prompt size) cannot be established"
    if len(ctx.probe_requests()) < TRIGGER_REQUESTS:
        return None, f"the run ended after {len(ctx.probe_requests())} request(s), before the reported prompt size reached the window"
    events, asked = ctx.events_of("context_compaction"), ctx.probe_requests(kind="compaction")
    account = _account(ctx)
    if account is None:
        return _no_account(ctx)
    start, revision, region = account
    how = f"{len(asked)} summary request(s), {len(events)} context_compaction record(s)"
    if not (events or asked) and start and revision:
        return None, f"the harness kept the whole history ({how}): the compaction path was not exercised"
    shown = f"the region-choosing request showed the correction: {'yes' if revision else 'no'} (region chosen: {region or 'none'})"
    vacuous = late(ctx, choosing_step(ctx), "region-choosing step") if revision and (events or asked) else None
    if vacuous is not None:
        return None, f"{vacuous}; {shown}"
    return revision, f"{shown}; {how}"


def carried(ctx: VerifierContext) -> Verdict:
    if ctx.probe is None:
        return None, "no probe report: what turn 3's first request showed is unknown"
    if not ctx.probe_requests(turn=3, kind="main"):
        return False, "probe report: no turn-3 request reached the probe model"
    account = _account(ctx)
    if account is None:
        return _no_account(ctx)
    return account[0], f"turn 3's first request showed the turn-2 correction: {'yes' if account[0] else 'no'}"


def exported(ctx: VerifierContext, truth: dict[str, Any]) -> Verdict:
    data, why = ctx.workspace_json("payroll_export.json", want=dict)
    if data is None:
        return False, f"payroll_export.json: {why}"
    want = {k: truth[k] for k in ("region", "employees", "gross_cents")}
    got = {k: data.get(k) for k in want}
    return got == want, "APAC exported as export.sh printed it" if got == want else f"payroll_export.json holds {got}, expected {want}"


def no_stale_region(ctx: VerifierContext, truth: dict[str, Any]) -> Verdict:
    text, _ = ctx.workspace_text(".export/runs.log", errors="replace")
    runs = (text or "").split()
    stale = runs.count(truth["stale_region"])
    return stale == 0, f"export.sh runs: {runs or 'none'}" + (f"; {stale} for the superseded region" if stale else "")


def score(ctx: VerifierContext) -> dict[str, Verdict]:
    truth = ctx.truth if isinstance(ctx.truth, dict) else {}
    turns, why = ctx.scripted_turns(TASK_ID)
    if not {"region", "employees", "gross_cents", "stale_region"} <= set(truth):
        problem = (None, "truth.json lacks region/employees/gross_cents/stale_region (task bug)")
        return {H1: problem, H2: ctx.turns_delivered(turns, why), H3: problem, A1: problem, A2: problem}
    return {H1: revision_kept(ctx), H2: ctx.turns_delivered(turns, why), H3: carried(ctx),
            A1: exported(ctx, truth), A2: no_stale_region(ctx, truth)}
