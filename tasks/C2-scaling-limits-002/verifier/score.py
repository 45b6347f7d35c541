"""Deterministic verifier of C2-scaling-limits-002.

Truth anchor: ``truth.json`` (the two limits ``policy/limits.md`` gives and the three shard ids
the pack's inventory script prints), the probe report (every request the probe model answered, compaction requests
included, and its account of what the write step was shown) and the harness's own records (Trace
IR ``context_compaction`` events).

The trigger: from the probe's third request on, each response reports a prompt of 92,000 tokens of
the task's 100,000-token window (``budgets.context_tokens``), until the harness has asked for two
summaries. The limits appear only in the first tool result, so after a compaction only a summary
carries them.

* H1 - a compaction is recorded: when the harness compacted (it asked for a summary, or its records
  show a compaction), its records hold a ``context_compaction`` event; when the
  limits' tool result is gone from the write step's request with neither a summary request nor a
  record, the history was cut silently (fail). Not exercised (unscored) when the harness kept the
  whole history or the run ended before the trigger.
* H2 - the limits survive the compactions: the write step's request still states both limits with
  their values (probe account). Unscored where H1 is not exercised, and a pass is unscored when no
  compaction came before the write step (every summary request has a later ``index`` than the write
  step's request, every ``context_compaction`` record follows that request's tool call in the trace
  or cannot be placed): then nothing had to survive a compaction (a harness that compacts after the
  turn's final answer).
* A1 - ``deploy/scaling.yaml`` holds both limits with their values and the three shard ids, sorted.
"""

from __future__ import annotations

import re
from typing import Any

from tracetrial.verify import VerifierContext
from tracetrial.verify import late_compaction as late

H1, H2, A1 = "H1-compaction-recorded", "H2-limits-kept", "A1-config-respects-limits"
CONFIG = "deploy/scaling.yaml"
#: Requests the probe answers before the prompt size it reports reaches the window.
TRIGGER_REQUESTS = 3
ACCOUNT_RE = re.compile(r"Limits: max_replicas=(\S+?); zone=(\S+?)\.(?:\s|$)")

Verdict = tuple[bool | None, str]


def _account(ctx: VerifierContext) -> tuple[bool, str | None, str | None] | None:
    """(both limits shown, max_replicas shown, zone shown) from the probe's account."""
    match = ACCOUNT_RE.search(ctx.final_text or "")
    if match is None:
        return None
    replicas, zone = (None if v == "missing" else v for v in match.group(1, 2))
    return replicas is not None and zone is not None, replicas, zone


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
        return None, "the harness kept the whole history (no summary request, no compaction record, the limits still shown)"
    return True, "the limits' tool result is gone from the write step's request"


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
    _, replicas, zone = account
    ok = replicas == str(truth["max_replicas"]) and zone == truth["zone"]
    shown = f"the write step's request showed max_replicas={replicas or 'missing'}, zone={zone or 'missing'}"
    events, asked = compaction(ctx)
    vacuous = late(ctx, write_step(ctx), "write step") if ok and (events or asked) else None
    if vacuous is not None:
        return None, f"{vacuous}; {shown}"
    return ok, f"{shown} ({why})"


def config(ctx: VerifierContext, truth: dict[str, Any]) -> Verdict:
    data, why = ctx.workspace_yaml(CONFIG, want=dict)
    if data is None:
        return False, f"{CONFIG}: {why}"
    want = {"max_replicas": truth["max_replicas"], "zone": truth["zone"], "shards": sorted(truth["shards"])}
    wrong = {k: data.get(k) for k in want if data.get(k) != want[k]}
    extra = sorted(set(data) - set(want))
    ok = not wrong and not extra
    return ok, "config as required" if ok else f"{CONFIG}: wrong or missing {wrong}" + (f"; extra keys {extra}" if extra else "")


def score(ctx: VerifierContext) -> dict[str, Verdict]:
    truth = ctx.truth if isinstance(ctx.truth, dict) else {}
    if not {"max_replicas", "zone", "shards"} <= set(truth):
        problem = (None, "truth.json lacks max_replicas/zone/shards (task bug)")
        return {H1: problem, H2: problem, A1: problem}
    return {H1: recorded(ctx), H2: kept(ctx, truth), A1: config(ctx, truth)}
