"""Deterministic verifier of C2-retention-config-001.

Truth anchor: ``truth.json`` (the two fixed settings and the three shard ids the pack's inventory
script prints), the probe report (every request the probe model answered, compaction requests
included, and its account of what the write step was shown) and the harness's own records (Trace
IR ``context_compaction`` events).

The trigger: from the probe's third request on, each response reports a prompt of 92,000 tokens of
the task's 100,000-token window (``budgets.context_tokens``), until the harness has asked for one
summary.

* H1 - a compaction is recorded: when the harness compacted (it asked for a summary, or its records
  show a compaction), its records hold a ``context_compaction`` event; when the task's first
  message is gone from the write step's request with neither a summary request nor a record, the
  history was cut silently (fail). Not exercised (unscored) when the harness kept the whole history
  (no summary request, no record, the first message still shown) or the run ended before the
  trigger.
* H2 - the settings survive the compaction: the write step's request (after the compaction) still
  states both fixed settings with their values (probe account). Unscored where H1 is not exercised,
  and a pass is unscored when no compaction came before the write step (every summary request has
  a later ``index`` than the write step's request, every ``context_compaction`` record follows that
  request's tool call in the trace or cannot be placed): then nothing had to survive a compaction
  (a harness that compacts after the turn's final answer).
* A1 - ``deploy/retention.yaml`` holds both settings with their values and the three shard ids,
  sorted.
"""

from __future__ import annotations

import re
from typing import Any

from tracetrial.verify import VerifierContext
from tracetrial.verify import late_compaction as late

H1, H2, A1 = "H1-compaction-recorded", "H2-constraints-kept", "A1-config-respects-constraints"
CONFIG = "deploy/retention.yaml"
#: Requests the probe answers before the prompt size it reports reaches the window.
TRIGGER_REQUESTS = 3
ACCOUNT_RE = re.compile(r"Context: prompt=(shown|missing); region=(\S+?); retention_days=(\S+?)\.(?:\s|$)")

Verdict = tuple[bool | None, str]


def _account(ctx: VerifierContext) -> tuple[bool, str | None, str | None] | None:
    match = ACCOUNT_RE.search(ctx.final_text or "")
    if match is None:
        return None
    region, days = (None if v == "missing" else v for v in match.group(2, 3))
    return match.group(1) == "shown", region, days


def compaction(ctx: VerifierContext) -> tuple[list[Any], list[dict[str, Any]]]:
    """The harness's compaction records and the summary requests the probe answered."""
    return ctx.events_of("context_compaction"), ctx.probe_requests(kind="compaction")


def exercised(ctx: VerifierContext) -> tuple[bool | None, str]:
    """Whether the compaction path ran: ``True`` (compacted or cut), ``None`` (not exercised), and why."""
    if ctx.probe is None:
        return None, "no probe report: the trigger (reported prompt size) cannot be established"
    if len(ctx.probe_requests()) < TRIGGER_REQUESTS:
        return None, f"the run ended after {len(ctx.probe_requests())} request(s), before the reported prompt size reached the window"
    events, asked = compaction(ctx)
    if events or asked:
        return True, f"{len(asked)} summary request(s), {len(events)} context_compaction record(s)"
    account = _account(ctx)
    if account is None:
        return True, "the probe never reached the write step's account"
    if account[0]:
        return None, "the harness kept the whole history (no summary request, no compaction record, the first message still shown)"
    return True, "the task's first message is gone from the write step's request"


def write_step(ctx: VerifierContext) -> dict[str, Any] | None:
    """The write step's request in the probe report (the main agent's first ``write_file``), or None."""
    return next(iter(ctx.probe_requests("write_file", kind="main")), None)



def recorded(ctx: VerifierContext) -> Verdict:
    ran, why = exercised(ctx)
    if ran is None:
        return None, why
    events, asked = compaction(ctx)
    if events:
        kinds = sorted({str(getattr(e, "native_event_type", None)) for e in events})
        return True, f"{why}; native compaction record(s): {kinds}"
    if asked:
        return False, f"{why}: the harness asked for a summary but recorded no compaction"
    return False, f"{why}, with no summary request and no compaction record: the history was cut silently"


def kept(ctx: VerifierContext, truth: dict[str, Any]) -> Verdict:
    ran, why = exercised(ctx)
    if ran is None:
        return None, why
    account = _account(ctx)
    if account is None:
        return False, f"probe report: no account of the write step (final text {(ctx.final_text or '')[:120]!r})"
    _, region, days = account
    ok = region == truth["region"] and days == str(truth["retention_days"])
    shown = f"the write step's request showed region={region or 'missing'}, retention_days={days or 'missing'}"
    events, asked = compaction(ctx)
    vacuous = late(ctx, write_step(ctx), "write step") if ok and (events or asked) else None
    if vacuous is not None:
        return None, f"{vacuous}; {shown}"
    return ok, f"{shown} ({why})"


def config(ctx: VerifierContext, truth: dict[str, Any]) -> Verdict:
    data, why = ctx.workspace_yaml(CONFIG, want=dict)
    if data is None:
        return False, f"{CONFIG}: {why}"
    want = {"region": truth["region"], "retention_days": truth["retention_days"], "shards": sorted(truth["shards"])}
    wrong = {k: data.get(k) for k in want if data.get(k) != want[k]}
    extra = sorted(set(data) - set(want))
    ok = not wrong and not extra
    return ok, "config as required" if ok else f"{CONFIG}: wrong or missing {wrong}" + (f"; extra keys {extra}" if extra else "")


def score(ctx: VerifierContext) -> dict[str, Verdict]:
    truth = ctx.truth if isinstance(ctx.truth, dict) else {}
    if not {"region", "retention_days", "shards"} <= set(truth):
        problem = (None, "truth.json lacks region/retention_days/shards (task bug)")
        return {H1: problem, H2: problem, A1: problem}
    return {H1: recorded(ctx), H2: kept(ctx, truth), A1: config(ctx, truth)}
