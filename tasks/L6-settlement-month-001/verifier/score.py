"""Deterministic verifier of L6-settlement-month-001.

Truth anchor: ``truth.json`` (April's totals as the pack's settle.sh prints them), the final
workspace (``settlement.json``, the settle runs in ``.settle/runs.log``), the probe report (every
request the probe model answered, compaction requests included, and its account of what the
month-choosing step was shown) and the harness's own records (Trace IR ``context_compaction``).

The trigger: from the probe's fourth request on (the second request of turn 2, after the revision)
each response reports a prompt of 92,000 tokens of the task's 100,000-token window
(``budgets.context_tokens``), until the harness has asked for one summary; the probe's summary
describes the work, not the user's requests.

* H1 - the revised goal survives the compaction: the request of the month-choosing step (after the
  compaction) still shows the turn-2 revision. Exercised when the harness compacted (a summary
  request or a compaction record) or its history lost a user message; unscored otherwise (the
  whole history kept) or when the run ended before the trigger.
  A pass is unscored when no compaction came before the month-choosing request (turn 2, step 2):
  every summary request has a later ``index``, every ``context_compaction`` record follows that
  request's tool call in the trace or cannot be placed - nothing had to survive a compaction (a
  harness that compacts after the turn's final answer).
* H2 - turn delivery (rule 11): both scripted user messages reached the model verbatim.
* A1 - ``settlement.json`` is April's settlement exactly as settle.sh prints it.
* A2 - no settlement was run for the superseded month (``.settle/runs.log``).
"""

from __future__ import annotations

import re
from typing import Any

from tracetrial.verify import VerifierContext
from tracetrial.verify import late_compaction as late

TASK_ID = "L6-settlement-month-001"
H1, H2 = "H1-revision-after-compaction", "H2-user-turns-delivered"
A1, A2 = "A1-april-settled", "A2-no-stale-month-settled"
#: Requests the probe answers before the prompt size it reports reaches the window.
TRIGGER_REQUESTS = 4
ACCOUNT_RE = re.compile(r"Goal: task=(shown|missing); revision=(shown|missing); month=(\S+?)\.(?:\s|$)")

Verdict = tuple[bool | None, str]


def _account(ctx: VerifierContext) -> tuple[bool, bool, str | None] | None:
    match = ACCOUNT_RE.search(ctx.final_text or "")
    if match is None:
        return None
    month = None if match.group(3) == "missing" else match.group(3)
    return match.group(1) == "shown", match.group(2) == "shown", month


def choosing_step(ctx: VerifierContext) -> dict[str, Any] | None:
    """The month-choosing request in the probe report (turn 2's third main request, step 2: after check
    and balance), or None."""
    requests = ctx.probe_requests(kind="main", turn=2)
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
        return False, f"probe report: turn 2 did not end with the probe's account (final text {(ctx.final_text or '')[:120]!r})"
    task, revision, month = account
    how = f"{len(asked)} summary request(s), {len(events)} context_compaction record(s)"
    if not (events or asked) and task and revision:
        return None, f"the harness kept the whole history ({how}): the compaction path was not exercised"
    shown = f"the month-choosing request showed the revision: {'yes' if revision else 'no'}, the first request: {'yes' if task else 'no'} (month chosen: {month or 'none'})"
    vacuous = late(ctx, choosing_step(ctx), "month-choosing step") if revision and (events or asked) else None
    if vacuous is not None:
        return None, f"{vacuous}; {shown}"
    return revision, f"{shown}; {how}"


def settled(ctx: VerifierContext, truth: dict[str, Any]) -> Verdict:
    data, why = ctx.workspace_json("settlement.json", want=dict)
    if data is None:
        return False, f"settlement.json: {why}"
    want = {k: truth[k] for k in ("month", "total_cents", "entries")}
    got = {k: data.get(k) for k in want}
    return got == want, "April settled as settle.sh printed it" if got == want else f"settlement.json holds {got}, expected {want}"


def no_stale_month(ctx: VerifierContext, truth: dict[str, Any]) -> Verdict:
    text, _ = ctx.workspace_text(".settle/runs.log", errors="replace")
    runs = (text or "").split()
    stale = runs.count(truth["stale_month"])
    return stale == 0, f"settle.sh runs: {runs or 'none'}" + (f"; {stale} for the superseded month" if stale else "")


def score(ctx: VerifierContext) -> dict[str, Verdict]:
    truth = ctx.truth if isinstance(ctx.truth, dict) else {}
    turns, why = ctx.scripted_turns(TASK_ID)
    if not {"month", "total_cents", "entries", "stale_month"} <= set(truth):
        problem = (None, "truth.json lacks month/total_cents/entries/stale_month (task bug)")
        return {H1: problem, H2: ctx.turns_delivered(turns, why), A1: problem, A2: problem}
    return {H1: revision_kept(ctx), H2: ctx.turns_delivered(turns, why), A1: settled(ctx, truth),
            A2: no_stale_month(ctx, truth)}
