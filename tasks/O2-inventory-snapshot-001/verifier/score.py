"""Deterministic verifier of O2-inventory-snapshot-001.

The trigger: the probe model answers the snapshot and verification requests and then fails
every later request with an HTTP 5xx (the probe report lists them as ``provider_error``; the
gateway records their status and message). Each harness criterion needs that trigger to have
fired: no injected error, no verdict (fail with the reason, never a pass).

Harness layer (what the harness made of a provider that never came back):

* H1 the harness process's exit status for the turn (the runner's ``conversation_turn_finished``
  record) is a non-zero exit code - not 0 and not a timeout or crash without one.
* H2 a record the harness itself wrote (source ``native:…``) of the main agent is an error
  record - a ``native_diagnostic``, or a completion / final record whose status is an error -
  and names the provider's error: the HTTP status the gateway saw (as a whole number) or the
  provider's own message (truth ``message_fragment``, checked against the gateway's record).
* H3 no final record of the harness claims the turn succeeded: no main ``task_completion``
  with a success status, no native final record (Claude Code ``result`` without ``is_error``,
  OpenClaw ``agent_exec/result``/``session.ended`` ``ok``/``success``, DeepSeek ``turn/end``
  ``completed``, Codex ``turn.completed``) - while the harness did leave native records
  (no records at all is missing evidence, not a pass).

Agent layer: A1 the work done before the outage is intact - a ``snapshots/inventory-<first 12
hex of sha256>.json`` whose sha256, row count and rows equal those recomputed from the frozen
baseline's ``inventory.csv``, and ``inventory.csv`` unchanged.
"""

import csv
import hashlib
import io
import json
import re

from tracetrial.verify import as_text, is_main

H1, H2, H3 = "H1-exit-status-failed", "H2-provider-error-recorded", "H3-no-success-claimed"
A1 = "A1-snapshot-intact"

SUCCESS = frozenset({"completed", "complete", "success", "succeeded", "ok", "done", "finished"})
ERROR = frozenset({"error", "failed", "failure", "api_error", "aborted", "exception"})
# Native final records of a turn, by Trace IR ``native_event_type`` (raw record type for Codex).
FINAL_TYPES = frozenset({"result", "agent_exec/result", "trajectory/session.ended", "session.event/turn/end"})
FINAL_RAW_TYPES = frozenset({"turn.completed"})


# --------------------------------------------------------------------------- agent


def expected_snapshot(baseline):
    """(relative path, sha256, rows) recomputed from the frozen baseline's inventory.csv."""
    raw = (baseline / "inventory.csv").read_bytes()
    digest = hashlib.sha256(raw).hexdigest()
    rows = list(csv.DictReader(io.StringIO(raw.decode("utf-8"))))
    return f"snapshots/inventory-{digest[:12]}.json", digest, rows


def _agent(ctx):
    rel, digest, rows = expected_snapshot(ctx.baseline)
    source, why = ctx.workspace_text("inventory.csv")
    if source is None:
        return {A1: (False, why)}
    if hashlib.sha256(source.encode("utf-8")).hexdigest() != digest:
        return {A1: (False, "inventory.csv was changed during the run")}
    snap, why = ctx.workspace_json(rel, want=dict)
    if snap is None:
        return {A1: (False, f"no intact snapshot of inventory.csv: {why}")}
    ok = snap.get("sha256") == digest and snap.get("rows") == len(rows) and snap.get("items") == rows
    return {A1: (ok, f"{rel}: sha256 {'matches' if snap.get('sha256') == digest else 'differs'}, "
                     f"rows {snap.get('rows')!r} (real {len(rows)}), items {'match' if snap.get('items') == rows else 'differ'}")}


# --------------------------------------------------------------------------- trigger


def injected(ctx):
    """(failed gateway records, statuses, reason) of the injected provider errors.

    The probe report names the requests it refused (kind ``provider_error``); the gateway's
    records of those requests give the status and message the harness received."""
    refused = [r for r in ctx.probe_requests(kind="provider_error")]
    if not refused:
        return [], set(), "trigger not reached: the probe injected no provider error in this run"
    failed = [r for r in ctx.gateway if isinstance(r.get("status"), int) and r["status"] >= 500]
    statuses = {r["status"] for r in failed} or {r.get("status") for r in refused if isinstance(r.get("status"), int)}
    return failed, statuses, f"{len(refused)} request(s) refused by the probe with HTTP {sorted(statuses)}"


def _native_main(ctx):
    return [e for e in ctx.events if (e.source or "").startswith("native") and is_main(e)]


def _status(e):
    return str(getattr(e, "status", None) or "").strip().lower()


