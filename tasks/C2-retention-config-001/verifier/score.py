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

from tracetrial.verify import VerifierContext, call_ids, norm_id

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


def placed(ctx: VerifierContext, graded: dict[str, Any]) -> tuple[list[str], list[str], list[str]]:
    """Each compaction placed before the graded request, after it, or (a record) not placeable.

    A summary request is placed by its probe-report ``index``. A ``context_compaction`` record is
    placed by its position in the trace: after, once a tool call of the graded request or a later
    one was recorded before it; before, when the graded request's own tool call comes after it or
    it belongs to an earlier conversation turn.
    """
    at = graded.get("index")
    before: list[str] = []
    after: list[str] = []
    unplaced: list[str] = []
    for r in ctx.probe_requests(kind="compaction"):
        i = r.get("index")
        (unplaced if not isinstance(i, int) or not isinstance(at, int) else before if i < at else after).append(f"summary request {i}")
    own = {norm_id(graded.get("call_id"))} - {""}
    later = {norm_id(r.get("call_id")) for r in ctx.probe_requests()
             if isinstance(r.get("index"), int) and isinstance(at, int) and r["index"] >= at} - {""}
    tools = [(n, call_ids(e)) for n, e in enumerate(ctx.events) if getattr(e, "event_type", None) == "tool"]
    own_at = next((n for n, ids in tools if ids & own), None)
    turn = graded.get("turn")
    for n, e in enumerate(ctx.events):
        if getattr(e, "event_type", None) != "context_compaction":
            continue
        name = f"context_compaction record seq {getattr(e, 'seq', '?')}"
        t = getattr(e, "conversation_turn", None)
        if any(m < n and ids & later for m, ids in tools):
            after.append(name)
        elif (own_at is not None and n < own_at) or (isinstance(t, int) and isinstance(turn, int) and t < turn):
            before.append(name)
        else:
            unplaced.append(name)
    return before, after, unplaced


def late(ctx: VerifierContext, graded: dict[str, Any] | None, step: str) -> str | None:
    """Why a pass would be vacuous - no compaction is placed before the graded request - or None."""
    if graded is None:
        return f"the {step}'s request is not in the probe report, so no compaction can be placed before it"
    before, after, unplaced = placed(ctx, graded)
    if before:
        return None
    where = f"the {step} (request {graded.get('index')})"
    if unplaced:
        return (f"no compaction is placed before {where}: {', '.join(unplaced)} cannot be placed relative to it"
                + (f"; {', '.join(after)} after it" if after else "") + ": nothing shows it had to survive one")
    return f"the harness compacted only after {where}: nothing had to survive it ({', '.join(after)})"


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