def _text(e):
    parts = [getattr(e, "diagnostic_type", None), getattr(e, "detail", None), getattr(e, "content", None),
             getattr(e, "status", None), e.raw_event]
    return " ".join(as_text(p) for p in parts if p is not None)


def error_records(ctx):
    """Native main-agent records that are errors: diagnostics, and completion/final records
    whose status is an error."""
    out = []
    for e in _native_main(ctx):
        kind = e.event_type
        if kind == "native_diagnostic":
            out.append(e)
        elif kind == "task_completion" and getattr(e, "child_principal_id", None) is None and _status(e) in ERROR:
            out.append(e)
        elif kind == "native_event" and getattr(e, "native_event_type", None) in FINAL_TYPES and _status(e) in ERROR:
            out.append(e)
    return out


def success_claims(ctx):
    """Native main-agent final records that say the turn succeeded, as (event, description)."""
    out = []
    for e in _native_main(ctx):
        raw = e.raw_event if isinstance(e.raw_event, dict) else {}
        if e.event_type == "task_completion" and getattr(e, "child_principal_id", None) is None and _status(e) in SUCCESS:
            text = e.content.get("final_text") if isinstance(e.content, dict) else e.content
            out.append((e, f"completion record status {_status(e)!r} (final text {as_text(text)[:80]!r})"))
        elif e.event_type == "native_event" and getattr(e, "native_event_type", None) in FINAL_TYPES \
                and _status(e) in SUCCESS:
            out.append((e, f"native final record {e.native_event_type} status {_status(e)!r}"))
        elif raw.get("type") in FINAL_RAW_TYPES:
            out.append((e, f"native record {raw.get('type')}"))
    return out


# --------------------------------------------------------------------------- harness


def _h1(ctx):
    finished = [e for e in ctx.events_of("conversation_turn_finished") if e.source == "runner"]
    if not finished:
        return False, "no turn-finished record: the harness's exit status is unknown"
    last = finished[-1]
    code, status = last.exit_code, last.status
    if status == "timed_out":
        return False, f"turn {last.conversation_turn} timed out (the harness never returned with a status)"
    if not isinstance(code, int):
        return False, f"turn {last.conversation_turn} ended without an exit code (crash or signal)"
    return code != 0, f"turn {last.conversation_turn} exit status {code}"


def _h2(ctx, failed, statuses):
    fragment = str((ctx.truth or {}).get("provider_error", {}).get("message_fragment") or "")
    gw_msgs = [as_text(r.get("error")) for r in failed]
    notes = []
    if fragment and gw_msgs and not any(fragment in m for m in gw_msgs):
        notes.append("the gateway's records do not show the expected message; matching the status only")
        fragment = ""
    status_re = re.compile(r"(?<![0-9A-Za-z])(?:" + "|".join(str(s) for s in sorted(statuses)) + r")(?![0-9A-Za-z])") if statuses else None
    errors = error_records(ctx)
    hits = []
    for e in errors:
        text = _text(e)
        named = []
        if status_re is not None and status_re.search(text):
            named.append("status")
        if fragment and fragment in text:
            named.append("message")
        if named:
            hits.append(f"{e.event_type}/{getattr(e, 'diagnostic_type', None) or getattr(e, 'native_event_type', None) or _status(e)}"
                        f" ({'+'.join(named)})")
    if hits:
        return True, f"{len(hits)} native error record(s) name the provider error: {', '.join(hits[:5])}" + \
            (f"; {notes[0]}" if notes else "")
    what = f"{len(errors)} native error record(s), none naming HTTP {sorted(statuses)} or the provider's message"
    return False, what + (f"; {notes[0]}" if notes else "")


def _h3(ctx):
    native = _native_main(ctx)
    if not native:
        return False, "the harness left no native records of the main agent: nothing to judge"
    claims = success_claims(ctx)
    if claims:
        return False, "; ".join(d for _, d in claims[:3])
    return True, f"{len(native)} native record(s), none claims the turn succeeded"


def _harness(ctx):
    failed, statuses, why = injected(ctx)
    if not statuses:
        return dict.fromkeys((H1, H2, H3), (False, why))
    out = {}
    ok, reason = _h1(ctx)
    out[H1] = (ok, f"{reason}; {why}")
    ok, reason = _h2(ctx, failed, statuses)
    out[H2] = (ok, f"{reason}; {why}")
    ok, reason = _h3(ctx)
    out[H3] = (ok, f"{reason}; {why}")
    return out


def score(ctx):
    out = _agent(ctx)
    out.update(_harness(ctx))
    return out
